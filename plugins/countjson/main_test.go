package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/statehost/statehost/plugins/internal/counttest"
	"github.com/statehost/statehost/pluginsdk/sdktest"
)

// TestCountJSON checks that countjson emits what count emits, and stores JSON.
func TestCountJSON(t *testing.T) {
	d := counttest.NewDriver(t)
	counttest.CheckCounts(t, d)
	if got := d.Store("counts").All(); !maps.Equal(got, map[string]string{"a": `{"n":2}`, "b": `{"n":1}`, "": `{"n":1}`}) {
		t.Fatalf("counts = %v", got)
	}
}

// TestMigrateFromCount migrates count's decimal counts, and goes on counting from them.
func TestMigrateFromCount(t *testing.T) {
	d := counttest.NewDriver(t)
	versions, err := d.StoreVersions()
	if err != nil || !maps.Equal(versions, map[string]int{"counts": 2}) {
		t.Fatalf("StoreVersions = %v, %v", versions, err)
	}
	old := d.Store("counts")
	for i := range 2500 { // more than one statehost_migrate call
		old.Put(fmt.Sprintf("w%04d", i), []byte(fmt.Sprint(i)))
	}
	old.Put("done", []byte(`{"n":9}`)) // migrated before a crash under at_least_once
	if err := d.Migrate("counts", 1); err != nil {
		t.Fatal(err)
	}
	s := d.Store("counts")
	if s.Len() != 2501 {
		t.Fatalf("%d counts after the migration, want 2501", s.Len())
	}
	for k, want := range map[string]string{"w0000": `{"n":0}`, "w2499": `{"n":2499}`, "done": `{"n":9}`} {
		if v, _ := s.Get(k); string(v) != want {
			t.Fatalf("%s = %q, want %q", k, v, want)
		}
	}
	if err := d.Process(sdktest.KV("w0041", "x"), sdktest.KV("done", "x")); err != nil {
		t.Fatal(err)
	}
	if got := counttest.Emitted(d); !slices.Equal(got, []string{"w0041=42", "done=10"}) {
		t.Fatalf("emitted %q", got)
	}
}

// TestMigrateRefusesGarbage checks that an entry in neither form fails the migration, naming
// it, and leaves the store as it was.
func TestMigrateRefusesGarbage(t *testing.T) {
	d := counttest.NewDriver(t)
	d.Store("counts").Put("a", []byte("1"))
	d.Store("counts").Put("bad", []byte("one"))
	err := d.Migrate("counts", 1)
	if err == nil || !strings.Contains(err.Error(), `entry "bad"`) {
		t.Fatalf("Migrate = %v, want an error naming the entry", err)
	}
	if got := d.Store("counts").All(); !maps.Equal(got, map[string]string{"a": "1", "bad": "one"}) {
		t.Fatalf("store after a failed migration = %v", got)
	}
}
