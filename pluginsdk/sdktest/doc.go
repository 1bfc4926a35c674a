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
// Window and session stores are declared with their descriptions, and the driver keeps the
// stream time, drops late and expired writes as the host does (counting them), and runs the
// processor's punctuations: stream-time ones after each Process, wall-clock ones when the
// test moves the fake clock:
//
//	d, err := sdktest.New(sdktest.Config{Outputs: []string{"out"},
//		WindowStores: map[string]abi.StoreInfo{"w": sdktest.TumblingWindows(time.Minute, 0)}})
//	err = d.Process(sdktest.KV("a", "1").At(1000))
//	err = d.AdvanceWallClock(time.Minute)
//	all, drops := d.WindowStore("w").All(), d.WindowStore("w").Dropped()
//
// One Driver at a time: the SDK keeps one instance's state per process, as a wasm instance
// does, so drivers must not be used concurrently (no t.Parallel across drivers).
package sdktest
