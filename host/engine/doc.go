// Package engine loads stream processors compiled to WebAssembly and runs them, one instance
// per task, against host-side stores and outputs through the statehost ABI (package abi).
//
// An Engine owns one wazero runtime for the process, with an optional on-disk compilation
// cache. Engine.Compile decodes, compiles and validates a module once per content (Module);
// Module.Instantiate creates an Instance for one task (processor, partition, stores, outputs),
// and Instance.ProcessBatch hands it a batch of records in one guest call. Compilation is
// slow (about a second for a Go guest without the cache) and belongs off the processing path;
// a hot reload compiles the new Module first and swaps instances at a commit boundary.
//
// The engine knows no Kafka and no storage engine: it reaches state through Store, output
// through Emitter, and logs through hclog. An Instance is not safe for concurrent use. Any
// failure of a guest call (trap, Go panic, exit, out of memory, timeout, non-zero result,
// protocol error, or a store or emitter failure during the call) is returned as a
// *GuestError, and the instance is dead from then on: close it and make a new one.
package engine
