package abi

// Version is the ABI version this package describes and the statehost host implements.
const Version = 1

// Module names.
const (
	// ModuleName is the module every statehost host function is imported from.
	ModuleName = "statehost"
	// WASIModuleName is the only other module a guest may import from.
	WASIModuleName = "wasi_snapshot_preview1"
)

// Exports of a guest.
const (
	// VersionExportPrefix starts the name of the version marker export; the decimal version follows.
	VersionExportPrefix = "statehost_abi_version_"
	// VersionExport is the marker a version 1 guest exports: a function () -> () that is never called.
	VersionExport = "statehost_abi_version_1"
	// ExportProcessBatch is the required batch entry point: (count i32) -> i32, 0 on success.
	ExportProcessBatch = "statehost_process_batch"
	// ExportInit is the optional setup of an instance, called once per instance before its
	// first batch: () -> i32, 0 on success.
	ExportInit = "statehost_init"
	// ExportInitialize is the optional reactor constructor: () -> (), called before ExportInit.
	ExportInitialize = "_initialize"
	// ExportCommandStart is the entry point of a WASI command (a program with a main). A
	// module that exports it and not ExportInitialize is a command, not a reactor, and is
	// refused: its runtime or C library expects main to run first (Go's), or runs its
	// constructors and destructors around every exported call (wasi-libc's).
	ExportCommandStart = "_start"
	// ExportMemory is the required exported linear memory.
	ExportMemory = "memory"
	// ExportPunctuate is the punctuation entry point: (id i32, time_ms i64) -> i32, 0 on
	// success. Required only by a guest that calls schedule.
	ExportPunctuate = "statehost_punctuate"
	// ExportInstancePerTask is an optional marker, a function () -> () that is never called:
	// a guest that exports it gets an instance of its own for each task, which serves no other
	// task (as every instance did before hosts pooled them). Without it an instance may serve many tasks
	// of its processor, one at a time.
	ExportInstancePerTask = "statehost_instance_per_task"
	// ExportStoreVersion is optional: (store i32) -> i32, the version of the entries the
	// guest reads and writes in the store whose handle it is given, at least
	// DefaultStoreVersion. A guest that does not export it keeps every store at
	// DefaultStoreVersion. See "Store versions and migration" in the package documentation.
	ExportStoreVersion = "statehost_store_version"
	// ExportMigrate is the migration entry point: (store i32, from_version i32, entries i32)
	// -> i32, 0 on success. Required by a guest that declares a store's version above the
	// version of the entries the store holds. See "Store versions and migration".
	ExportMigrate = "statehost_migrate"
	// ExportStoreReversible is optional: (store i32) -> i32, the lowest version to which the
	// guest's ExportMigrateReverse can bring back the entries of the store whose handle it is
	// given; the store's own version when it cannot. A guest that does not export it declares
	// every migration irreversible. See "Reversible migrations" in the package documentation.
	ExportStoreReversible = "statehost_store_reversible"
	// ExportMigrateReverse is the reverse migration: (store i32, to_version i32, entries i32)
	// -> i32, 0 on success. Required by a guest that declares a store reversible. See
	// "Reversible migrations".
	ExportMigrateReverse = "statehost_migrate_reverse"
)

// DefaultStoreVersion is the version of a store whose guest declares none, and of the entries
// of a store that no guest has migrated.
const DefaultStoreVersion = 1

// ReservedKey is the one key a guest cannot write to a key-value store: state_put and
// state_delete answer CodeBadArgument for it. The host's changelog records of store versions
// have it.
const ReservedKey = "\x00statehost.store_version"

// Functions imported from ModuleName. Every result is an i32, and so is every parameter but
// times and durations (names ending in "_ms"), which are i64; the parameter lists are in
// Signatures.
const (
	FuncStoreOpen     = "store_open"
	FuncOutputOpen    = "output_open"
	FuncStateGet      = "state_get"
	FuncStatePut      = "state_put"
	FuncStateDelete   = "state_delete"
	FuncStateRange    = "state_range"
	FuncStatePrefix   = "state_prefix"
	FuncIterNext      = "iter_next"
	FuncIterClose     = "iter_close"
	FuncRecordNext    = "record_next"
	FuncRecordHeaders = "record_headers"
	FuncEmit          = "emit"
	FuncLog           = "log"
	FuncSetError      = "set_error"
	FuncBufferNeeded  = "buffer_needed"

	FuncStoreInfo      = "store_info"
	FuncWindowPut      = "window_put"
	FuncWindowGet      = "window_get"
	FuncWindowFetch    = "window_fetch"
	FuncWindowFetchAll = "window_fetch_all"
	FuncSessionPut     = "session_put"
	FuncSessionGet     = "session_get"
	FuncSessionFind    = "session_find"
	FuncSessionFindAll = "session_find_all"
	FuncStreamTime     = "stream_time"
	FuncSchedule       = "schedule"
)

// Signatures lists the parameter names of each imported function. Every function returns one
// i32; a parameter is an i64 when its name ends in "_ms" (see IsI64Param), else an i32.
var Signatures = map[string][]string{
	FuncStoreOpen:     {"name_ptr", "name_len"},
	FuncOutputOpen:    {"name_ptr", "name_len"},
	FuncStateGet:      {"store", "key_ptr", "key_len", "buf_ptr", "buf_cap"},
	FuncStatePut:      {"store", "key_ptr", "key_len", "val_ptr", "val_len"},
	FuncStateDelete:   {"store", "key_ptr", "key_len"},
	FuncStateRange:    {"store", "start_ptr", "start_len", "end_ptr", "end_len"},
	FuncStatePrefix:   {"store", "prefix_ptr", "prefix_len"},
	FuncIterNext:      {"iterator", "buf_ptr", "buf_cap"},
	FuncIterClose:     {"iterator"},
	FuncRecordNext:    {"buf_ptr", "buf_cap"},
	FuncRecordHeaders: {"buf_ptr", "buf_cap"},
	FuncEmit:          {"output", "key_ptr", "key_len", "val_ptr", "val_len", "hdr_ptr", "hdr_len"},
	FuncLog:           {"level", "msg_ptr", "msg_len"},
	FuncSetError:      {"msg_ptr", "msg_len"},
	FuncBufferNeeded:  {},

	FuncStoreInfo:      {"store", "buf_ptr", "buf_cap"},
	FuncWindowPut:      {"store", "key_ptr", "key_len", "start_ms", "val_ptr", "val_len"},
	FuncWindowGet:      {"store", "key_ptr", "key_len", "start_ms", "buf_ptr", "buf_cap"},
	FuncWindowFetch:    {"store", "key_ptr", "key_len", "from_ms", "to_ms"},
	FuncWindowFetchAll: {"store", "from_ms", "to_ms"},
	FuncSessionPut:     {"store", "key_ptr", "key_len", "start_ms", "end_ms", "val_ptr", "val_len"},
	FuncSessionGet:     {"store", "key_ptr", "key_len", "start_ms", "end_ms", "buf_ptr", "buf_cap"},
	FuncSessionFind:    {"store", "key_ptr", "key_len", "earliest_end_ms", "latest_start_ms"},
	FuncSessionFindAll: {"store", "earliest_end_ms", "latest_end_ms"},
	FuncStreamTime:     {"out_ptr"},
	FuncSchedule:       {"kind", "interval_ms"},
}

// IsI64Param reports whether a parameter of an imported function is an i64: times and
// durations, in milliseconds, whose names end in "_ms".
func IsI64Param(name string) bool {
	return len(name) > 3 && name[len(name)-3:] == "_ms"
}

// Status codes returned by host functions (and CodeProcessorFailed by guests). Zero or a
// positive value is success.
const (
	// CodeOK is success without a count.
	CodeOK int32 = 0
	// CodeDropped is the success of window_put and session_put that did not write: the
	// window or session is expired, or closed for a put with a value (see "Windows and
	// sessions" in the package documentation). The host counts it.
	CodeDropped int32 = 1
	// CodeNotFound: state_get found no value under the key.
	CodeNotFound int32 = -1
	// CodeBufferTooSmall: the output buffer is too small; nothing changed. buffer_needed()
	// returns the capacity needed.
	CodeBufferTooSmall int32 = -2
	// CodeOutOfBounds: a pointer and length lie (partly) outside the guest's memory.
	CodeOutOfBounds int32 = -3
	// CodeBadArgument: a negative length where none is allowed, a null where null is not
	// allowed, an unknown log level, a name of bad length or malformed entries.
	CodeBadArgument int32 = -4
	// CodeUnknownStore: store_open named a store the processor does not have.
	CodeUnknownStore int32 = -5
	// CodeUnknownOutput: output_open named a topic that is not a declared output.
	CodeUnknownOutput int32 = -6
	// CodeBadHandle: a store handle, iterator handle or output index that is not open or declared.
	CodeBadHandle int32 = -7
	// CodeNoRecord: a record-scoped call (record_next, record_headers, emit) made with no
	// current record: outside statehost_process_batch or after record_next returned 0.
	CodeNoRecord int32 = -8
	// CodeStoreFailed: the host's store failed; the batch will fail whatever the guest returns.
	CodeStoreFailed int32 = -9
	// CodeEmitFailed: the host could not take the output record; the batch will fail.
	CodeEmitFailed int32 = -10
	// CodeLimit: a host limit was reached: MaxOpenIterators open iterators, MaxSchedules
	// schedules, an emit larger than MaxEmitBytes or with more than MaxEmitHeaders headers, a
	// state write or an emit whose Kafka record would not fit its topic (max.message.bytes,
	// about 1 MiB by default), or an emit past the current record's emit budget (which fails
	// the batch); see "Size limits" in the package documentation. Nothing changed.
	CodeLimit int32 = -11
	// CodeProcessorFailed is returned by a guest from statehost_process_batch or statehost_init
	// when its own logic failed; set_error says why.
	CodeProcessorFailed int32 = -12
	// CodeWrongStoreType: a function for another type of store, for example window_put on a
	// key-value store or state_get on a window store.
	CodeWrongStoreType int32 = -13
)

var codeNames = map[int32]string{
	CodeOK:              "ok",
	CodeNotFound:        "not found",
	CodeBufferTooSmall:  "buffer too small",
	CodeOutOfBounds:     "out of bounds",
	CodeBadArgument:     "bad argument",
	CodeUnknownStore:    "unknown store",
	CodeUnknownOutput:   "unknown output",
	CodeBadHandle:       "bad handle",
	CodeNoRecord:        "no current record",
	CodeStoreFailed:     "store failed",
	CodeEmitFailed:      "emit failed",
	CodeLimit:           "limit reached",
	CodeProcessorFailed: "processor failed",
	CodeWrongStoreType:  "wrong store type",
}

// CodeText returns a short description of a status code, e.g. "buffer too small".
func CodeText(code int32) string {
	if code == CodeDropped {
		return "dropped"
	}
	if s, ok := codeNames[code]; ok {
		return s
	}
	if code > 0 {
		return "ok"
	}
	return "unknown code"
}

// Log levels accepted by log(); the numbers match hclog's.
const (
	LevelTrace int32 = 1
	LevelDebug int32 = 2
	LevelInfo  int32 = 3
	LevelWarn  int32 = 4
	LevelError int32 = 5
)

// Limits.
const (
	// NullLen is the length that stands for null (a null key, value or header value).
	NullLen int32 = -1
	// MaxNameLen is the longest store or output name, in bytes.
	MaxNameLen = 255
	// MaxOpenIterators is the most iterators a guest may have open at once.
	MaxOpenIterators = 16
	// MaxLogLen is the longest log message kept; longer ones are truncated.
	MaxLogLen = 64 << 10
	// MaxErrorLen is the longest set_error message kept; longer ones are truncated.
	MaxErrorLen = 4 << 10
	// MaxEmitBytes is the most bytes one emit may carry: key_len + val_len + hdr_len, a null
	// key or value counting 0. A larger emit returns CodeLimit. It is Kafka's scale: a
	// producer's default max.request.size and a broker's default message.max.bytes are
	// about 1 MiB, so a larger record would be refused downstream anyway.
	MaxEmitBytes = 1 << 20
	// MaxEmitHeaders is the most headers one emit may carry; more return CodeLimit.
	MaxEmitHeaders = 1024
	// MaxSchedules is the most punctuation schedules one instance may hold; more return
	// CodeLimit.
	MaxSchedules = 16
)

// Store types, as store_info reports them.
const (
	StoreKeyValue int32 = 0
	StoreWindow   int32 = 1
	StoreSession  int32 = 2
)

// Punctuation kinds for schedule.
const (
	// ScheduleStreamTime punctuates as the task's stream time advances.
	ScheduleStreamTime int32 = 0
	// ScheduleWallClock punctuates as the host's clock advances.
	ScheduleWallClock int32 = 1
)

// NoTime is what stream_time writes before the task has seen a record with a timestamp.
const NoTime int64 = -1
