package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/tetratelabs/wazero/api"

	"github.com/statehost/statehost/abi"
)

// Store versions and migration (abi "Store versions and migration"): a module declares the
// version of each store's entries (statehost_store_version), and turns entries of an older
// version into its own form (statehost_migrate). The engine makes the calls; which stores to
// migrate, over which entries, and what becomes of the new contents is the caller's.

// DeclaresStoreVersions reports whether the module exports statehost_store_version: without
// it, every store is at abi.DefaultStoreVersion (StoreVersions then calls nothing).
func (m *Module) DeclaresStoreVersions() bool { return m.hasStoreVersion }

// CanMigrate reports whether the module exports statehost_migrate.
func (m *Module) CanMigrate() bool { return m.hasMigrate }

// StoreVersions returns the version the module declares for each store of the bound task: it
// opens each store by name, as store_open does, and calls statehost_store_version with its
// handle. A module that does not export it declares abi.DefaultStoreVersion for every store.
// A version below abi.DefaultStoreVersion, or above it for a window or session store, is an
// error naming the store; a failed call is a *GuestError, after which the instance is dead.
func (in *Instance) StoreVersions(ctx context.Context) (map[string]uint32, error) {
	if !in.busy.CompareAndSwap(false, true) {
		return nil, ErrInstanceBusy
	}
	defer in.busy.Store(false)
	if err := in.ready(); err != nil {
		return nil, err
	}
	names := slices.Sorted(maps.Keys(in.task.Stores))
	names = slices.AppendSeq(names, maps.Keys(in.task.Windows))
	names = slices.AppendSeq(names, maps.Keys(in.task.Sessions))
	out := make(map[string]uint32, len(names))
	if !in.mod.hasStoreVersion {
		for _, name := range names {
			out[name] = abi.DefaultStoreVersion
		}
		return out, nil
	}
	fn := in.guest.ExportedFunction(abi.ExportStoreVersion)
	for _, name := range names {
		h := in.openStore(name)
		var stack [1]uint64
		stack[0] = api.EncodeI32(h)
		in.valueResult = true
		err := in.call(ctx, fn, stack[:])
		in.valueResult = false
		if err != nil {
			var ge *GuestError
			if errors.As(err, &ge) {
				ge.Call = fmt.Sprintf("%s of store %q", abi.ExportStoreVersion, name)
			}
			return nil, err
		}
		v := api.DecodeI32(stack[0])
		kind := in.stores[h].kind
		switch {
		case v < abi.DefaultStoreVersion:
			return nil, fmt.Errorf("engine: module %s declares version %d for store %q: a version is at least %d",
				in.mod.name, v, name, abi.DefaultStoreVersion)
		case v != abi.DefaultStoreVersion && kind != abi.StoreKeyValue:
			what := "session"
			if kind == abi.StoreWindow {
				what = "window"
			}
			return nil, fmt.Errorf("engine: module %s declares version %d for store %q, a %s store: only key-value stores have versions",
				in.mod.name, v, name, what)
		}
		out[name] = uint32(v)
	}
	return out, nil
}

// Entry is an entry of a store: a key and its value, neither nil.
type Entry struct {
	Key, Value []byte
}

// Migrate calls statehost_migrate once: with the handle of the key-value store called name
// (opened as store_open does), fromVersion, and the handle of an iterator over entries (the
// next entries of the store's old contents, in key order), which the guest reads with
// iter_next. The engine only reads entries, during the call. The bound task's store of that
// name is the store's new contents: what the guest writes there is the new form of the
// entries. A failure is a *GuestError (its Call names the migration), after which the
// instance is dead, as after a failed batch.
func (in *Instance) Migrate(ctx context.Context, name string, fromVersion uint32, entries []Entry) error {
	if !in.busy.CompareAndSwap(false, true) {
		return ErrInstanceBusy
	}
	defer in.busy.Store(false)
	if err := in.ready(); err != nil {
		return err
	}
	if !in.mod.hasMigrate {
		return fmt.Errorf("engine: module %s does not export %s: it cannot migrate store %q from version %d",
			in.mod.name, abi.ExportMigrate, name, fromVersion)
	}
	if _, ok := in.task.Stores[name]; !ok {
		return fmt.Errorf("engine: migrate: processor %q has no key-value store %q", in.task.Processor, name)
	}
	h := in.openStore(name)
	// The iterator takes a slot of the guest's iterators, all free between calls; the call
	// closes it with every iterator left open.
	slot := in.freeIterator()
	gen := (in.iterGen[slot] + 1) & iterGenMask
	in.iterGen[slot] = gen
	in.iters[slot] = &openIterator{store: h, it: &entryIterator{entries: entries, at: -1}}
	stack := [3]uint64{api.EncodeI32(h), api.EncodeI32(int32(fromVersion)), api.EncodeI32(slot | gen<<iterSlotBits)}
	err := in.call(ctx, in.guest.ExportedFunction(abi.ExportMigrate), stack[:])
	if err != nil {
		var ge *GuestError
		if errors.As(err, &ge) {
			ge.Call = fmt.Sprintf("%s of store %q from version %d", abi.ExportMigrate, name, fromVersion)
		}
	}
	return err
}

// entryIterator is an Iterator over entries.
type entryIterator struct {
	entries []Entry
	at      int
}

func (it *entryIterator) Next() bool {
	if it.at < len(it.entries) {
		it.at++
	}
	return it.at < len(it.entries)
}

func (it *entryIterator) Key() []byte   { return it.entries[it.at].Key }
func (it *entryIterator) Value() []byte { return it.entries[it.at].Value }
func (it *entryIterator) Err() error    { return nil }
func (it *entryIterator) Close() error  { it.entries = nil; return nil }
