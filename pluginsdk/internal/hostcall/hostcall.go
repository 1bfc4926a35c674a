package hostcall

// Host is the statehost ABI (package abi) as Go calls: the same functions, codes and
// encodings, with slices in place of pointer and length. A nil key, value or bound is null
// (NullLen); buffers are written from index 0 up to len(buf). Times and durations (the
// parameters whose ABI names end in "_ms") are int64 milliseconds.
type Host interface {
	StoreOpen(name []byte) int32
	OutputOpen(name []byte) int32
	StateGet(store int32, key, buf []byte) int32
	StatePut(store int32, key, value []byte) int32
	StateDelete(store int32, key []byte) int32
	StateRange(store int32, start, end []byte) int32
	StatePrefix(store int32, prefix []byte) int32
	IterNext(iter int32, buf []byte) int32
	IterClose(iter int32) int32
	RecordNext(buf []byte) int32
	RecordHeaders(buf []byte) int32
	Emit(output int32, key, value, headers []byte) int32
	Log(level int32, msg string) int32
	SetError(msg string) int32
	BufferNeeded() int32

	StoreInfo(store int32, buf []byte) int32
	WindowPut(store int32, key []byte, startMs int64, value []byte) int32
	WindowGet(store int32, key []byte, startMs int64, buf []byte) int32
	WindowFetch(store int32, key []byte, fromMs, toMs int64) int32
	WindowFetchAll(store int32, fromMs, toMs int64) int32
	SessionPut(store int32, key []byte, startMs, endMs int64, value []byte) int32
	SessionGet(store int32, key []byte, startMs, endMs int64, buf []byte) int32
	SessionFind(store int32, key []byte, earliestEndMs, latestStartMs int64) int32
	SessionFindAll(store int32, earliestEndMs, latestEndMs int64) int32
	// StreamTime writes the stream time as a little-endian i64 into out[:8]
	// (CodeOutOfBounds if out is shorter), as stream_time writes it at out_ptr.
	StreamTime(out []byte) int32
	Schedule(kind int32, intervalMs int64) int32
}

// Current is the host the SDK calls on native builds; nil until a test driver sets it.
var Current Host

// Entry holds the SDK's guest exports, set by the SDK's init: a native driver calls them as
// the host calls the wasm exports.
var Entry struct {
	// Reset forgets everything the SDK cached for the previous instance (handles, buffers).
	Reset func()
	// Init is statehost_init.
	Init func() int32
	// ProcessBatch is statehost_process_batch.
	ProcessBatch func(count int32) int32
	// Punctuate is statehost_punctuate.
	Punctuate func(id int32, timeMs int64) int32
	// StoreVersion is statehost_store_version.
	StoreVersion func(store int32) int32
	// Migrate is statehost_migrate.
	Migrate func(store, fromVersion, entries int32) int32
	// StoreReversible is statehost_store_reversible.
	StoreReversible func(store int32) int32
	// MigrateReverse is statehost_migrate_reverse.
	MigrateReverse func(store, toVersion, entries int32) int32
}
