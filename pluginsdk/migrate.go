package pluginsdk

import (
	"fmt"

	"github.com/statehost/statehost/abi"
)

// MigrateFunc turns one entry of a store, key and value in the form of version m.From(), into
// the store's current form: it writes the entry's new form to m.Store() (Put under the same
// key, or under another key to re-key it), or nothing to drop the entry. key and value are
// valid only during the call. A non-nil error fails the migration: at a deploy the host then
// refuses the new module, which never runs, and the store keeps its old entries.
//
// A MigrateFunc must be deterministic: the host may run it more than once over the same
// entries (it tries a deploy's migration before it makes it). Under at_least_once it may also
// be given, after a crash, an entry it had already migrated (see "Store versions and
// migration" in package abi): leave such an entry as it is.
type MigrateFunc func(m *Migration, key, value []byte) error

// Migration is the migration of one store: the store and the version of its old entries, to
// the current version; or, for a reverse migration (WithReverseMigration), from the current
// version to an older one.
type Migration struct {
	store    *Store
	from, to int
}

// Store returns the store being migrated. It holds the store's new contents as built so far,
// empty before the first entry: Get, Range and Prefix read them, Put and Delete write them.
func (m *Migration) Store() *Store { return m.store }

// From returns the version of the old entries.
func (m *Migration) From() int { return m.from }

// To returns the version of the entries the migration writes: the store's current version,
// or for a reverse migration the older version it goes back to.
func (m *Migration) To() int { return m.to }

// WithStoreVersion declares that the processor reads and writes the entries of the key-value
// store name in the form of version (2 and up; a store without a version is at 1), and that
// fn turns the entries of any older version into that form. When a task of the processor
// starts over a store of an older version, the host migrates it first: it hands each old
// entry to fn, once, and replaces the store's entries by the ones fn wrote, with the new
// version, in one commit, before the processor sees a record (see "Store versions and
// migration" in package abi).
//
// A nil fn declares the version without a migration: the module then runs only over stores
// that are at that version, or empty. Register panics on a version below 1, on a store
// declared twice, and on an empty name.
//
//	pluginsdk.Register(count, pluginsdk.WithStores("counts"),
//		pluginsdk.WithStoreVersion("counts", 2, func(m *pluginsdk.Migration, key, value []byte) error {
//			n, err := strconv.ParseUint(string(value), 10, 64) // version 1: a decimal count
//			if err != nil {
//				return err
//			}
//			return m.Store().Put(key, fmt.Appendf(nil, `{"n":%d}`, n))
//		}))
func WithStoreVersion(name string, version int, fn MigrateFunc) Option {
	return func(r *registration) {
		switch {
		case name == "":
			panic("pluginsdk: WithStoreVersion with an empty store name")
		case version < abi.DefaultStoreVersion || version > 1<<31-1:
			panic(fmt.Sprintf("pluginsdk: WithStoreVersion(%q, %d): a version is at least %d", name, version, abi.DefaultStoreVersion))
		}
		for _, v := range r.versions {
			if v.name == name {
				panic(fmt.Sprintf("pluginsdk: WithStoreVersion: store %q is declared twice", name))
			}
		}
		r.versions = append(r.versions, storeVersion{name: name, version: version, fn: fn, reverseTo: version})
	}
}

// WithReverseMigration declares that the migration of the key-value store name to its version
// (WithStoreVersion, which must come before it) can be undone down to version to, and that fn
// turns an entry of the current form into the form of m.To() (to or above): a rollback
// (statehost rollback) to a module that reads that older form is then possible after the
// migration, and the host hands fn each entry, as for a migration. Without it a rollback over
// a migrated store is refused. Register panics when the store has no WithStoreVersion before
// it, and on a version to that is not below the store's version.
//
//	pluginsdk.WithReverseMigration("counts", 1, func(m *pluginsdk.Migration, key, value []byte) error {
//		n, err := parseJSON(value) // version 2: {"n":5}
//		if err != nil {
//			return err
//		}
//		return m.Store().Put(key, strconv.AppendUint(nil, n, 10)) // version 1: "5"
//	})
func WithReverseMigration(name string, to int, fn MigrateFunc) Option {
	return func(r *registration) {
		for i := range r.versions {
			v := &r.versions[i]
			if v.name != name {
				continue
			}
			if to < abi.DefaultStoreVersion || to >= v.version || fn == nil {
				panic(fmt.Sprintf("pluginsdk: WithReverseMigration(%q, %d): want a version from %d to %d and a function", name, to, abi.DefaultStoreVersion, v.version-1))
			}
			v.reverseTo, v.reverse = to, fn
			return
		}
		panic(fmt.Sprintf("pluginsdk: WithReverseMigration: store %q has no WithStoreVersion before it", name))
	}
}

// storeVersion is one WithStoreVersion, and its WithReverseMigration.
type storeVersion struct {
	name    string
	version int
	fn      MigrateFunc
	// reverseTo is the lowest version reverse goes back to; version when there is none.
	reverseTo int
	reverse   MigrateFunc
}

// versionOf returns the WithStoreVersion of the store whose handle the host passed (the SDK
// opens each declared store to compare), or nil.
func versionOf(handle int32) *storeVersion {
	if registered == nil {
		return nil
	}
	for i := range registered.versions {
		v := &registered.versions[i]
		if s := g.store(v.name); s.err == nil && s.handle == handle {
			return v
		}
	}
	return nil
}

// guestStoreVersion implements statehost_store_version.
func guestStoreVersion(handle int32) int32 {
	if v := versionOf(handle); v != nil {
		return int32(v.version)
	}
	return abi.DefaultStoreVersion
}

// guestStoreReversible implements statehost_store_reversible.
func guestStoreReversible(handle int32) int32 {
	if v := versionOf(handle); v != nil {
		return int32(v.reverseTo)
	}
	return abi.DefaultStoreVersion
}

// guestMigrate implements statehost_migrate: it hands each entry of the iterator entries to
// the store's MigrateFunc.
func guestMigrate(handle, from, entries int32) int32 {
	v := versionOf(handle)
	if v == nil || v.fn == nil {
		name := "?"
		if v != nil {
			name = v.name
		}
		hSetError(fmt.Sprintf("pluginsdk: store %q (handle %d): no migration from version %d is registered (WithStoreVersion)", name, handle, from))
		return abi.CodeProcessorFailed
	}
	return migrateEntries(v, v.fn, int(from), v.version, entries)
}

// guestMigrateReverse implements statehost_migrate_reverse: it hands each entry of the
// iterator entries to the store's reverse MigrateFunc.
func guestMigrateReverse(handle, to, entries int32) int32 {
	v := versionOf(handle)
	if v == nil || v.reverse == nil || int(to) < v.reverseTo {
		hSetError(fmt.Sprintf("pluginsdk: store (handle %d): no reverse migration to version %d is registered (WithReverseMigration)", handle, to))
		return abi.CodeProcessorFailed
	}
	return migrateEntries(v, v.reverse, v.version, int(to), entries)
}

// migrateEntries hands each entry of the iterator entries, of version from, to fn, which
// writes their form of version to.
func migrateEntries(v *storeVersion, fn MigrateFunc, from, to int, entries int32) int32 {
	s := g.store(v.name)
	m := &Migration{store: s, from: from, to: to}
	it := &Iterator{store: s, handle: entries, buf: g.iterBuf()}
	defer it.Close()
	for it.Next() {
		if err := fn(m, it.Key(), it.Value()); err != nil {
			hSetError(fmt.Sprintf("pluginsdk: migrate store %q from version %d to %d: entry %q: %v", v.name, from, to, it.Key(), err))
			return abi.CodeProcessorFailed
		}
	}
	if err := it.Err(); err != nil {
		hSetError(fmt.Sprintf("pluginsdk: migrate store %q: %v", v.name, err))
		return abi.CodeProcessorFailed
	}
	return abi.CodeOK
}
