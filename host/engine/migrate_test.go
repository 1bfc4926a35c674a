package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/statehost/statehost/abi"
	"github.com/statehost/statehost/store"
)

// entries makes engine entries of "key=value" pairs.
func entries(kvs ...string) []Entry {
	out := make([]Entry, len(kvs))
	for i, kv := range kvs {
		k, v, _ := strings.Cut(kv, "=")
		out[i] = Entry{Key: []byte(k), Value: []byte(v)}
	}
	return out
}

// TestStoreVersionsAndMigrateFromC drives the C guest written from abi/ alone: the store
// versions its STATEHOST_DECLARE_STORE_VERSIONS table declares, a migration over two calls
// whose entries are rewritten, re-keyed and deleted into the new contents, and the failure of
// an entry, which names the migration and kills the instance.
func TestStoreVersionsAndMigrateFromC(t *testing.T) {
	e, _ := testEngine(t, Config{})
	mod := compile(t, e, "migrate")
	if !mod.DeclaresStoreVersions() || !mod.CanMigrate() {
		t.Fatalf("DeclaresStoreVersions = %v, CanMigrate = %v", mod.DeclaresStoreVersions(), mod.CanMigrate())
	}
	r := newRig(t, "counts", "other", "plain")
	in := instantiate(t, e, "migrate", r.task("migrate"))
	ctx := context.Background()
	versions, err := in.StoreVersions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]uint32{"counts": 2, "other": 1, "plain": 1}; !maps.Equal(versions, want) {
		t.Fatalf("StoreVersions = %v, want %v", versions, want)
	}
	// Two calls: the store holds the new contents across them.
	if err := in.Migrate(ctx, "counts", 1, entries("a=1", "drop=x", "old:k=5")); err != nil {
		t.Fatal(err)
	}
	if err := in.Migrate(ctx, "counts", 1, entries("z=26")); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": "v2:1", "new:k": "v2:5", "z": "v2:26"}
	if got := dump(t, r.stores["counts"]); !maps.Equal(got, want) {
		t.Fatalf("new contents = %v, want %v", got, want)
	}
	// The guest checks the handle and the version it is given.
	err = in.Migrate(ctx, "counts", 1, entries("b=2", "fail=3"))
	ge := guestError(t, err, ErrGuestFailed)
	if ge.Call != `statehost_migrate of store "counts" from version 1` || !strings.Contains(ge.Detail, `cannot migrate the entry "fail"`) {
		t.Fatalf("error %v: Call %q, Detail %q", err, ge.Call, ge.Detail)
	}
	if !strings.Contains(err.Error(), `(statehost_migrate of store "counts" from version 1)`) {
		t.Fatalf("error text %q does not name the migration", err)
	}
	if err := in.Migrate(ctx, "counts", 1, entries("c=3")); !errors.Is(err, ErrInstanceDead) {
		t.Fatalf("Migrate after a failure = %v, want ErrInstanceDead", err)
	}
}

// TestMigrateRefusals checks what Migrate and StoreVersions refuse without a guest call: a
// module without the exports, a store that is not a key-value store of the task.
func TestMigrateRefusals(t *testing.T) {
	e, _ := testEngine(t, Config{})
	r := newRig(t, "counts")
	plain := instantiate(t, e, "count_c", r.task("count", "out"))
	ctx := context.Background()
	versions, err := plain.StoreVersions(ctx)
	if err != nil || !maps.Equal(versions, map[string]uint32{"counts": 1}) {
		t.Fatalf("StoreVersions of a module without versions = %v, %v", versions, err)
	}
	if err := plain.Migrate(ctx, "counts", 1, entries("a=1")); err == nil || !strings.Contains(err.Error(), "does not export statehost_migrate") {
		t.Fatalf("Migrate of a module without statehost_migrate = %v", err)
	}
	in := instantiate(t, e, "migrate", newRig(t, "counts").task("migrate"))
	if err := in.Migrate(ctx, "nosuch", 1, entries("a=1")); err == nil || !strings.Contains(err.Error(), `no key-value store "nosuch"`) {
		t.Fatalf("Migrate of an unknown store = %v", err)
	}
	// The refusals left the instance alive.
	if err := in.Migrate(ctx, "counts", 1, entries("a=1")); err != nil {
		t.Fatal(err)
	}
}

// TestVersionRecordKeyRefused checks that a guest cannot write the key of the changelog's
// version records: state_put answers CodeBadArgument and writes nothing.
func TestVersionRecordKeyRefused(t *testing.T) {
	e, _ := testEngine(t, Config{})
	r := newRig(t, "counts", "other")
	in := instantiate(t, e, "migrate", r.task("migrate"))
	batch := []Record{kv([]byte(store.VersionRecordKey), []byte("7"))}
	if err := in.ProcessBatch(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	got := dump(t, r.stores["counts"])
	if want := map[string]string{"rc": "-4"}; !maps.Equal(got, want) {
		t.Fatalf("store after a put of the version record's key = %q, want %q", got, want)
	}
}

// TestMigrateFromGo drives the Go SDK's side through plugins/countjson: its WithStoreVersion
// declares version 2 of "counts", its migration turns count's decimal counts into JSON across
// iter_next's buffer refills, and an entry it cannot read fails the call with the entry's key
// in the guest's message.
func TestMigrateFromGo(t *testing.T) {
	if abi.ReservedKey != store.VersionRecordKey {
		t.Fatalf("abi.ReservedKey %q differs from store.VersionRecordKey %q", abi.ReservedKey, store.VersionRecordKey)
	}
	e, _ := testEngine(t, Config{})
	r := newRig(t, "counts")
	in := instantiate(t, e, "countjson", r.task("count", "out"))
	ctx := context.Background()
	versions, err := in.StoreVersions(ctx)
	if err != nil || !maps.Equal(versions, map[string]uint32{"counts": 2}) {
		t.Fatalf("StoreVersions = %v, %v", versions, err)
	}
	var old []Entry
	want := map[string]string{}
	for i := range 3000 { // more entries than the SDK's iterator buffer holds
		k := fmt.Sprintf("word-%05d", i)
		old = append(old, Entry{Key: []byte(k), Value: fmt.Appendf(nil, "%d", i)})
		want[k] = fmt.Sprintf(`{"n":%d}`, i)
	}
	if err := in.Migrate(ctx, "counts", 1, old); err != nil {
		t.Fatal(err)
	}
	if got := dump(t, r.stores["counts"]); !maps.Equal(got, want) {
		t.Fatalf("new contents: %d entries, want %d", len(got), len(want))
	}
	// The migrated store is the processor's: it counts on from it.
	if err := in.ProcessBatch(ctx, []Record{kv([]byte("word-00041"), []byte("x"))}); err != nil {
		t.Fatal(err)
	}
	if got := r.emitted.strings(); !slices.Equal(got, []string{"out:word-00041=42"}) {
		t.Fatalf("emitted %q", got)
	}
	err = in.Migrate(ctx, "counts", 1, entries("a=1", "b=two"))
	ge := guestError(t, err, ErrGuestFailed)
	if !strings.Contains(ge.Detail, `entry "b"`) {
		t.Fatalf("Detail %q does not name the entry", ge.Detail)
	}
}

// TestStoreVersionsOfWindowStore checks that a module that declares a version above 1 for a
// window store is refused, naming the store: only key-value stores have versions.
func TestStoreVersionsOfWindowStore(t *testing.T) {
	e, _ := testEngine(t, Config{})
	r := newRig(t, "other")
	w, err := r.st.OpenWindow("counts", store.Options{Backend: store.Memory, Kind: store.Window,
		Window: store.WindowSpec{Size: 1000}})
	if err != nil {
		t.Fatal(err)
	}
	task := r.task("migrate")
	task.Windows, task.Clock = map[string]store.WindowStore{"counts": w}, r.st
	// The guest's init opens "counts" as a store of any type: it gets the window store.
	in := instantiate(t, e, "migrate", task)
	_, err = in.StoreVersions(context.Background())
	if err == nil || !strings.Contains(err.Error(), `version 2 for store "counts", a window store`) {
		t.Fatalf("StoreVersions = %v, want a refusal of the window store's version", err)
	}
}
