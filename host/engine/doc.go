// Package engine loads stream processors compiled to WebAssembly and runs them against
// host-side stores and outputs through the statehost ABI (package abi).
//
// An Engine owns one wazero runtime for the process, with an optional on-disk compilation
// cache. Engine.Compile decodes, compiles and validates a module once per content (Module);
// Module.Instantiate creates an Instance bound to a task (processor, partition, stores,
// outputs), and Instance.ProcessBatch hands it a batch of records in one guest call.
// Compilation is slow (about a second for a Go guest without the cache) and belongs off the
// processing path; a hot reload compiles the new Module first and swaps instances at a
// commit boundary.
//
// # Instances and tasks
//
// An instance serves one task at a time, the one it is bound to (Instance.Bind), and may
// serve many in turn: a Pool lends a module's instances to the tasks of its processor for one
// call each, so that memory grows with the calls that run at once (the runtime's workers),
// not with the tasks. What the guest keeps in its memory and the names it resolved (store
// handles, output indices) are the instance's; the stores, outputs, clock, limits and log
// that host functions reach are the bound task's, and what the engine keeps of a task
// between its calls (its punctuation times) is its TaskState. statehost_init runs once per
// instance, bound to the task the instance was made for. A module that exports
// abi.ExportInstancePerTask gets an instance per task (Module.InstancePerTask): a Pool of
// size 1 for each task. See bind.go and pool.go.
//
// Instance.StoreVersions asks a module the version of each store's entries, and
// Instance.Migrate hands it old entries to rewrite into a store's new contents (migrate.go,
// abi "Store versions and migration"); which stores migrate, and when, is the runtime's.
//
// The engine knows no Kafka and no storage engine: it reaches state through Store, output
// through Emitter, and logs through hclog. An Instance is not safe for concurrent use (a
// Pool is). Any failure of a guest call (trap, Go panic, exit, out of memory, timeout,
// non-zero result, protocol error, or a store or emitter failure during the call) is
// returned as a *GuestError, and the instance is dead from then on: close it (Pool.Put
// does) and make a new one.
//
// # Copies and views of guest memory
//
// Bytes cross between the host and a guest either as copies or as views: slices of the
// guest's linear memory (api.Memory.Read), which the engine makes without copying. A view is
// valid only during the host function call that made it. Once that call returns, the guest
// runs again: it may overwrite the bytes (a Go guest reuses its buffers from record to
// record), and a memory.grow may move its memory, leaving the view stale. The engine keeps
// no view past the host function call, and no reference into guest memory between calls.
//
// Into the guest, everything is a copy, written into a buffer the guest passes: the records
// (record_next, record_headers), the values found by state_get, window_get and session_get,
// the entries of iter_next, store_info and stream_time. The guest owns them.
//
// Out of the guest:
//
//   - The keys and values of state_put, state_delete, window_put and session_put, and the
//     keys of the gets, window_fetch and session_find, are views, passed to the Store (or
//     WindowStore, SessionStore) method the host function calls. The store copies what it
//     keeps (store.Store.Put); window_fetch and session_find keys are copied by the store,
//     the bounds of state_range and state_prefix by the engine, because an iterator keeps them.
//   - An emit's OutputRecord has a Key and a Value that are views, valid only until
//     Emitter.Emit returns: an Emitter copies what it keeps. Its Headers are copies, which
//     the Emitter owns and may keep. Topic is the task's output name.
//   - The messages of log and set_error are copied into strings.
//
// What a Store returns (Get's value, an iterator's Key and Value, valid until the store's
// next write or the iterator's next Next) is copied into guest memory at once. The Records
// passed to ProcessBatch are read only during that call and not kept after it.
package engine
