package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
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
	return in.askStores(ctx, abi.ExportStoreVersion, in.mod.hasStoreVersion, abi.DefaultStoreVersion, func(name string, kind int32, v int32) error {
		switch {
		case v < abi.DefaultStoreVersion:
			return fmt.Errorf("engine: module %s declares version %d for store %q: a version is at least %d",
				in.mod.name, v, name, abi.DefaultStoreVersion)
		case v != abi.DefaultStoreVersion && kind != abi.StoreKeyValue:
			what := "session"
			if kind == abi.StoreWindow {
				what = "window"
			}
			return fmt.Errorf("engine: module %s declares version %d for store %q, a %s store: only key-value stores have versions",
				in.mod.name, v, name, what)
		}
		return nil
	})
}

// ReversibleTo returns, for each store of the bound task, the lowest version to which the
// module's statehost_migrate_reverse can bring its entries back (statehost_store_reversible;
// abi "Reversible migrations"). A store it cannot migrate back gets math.MaxInt32, as does
// every store of a module that does not export statehost_store_reversible or
// statehost_migrate_reverse. A failed call is a *GuestError, after which the instance is dead.
func (in *Instance) ReversibleTo(ctx context.Context) (map[string]uint32, error) {
	ask := in.mod.hasStoreReversible && in.mod.hasMigrateReverse
	return in.askStores(ctx, abi.ExportStoreReversible, ask, math.MaxInt32, func(name string, _ int32, v int32) error {
		if v < abi.DefaultStoreVersion {
			return fmt.Errorf("engine: module %s declares store %q reversible to version %d: a version is at least %d",
				in.mod.name, name, v, abi.DefaultStoreVersion)
		}
		return nil
	})
}

// askStores calls the export fn, which answers a value, with the handle of each store of the
// bound task (opened by name, as store_open does), and returns the answers by store name,
// each checked by check; def for every store when the module does not export fn (has).
func (in *Instance) askStores(ctx context.Context, export string, has bool, def int32, check func(name string, kind, v int32) error) (map[string]uint32, error) {
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
	if !has {
		for _, name := range names {
			out[name] = uint32(def)
		}
		return out, nil
	}
	fn := in.guest.ExportedFunction(export)
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
				ge.Call = fmt.Sprintf("%s of store %q", export, name)
			}
			return nil, err
		}
		v := api.DecodeI32(stack[0])
		if err := check(name, in.stores[h].kind, v); err != nil {
			return nil, err
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
	return in.migrate(ctx, abi.ExportMigrate, in.mod.hasMigrate, name, fromVersion, entries)
}

// MigrateReverse calls statehost_migrate_reverse once, as Migrate calls statehost_migrate: the
// entries are in the module's own form, and what the guest writes to the bound task's store
// of that name is their form of toVersion (abi "Reversible migrations").
func (in *Instance) MigrateReverse(ctx context.Context, name string, toVersion uint32, entries []Entry) error {
	return in.migrate(ctx, abi.ExportMigrateReverse, in.mod.hasMigrateReverse, name, toVersion, entries)
}

// migrate calls the migration export (has: the module exports it) with the store name, the
// version and an iterator over entries.
func (in *Instance) migrate(ctx context.Context, export string, has bool, name string, version uint32, entries []Entry) error {
	if !in.busy.CompareAndSwap(false, true) {
		return ErrInstanceBusy
	}
	defer in.busy.Store(false)
	if err := in.ready(); err != nil {
		return err
	}
	dir := "from"
	if export == abi.ExportMigrateReverse {
		dir = "to"
	}
	if !has {
		return fmt.Errorf("engine: module %s does not export %s: it cannot migrate store %q %s version %d",
			in.mod.name, export, name, dir, version)
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
	stack := [3]uint64{api.EncodeI32(h), api.EncodeI32(int32(version)), api.EncodeI32(slot | gen<<iterSlotBits)}
	err := in.call(ctx, in.guest.ExportedFunction(export), stack[:])
	if err != nil {
		var ge *GuestError
		if errors.As(err, &ge) {
			ge.Call = fmt.Sprintf("%s of store %q %s version %d", export, name, dir, version)
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
