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
// # Window and session stores
//
// Context.WindowStore and Context.SessionStore open the stores of those types (declare them
// with WithWindowStores and WithSessionStores to check them when the instance starts);
// Context.Store is for key-value stores. Times are int64 milliseconds since the Unix epoch,
// as record timestamps; Context.StreamTime is the task's stream time (abi.NoTime before any
// record). See "Windows and sessions" in package abi for when a window or session is closed
// (a put is dropped: Put returns stored = false) and expired (it is invisible).
//
//	windows := ctx.WindowStore("per-minute")
//	for _, start := range windows.WindowsFor(ctx.Record().Timestamp.UnixMilli()) {
//		old, found, err := windows.Get(key, start)
//		...
//		stored, err := windows.Put(key, start, updated)
//	}
//
// WindowStore.WindowsFor gives the windows of a record (tumbling or hopping, from the
// store's WindowSize and Advance); WindowStore.Fetch and FetchAll, SessionStore.Find and
// FindAll return a WindowIterator. SessionStore.Merge does sessionization: it merges a
// record's time and value into the key's sessions within the store's inactivity gap.
//
// # Punctuation
//
// WithPunctuation registers a PunctuateFunc that the host calls between batches, every
// interval of stream time (StreamTimePunctuation) or of its clock (WallClockPunctuation),
// with a PunctuationContext: no record, but stores, emit and log. Emit final results of
// windows and sessions from a stream-time punctuation:
//
//	pluginsdk.Register(count, pluginsdk.WithWindowStores("per-minute"),
//		pluginsdk.WithPunctuation(pluginsdk.StreamTimePunctuation, time.Second, emitClosed))
//
// plugins/windowcount and plugins/sessionize are complete examples.
//
// # Store versions and migration
//
// A processor that changes the form of what it keeps in a key-value store declares the
// store's new version and a MigrateFunc that turns an entry of an older form into the new one:
//
//	pluginsdk.Register(count, pluginsdk.WithStores("counts"),
//		pluginsdk.WithStoreVersion("counts", 2, migrate))
//
// When the processor starts over a store of an older version (a deploy of the new module, or
// a start with it), the host hands each old entry to migrate once, and makes what it wrote
// the store's entries before the processor sees a record. plugins/countjson is a complete
// example; sdktest's Driver.Migrate runs a migration in a unit test.
//
// A migration that can be undone is declared with WithReverseMigration: a MigrateFunc that
// turns an entry of the current form back into an older one. A rollback (statehost rollback)
// to the module before is then possible after the migration; without it, it is refused.
// sdktest's Driver.MigrateReverse runs one.
//
// # Calls and buffers
//
// The processor function is called once per record, inside the one guest call the host
// makes per batch. Slices the SDK returns (record key and value, store values, iterator
// entries) are views of SDK buffers, valid until the documented next call: copy what you
// keep. A punctuation is a guest call of its own.
//
// # Instances and tasks
//
// One instance of a plugin serves many tasks (partitions) of its processor, one call at a
// time: the host lends it to a task for a batch or a punctuation, then to another. Context
// reaches the stores, stream time and outputs of the task being served; the SDK opens the
// declared stores once per instance, in statehost_init, and the handles serve every task.
// Keep durable and per-task state in stores, not in globals: a global set for one
// partition's record is there for the next partition's, and the host may discard an instance
// and replay records from its last commit into a new one. Globals suit what every task
// shares (buffers, parsed configuration). A plugin that must keep per-task data in globals
// imports package pertask for its side effect, and gets an instance per task.
//
// # Other languages
//
// pluginsdk/assemblyscript is the SDK for AssemblyScript, an npm package (not Go) with the
// same parts: registration, stores of the three types, punctuations, emit, headers, log,
// store versions (plugins/count_as, plugins/windowcount_as). C guests use abi/statehost.h
// (plugins/count_c). statehost test runs a plugin of any language without Kafka.
package pluginsdk
