// Package pluginsdk writes statehost stream processors in Go: register a processor in
// init(), build the package to WebAssembly, and the host runs it against its stores and
// output topics.
//
// A plugin is a main package:
//
//	package main
//
//	import "github.com/statehost/statehost/pluginsdk"
//
//	func init() {
//		pluginsdk.Register(count, pluginsdk.WithStores("counts"))
//	}
//
//	func count(ctx pluginsdk.Context) error {
//		counts := ctx.Store("counts")
//		old, _, err := counts.Get(ctx.Record().Key)
//		...
//		return ctx.Emit(ctx.Record().Key, newValue)
//	}
//
//	func main() {}
//
// Build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o count.wasm .
//
// The same package compiles natively, where package sdktest runs it against an in-memory
// host: a plugin is unit-tested with plain go test, without Kafka or wasm.
//
// The processor function is called once per record, inside the one guest call the host
// makes per batch. Slices the SDK returns (record key and value, store values, iterator
// entries) are views of SDK buffers, valid until the documented next call: copy what you
// keep. Keep durable state in stores, not in globals: the host may discard an instance and
// replay records from its last commit into a new one.
package pluginsdk
