package main

import (
	"maps"
	"testing"

	"github.com/statehost/statehost/plugins/internal/counttest"
)

// TestMigrateBack migrates count's counts to JSON and back: the decimal counts come back as
// they were, and count's form passes through the reverse migration unchanged.
func TestMigrateBack(t *testing.T) {
	d := counttest.NewDriver(t)
	d.Store("counts").Put("a", []byte("7"))
	d.Store("counts").Put("b", []byte("12"))
	if err := d.Migrate("counts", 1); err != nil {
		t.Fatal(err)
	}
	if got := d.Store("counts").All(); !maps.Equal(got, map[string]string{"a": `{"n":7}`, "b": `{"n":12}`}) {
		t.Fatalf("after the migration: %v", got)
	}
	d.Store("counts").Put("c", []byte("3")) // decimal already
	if err := d.MigrateReverse("counts", 1); err != nil {
		t.Fatal(err)
	}
	if got := d.Store("counts").All(); !maps.Equal(got, map[string]string{"a": "7", "b": "12", "c": "3"}) {
		t.Fatalf("after the reverse migration: %v", got)
	}
	d.Store("counts").Put("bad", []byte("x"))
	if err := d.MigrateReverse("counts", 1); err == nil {
		t.Fatal("a reverse migration over an entry in neither form succeeded")
	}
}
