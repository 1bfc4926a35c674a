package sdktest

import (
	"fmt"
	"maps"
	"slices"

	"github.com/statehost/statehost/abi"
	"github.com/statehost/statehost/pluginsdk/internal/hostcall"
)

// migrateChunk is how many entries the driver hands to one statehost_migrate call.
const migrateChunk = 1000

// StoreVersions returns the version the processor declares for each of its stores, as the
// host asks it (statehost_store_version, with each store's handle; abi.DefaultStoreVersion
// where it declares none).
func (d *Driver) StoreVersions() (map[string]int, error) {
	names := slices.Sorted(maps.Keys(d.stores))
	names = slices.AppendSeq(names, maps.Keys(d.timed))
	out := make(map[string]int, len(names))
	for _, name := range names {
		v := int32(abi.DefaultStoreVersion)
		if hostcall.Entry.StoreVersion != nil {
			d.host.message = ""
			v = hostcall.Entry.StoreVersion(d.host.StoreOpen([]byte(name)))
			d.host.closeIters()
		}
		if v < abi.DefaultStoreVersion || v != abi.DefaultStoreVersion && d.timed[name] != nil {
			return nil, fmt.Errorf("sdktest: processor %q declares version %d for store %q", d.cfg.Processor, v, name)
		}
		out[name] = int(v)
	}
	return out, nil
}

// Migrate migrates the key-value store name from version from, as the host does when a task
// starts over a store of an older version than the processor declares: the store's current
// contents are the old entries; the store is emptied, and the old entries are handed to
// statehost_migrate in key order (at most 1,000 per call); what the processor writes is the
// store's new contents. On failure the store gets its old contents back, and the error says
// what the processor said.
func (d *Driver) Migrate(name string, from int) error {
	return d.migrate("migrate", hostcall.Entry.Migrate, name, from)
}

// MigrateReverse migrates the key-value store name back to version to, as the host does at a
// rollback over a store this processor migrated (statehost_migrate_reverse; the processor's
// WithReverseMigration): as Migrate, the store's entries, of the processor's version, are
// handed over in key order, and what the processor writes is the store's contents of version
// to. A processor that declares the store not reversible to version to is an error.
func (d *Driver) MigrateReverse(name string, to int) error {
	if hostcall.Entry.StoreReversible != nil && d.stores[name] != nil {
		d.host.message = ""
		floor := hostcall.Entry.StoreReversible(d.host.StoreOpen([]byte(name)))
		if int32(to) < floor {
			return fmt.Errorf("sdktest: processor %q declares store %q reversible to version %d, not %d", d.cfg.Processor, name, floor, to)
		}
	}
	return d.migrate("migrate_reverse", hostcall.Entry.MigrateReverse, name, to)
}

// migrate hands the entries of the store name to call with version, chunk by chunk, over an
// emptied store.
func (d *Driver) migrate(op string, call func(store, version, entries int32) int32, name string, version int) error {
	old := d.stores[name]
	if old == nil {
		return fmt.Errorf("sdktest: no key-value store %q", name)
	}
	entries := old.entries(nil, nil, nil, false)
	d.stores[name] = newMemStore()
	h := d.host
	handle := h.StoreOpen([]byte(name))
	for len(entries) > 0 {
		chunk := entries[:min(migrateChunk, len(entries))]
		entries = entries[len(chunk):]
		h.message = ""
		code := call(handle, int32(version), h.openIter(chunk, false))
		h.closeIters()
		if code != abi.CodeOK {
			d.stores[name] = old
			return d.failure(op, code)
		}
	}
	return nil
}
