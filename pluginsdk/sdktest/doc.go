// Package sdktest runs a plugin's registered processor natively against an in-memory host,
// so that plugins are unit-tested with plain go test, without Kafka or WebAssembly.
//
// The in-memory host implements the statehost ABI's semantics (codes, null versus empty,
// buffer growth, iterators, the batch sequence) as the real host does:
//
//	d, err := sdktest.New(sdktest.Config{Stores: []string{"counts"}, Outputs: []string{"totals"}})
//	err = d.Process(sdktest.KV("a", "1"), sdktest.Tombstone("b"))
//	out := d.Emitted()
//	v, ok := d.Store("counts").Get("a")
//
// One Driver at a time: the SDK keeps one instance's state per process, as a wasm instance
// does, so drivers must not be used concurrently (no t.Parallel across drivers).
package sdktest
