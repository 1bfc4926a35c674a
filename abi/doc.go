// Package abi defines version 1 of the binary interface between the statehost host and a
// stream processor compiled to WebAssembly (a "guest").
//
// This comment, the constants of this package and the C header statehost.h beside it are the
// complete specification: a guest can be written in any language that compiles to wasm32 from
// them alone. The Go SDK (pluginsdk) and the AssemblyScript SDK (pluginsdk/assemblyscript) are
// such guest libraries; plugins/count_c is a C guest written from this text. The package
// imports nothing but the standard library so that host, SDK and tools can share it.
//
// # Overview
//
// A guest is a WebAssembly module (wasm32, one linear memory, a "reactor": no main). The host
// owns all durable state: the guest reads and writes named key/value stores, reads the input
// records of a batch and emits output records, all through functions it imports from the
// module "statehost". The guest owns every buffer: it passes pointer and capacity, and the host
// writes into it and returns the length written, or a negative code. The host never calls the
// guest to allocate, and never keeps a pointer into guest memory after a call returns.
//
// # Module requirements (checked when the host loads the module)
//
// Exports:
//
//	memory                          the guest's linear memory (required)
//	statehost_abi_version_1  () -> ()       ABI version marker (required; never called)
//	statehost_process_batch  (i32) -> i32   processes one batch (required)
//	statehost_init           () -> i32      setup of an instance, once (optional)
//	statehost_punctuate      (i32, i64) -> i32  a punctuation (required by a guest that calls schedule)
//	_initialize              () -> ()       reactor constructor (optional, e.g. Go, wasi-libc)
//	statehost_instance_per_task  () -> ()   asks for an instance per task (optional; never called)
//	statehost_store_version  (i32) -> i32   a store's version (optional; see "Store versions and migration")
//	statehost_migrate        (i32, i32, i32) -> i32  migrates a store's entries (required by a guest that raises a version)
//	statehost_store_reversible  (i32) -> i32  how far back a store's migration goes (optional; see "Reversible migrations")
//	statehost_migrate_reverse   (i32, i32, i32) -> i32  migrates a store's entries back (required by a guest that declares one reversible)
//
// A module that exports _start (a WASI command, built with a main) and no _initialize is
// refused: build a reactor instead (Go: go build -buildmode=c-shared; C: clang
// -mexec-model=reactor; statehost build does both).
//
// The version is declared by exporting a function named "statehost_abi_version_" followed by
// the decimal version (see VersionExport). The host refuses a module that exports no such
// marker, exports more than one, or declares a version other than its own, and a module that
// lacks a required export or whose export has a different signature. Every refusal names the
// file and what is wrong.
//
// A guest must not have a start section (the WebAssembly start function, which runs on every
// instantiation, before the host can bound it in time): the host refuses such a module when
// it loads it, without running it. A reactor has no use for one; run setup code in
// _initialize (where Go and wasi-libc run their initializers and C constructors) or in
// statehost_init.
//
// Imports: a guest may import functions only from the module "statehost" (the functions
// below) and from "wasi_snapshot_preview1" (Go's wasip1 runtime and wasi-libc need it). Any
// other import, an import of memory, and an import of a "statehost" function that does not
// exist or has another signature are refused at load time. WASI is sandboxed: no preopened
// directories, no environment, no arguments, no sockets; the clocks are fake and the random
// source is deterministic. What the guest writes to stdout or stderr goes to the host's log
// (stdout at debug, stderr at warn, one entry per line; a line longer than 4 KiB is cut
// there and the rest of it is dropped), and the first 1 KiB of what the failing call wrote to
// stderr is attached to its error (this is where a Go panic message lands). The entries of
// log() and these lines share a rate limit per task (by default 100 lines a second, in
// bursts of up to 1000): the lines beyond it are dropped, counted and reported by the host.
// A Go runtime crash dump on stderr (from a line "panic: " or "fatal error: " on) is one
// error entry with its first 20 lines instead, and the error keeps the dump's start.
//
// # Values and pointers
//
// Every result is an i32, and so is every parameter except times and durations: those are
// i64 milliseconds (times since the Unix epoch), and their names end in "_ms" (IsI64Param). A
// pointer is an i32 read as an unsigned offset into the guest's memory. A region (pointer, length) must lie entirely inside the memory when the
// call is made, else the call returns CodeOutOfBounds and does nothing; a zero-length region
// is valid at any offset up to the memory size (pointer 0, length 0 is always valid). An
// output buffer (buf_ptr, buf_cap) must lie in memory for its full capacity even when less is
// written. All multi-byte integers in memory are little-endian and unaligned.
//
// Null differs from empty, as in Kafka: a length of NullLen (-1) means null (no bytes, and
// the pointer is ignored); a length of 0 means empty. Where null is not allowed a length of -1
// or below returns CodeBadArgument.
//
// # Status codes
//
// Every function returns an i32: zero or a positive count on success, or one of the negative
// codes CodeNotFound ... CodeWrongStoreType. When several things are wrong at once, which of
// the applicable codes is returned is unspecified. A host call never traps on bad input.
//
// CodeBufferTooSmall is not a failure: nothing was consumed or changed (a cursor or iterator
// did not move), and buffer_needed() returns the capacity that the call needs. Grow the buffer
// to at least that and repeat the call with the same arguments.
//
// CodeStoreFailed and CodeEmitFailed report a failure of the host (a store or the producer):
// the batch fails after the guest returns, whatever it returns, and the instance is discarded.
// The failure is attributed to the record that was current when the host call failed.
//
// # Imported functions (module "statehost")
//
// Handles and names:
//
//	store_open(name_ptr, name_len) -> handle
//	    Resolves a store by name (1..MaxNameLen bytes) to a handle >= 0 valid for the life of
//	    the instance; opening the same name again returns the same handle. Unknown name:
//	    CodeUnknownStore. Call it once per store, e.g. in statehost_init. The handle names
//	    the store: in each call it reaches the store of that name of the task the call
//	    serves (see "Instances and tasks").
//	output_open(name_ptr, name_len) -> index
//	    Resolves an output topic name to its index in the processor's declared output list.
//	    The first declared output is always index 0 and needs no call. Unknown: CodeUnknownOutput.
//
// State:
//
//	state_get(store, key_ptr, key_len, buf_ptr, buf_cap) -> value_len
//	    Copies the value stored under key into buf and returns its length (0 for an empty
//	    value). CodeNotFound if the key is absent; CodeBufferTooSmall if value_len > buf_cap.
//	state_put(store, key_ptr, key_len, val_ptr, val_len) -> 0
//	    Stores value under key. val_len = NullLen deletes the key (as Kafka Streams' put(k,
//	    null)). The host copies both before it returns. CodeLimit, and nothing changes, if
//	    the write's changelog record would not fit the store's changelog topic (see "Size
//	    limits"). CodeBadArgument for ReservedKey, the 24 bytes "\x00statehost.store_version",
//	    which the host's records of store versions have (see "Store versions and migration").
//	state_delete(store, key_ptr, key_len) -> 0
//	    Deletes key; deleting an absent key is not an error. CodeLimit and CodeBadArgument as
//	    for state_put.
//	state_range(store, start_ptr, start_len, end_ptr, end_len) -> iterator
//	    Opens an ascending iterator over the keys k with start <= k < end, in bytewise order;
//	    a length of NullLen means unbounded on that side.
//	state_prefix(store, prefix_ptr, prefix_len) -> iterator
//	    Opens an ascending iterator over the keys that begin with prefix.
//	iter_next(iterator, buf_ptr, buf_cap) -> bytes
//	    Writes as many whole entries as fit into buf (at least one) and returns the number of
//	    bytes written; 0 when the iterator is exhausted. An entry is laid out as described
//	    under "Entry encoding" (value_len is never null here). CodeBufferTooSmall if not even
//	    the next entry fits.
//	iter_close(iterator) -> 0
//	    Closes the iterator; its handle becomes invalid.
//
// Iterator handles are valid until iter_close or the end of the guest call that opened them
// (statehost_process_batch, statehost_init or statehost_punctuate): the host closes leftovers
// then. A handle is an
// opaque number >= 0. Once closed it stays invalid (CodeBadHandle from iter_next and
// iter_close) even when other iterators are opened later: the host does not hand out the
// same handle again before 2^23 further iterators have been opened. At most
// MaxOpenIterators may be open at once (CodeLimit). Keys may be empty; keys are never null
// (CodeBadArgument).
//
// Writes while an iterator is open: a guest may write to a store (state_put, state_delete,
// window_put, session_put) while iterators on it are open. The write takes effect as usual
// and the iterators stay valid. An iterator of a key-value store (state_range, state_prefix)
// returns the store as it was when it was opened, whatever is written meanwhile: no key
// written after, and a key overwritten or deleted after with the value it had. An iterator
// of a window or session store returns, in its order and once each, the windows or sessions
// that were there when it was opened and have not been written since; whether it also
// returns those written while it is open is not specified (it reads the store one time
// segment at a time): collect what you need first if it matters.
//
// The state functions above work on key-value stores only (CodeWrongStoreType on a window or
// session store); iter_next and iter_close work on every iterator.
//
//	store_info(store, buf_ptr, buf_cap) -> bytes
//	    Writes the store's description (see "Store description") and returns StoreInfoSize;
//	    CodeBufferTooSmall if buf_cap is smaller. Works on every store type.
//
// Windows and sessions (see the section of that name):
//
//	window_put(store, key_ptr, key_len, start_ms, val_ptr, val_len) -> 0 | CodeDropped
//	    Stores value under key in the window that starts at start_ms; val_len = NullLen
//	    deletes it. CodeDropped, and nothing changes, if the window is expired, or closed and
//	    the value is not null. CodeLimit as for state_put.
//	window_get(store, key_ptr, key_len, start_ms, buf_ptr, buf_cap) -> value_len
//	    As state_get, for key's window that starts at start_ms. An expired window is absent.
//	window_fetch(store, key_ptr, key_len, from_ms, to_ms) -> iterator
//	    Opens an iterator over key's windows with from_ms <= start <= to_ms, ascending by
//	    start; iter_next writes window entries.
//	window_fetch_all(store, from_ms, to_ms) -> iterator
//	    Opens an iterator over every key's windows with from_ms <= start <= to_ms. Each window
//	    comes once; the order is not specified (it is by time segment, then key, then start).
//	session_put(store, key_ptr, key_len, start_ms, end_ms, val_ptr, val_len) -> 0 | CodeDropped
//	    Stores value under key for the session [start_ms, end_ms] (start_ms <= end_ms, else
//	    CodeBadArgument); val_len = NullLen removes the session. CodeDropped, and nothing
//	    changes, if the session is expired, or closed and the value is not null. CodeLimit as
//	    for state_put. A session is identified by key, start and end: merging sessions
//	    (remove the old ones, put the merged one) is the guest's work.
//	session_get(store, key_ptr, key_len, start_ms, end_ms, buf_ptr, buf_cap) -> value_len
//	    As state_get, for key's session [start_ms, end_ms].
//	session_find(store, key_ptr, key_len, earliest_end_ms, latest_start_ms) -> iterator
//	    Opens an iterator over key's sessions with end >= earliest_end_ms and start <=
//	    latest_start_ms (those that overlap [earliest_end_ms, latest_start_ms]), ascending by
//	    end, then start. To find the sessions a record at time t merges with, pass t - gap
//	    and t + gap.
//	session_find_all(store, earliest_end_ms, latest_end_ms) -> iterator
//	    Opens an iterator over every key's sessions with earliest_end_ms <= end <=
//	    latest_end_ms; each once, in an order not specified.
//
// Time and punctuation:
//
//	stream_time(out_ptr) -> 0
//	    Writes the task's stream time as an i64 at out_ptr (8 bytes): the largest timestamp
//	    of the records the task has taken with record_next (a negative timestamp, Kafka's
//	    "none", does not count), restored with its stores after a restart; NoTime (-1)
//	    before any.
//	schedule(kind, interval_ms) -> id
//	    Asks for punctuations every interval_ms (>= 1) of stream time (ScheduleStreamTime) or
//	    of the host's clock (ScheduleWallClock), and returns an id >= 0 (0, 1, ... in the
//	    order of the calls). The host then calls statehost_punctuate(id, time_ms) between
//	    batches. Only in statehost_init: every instance of a module must make the same
//	    schedules in the same order. The host keeps each task's punctuation times itself,
//	    across the instances that serve the task: a new instance (after a failure, a restart
//	    or a deploy) that makes a schedule of the same id, kind and interval continues it.
//	    CodeBadArgument outside statehost_init, for an unknown kind, an interval below 1, or a
//	    guest that does not export statehost_punctuate; CodeLimit past MaxSchedules.
//
// Records (valid only inside statehost_process_batch):
//
//	record_next(buf_ptr, buf_cap) -> bytes
//	    Advances to the next record of the batch, makes it the current record, and writes it
//	    into buf (see "Record encoding"); returns the number of bytes written (at least
//	    RecordHeaderSize), or 0 at the end of the batch, after which there is no current
//	    record. On CodeBufferTooSmall the cursor does not move (the previous record stays
//	    current), but until a record_next succeeds the host attributes a failure of the call
//	    (a trap, running out of memory while growing the buffer, a timeout) to the record
//	    being fetched: it is the one the guest could not handle.
//	record_headers(buf_ptr, buf_cap) -> bytes
//	    Writes the current record's headers as a sequence of entries (see "Entry encoding"),
//	    in their original order, and returns the number of bytes written (0 if none).
//	    CodeNoRecord if there is no current record.
//
// Output, logging and errors:
//
//	emit(output, key_ptr, key_len, val_ptr, val_len, hdr_ptr, hdr_len) -> 0
//	    Sends a record to the declared output with that index (0 = the first). Key and value
//	    may each be null (NullLen); a null value is a tombstone. hdr_ptr/hdr_len hold headers
//	    as a sequence of entries (hdr_len 0: no headers; header keys are never null). The
//	    record gets the current record's timestamp (in statehost_punctuate, which has no
//	    current record, the punctuation's time_ms); the host partitions it by key. The host
//	    copies everything before it returns. CodeNoRecord without a current record outside
//	    statehost_punctuate;
//	    CodeBadHandle if output is not a declared index; CodeLimit, and nothing is emitted,
//	    if key_len + val_len + hdr_len (a null key or value counting 0) exceeds MaxEmitBytes
//	    (1 MiB), the headers number more than MaxEmitHeaders (1024), the record would not fit
//	    the output topic, or the emits of the current record would pass its emit budget (the
//	    batch then fails; see "Size limits"). The emit may block while the host's producer is
//	    busy; that wait does not count towards the call's time limit.
//	log(level, msg_ptr, msg_len) -> 0
//	    Writes msg to the host's log at level (LevelTrace..LevelError), tagged with the
//	    processor, the partition and the current record's offset. Messages longer than
//	    MaxLogLen bytes are truncated, and bytes that are not valid UTF-8 (including a
//	    character cut by the truncation) are replaced by U+FFFD. A message beyond the task's
//	    log rate limit (see Imports) is dropped, and the call still returns 0.
//	set_error(msg_ptr, msg_len) -> 0
//	    Sets the message that describes the guest's failure; the host reports it if the
//	    current guest call returns non-zero. Longer than MaxErrorLen bytes is truncated, and
//	    invalid UTF-8 is replaced by U+FFFD, as for log. The message is cleared at the start of
//	    each guest call.
//	buffer_needed() -> bytes
//	    The capacity needed by the most recent call that returned CodeBufferTooSmall.
//
// # Size limits
//
// What a guest writes and emits becomes Kafka records, and Kafka bounds them: a topic takes a
// record batch of at most its max.message.bytes (1,048,588 bytes by default), and the host's
// producer builds batches of at most 1 MiB. The host learns each topic's limit when it starts
// and refuses at the call, with CodeLimit and nothing changed, what it could not produce,
// rather than failing at the commit (which would fail every commit of the task):
//
//   - state_put, state_delete, window_put and session_put on a store with a changelog, when
//     the write's changelog record would not fit the changelog topic. The record holds the
//     key (a window store's key and the window start, 8 bytes more; a session store's key,
//     end and start, 16 more) and the value, in a batch of 61 bytes of header and a few bytes
//     of lengths: with the defaults, a key and a value of up to about 1,048,500 bytes
//     together. A store without a changelog takes any size.
//   - emit, when the record (key, value and headers, as Kafka encodes them) would not fit the
//     output topic: with the defaults, the same 1,048,500 bytes or so, a little below
//     MaxEmitBytes.
//   - emit, when the emits of the current record would pass the processor's emit budget (its
//     emits' keys, values, header keys and values together; emit_budget, 64 MiB by default):
//     the batch then fails whatever the guest returns, attributed to the record. A
//     punctuation's emits are not budgeted.
//
// A guest that fails its record on CodeLimit makes it a poison record, which the processor's
// on_error fails, skips or dead-letters; the host's error names the record and the limit. The
// limits are the host's, per topic, and a guest cannot ask them: treat CodeLimit as a fault of
// the record.
//
// # Record encoding (record_next)
//
// A fixed header of RecordHeaderSize (40) bytes, then the variable parts back to back:
//
//	offset size  field
//	0      i64   Kafka offset of the record
//	8      i64   timestamp, milliseconds since the Unix epoch
//	16     i32   partition
//	20     i32   topic_len      (>= 0)
//	24     i32   key_len        (NullLen = null key)
//	28     i32   value_len      (NullLen = null value, a tombstone)
//	32     i32   header_count   number of headers (fetch them with record_headers)
//	36     i32   headers_size   bytes record_headers needs
//	40     topic bytes, then key bytes, then value bytes (a null part takes no bytes)
//
// # Entry encoding (iter_next, record_headers, emit headers)
//
// An entry is a key and a value:
//
//	offset size  field
//	0      i32   key_len   (>= 0)
//	4      i32   value_len (NullLen = null)
//	8      key bytes, then value bytes
//
// A sequence of entries is entries back to back with no padding and no count; its length is
// the number of bytes.
//
// # Window entry encoding (iter_next on window and session iterators)
//
//	offset size  field
//	0      i64   start (window or session start, ms)
//	8      i64   end (a window's end, start + window_size, exclusive; a session's end, inclusive)
//	16     i32   key_len   (>= 0)
//	20     i32   value_len (>= 0)
//	24     key bytes, then value bytes
//
// # Store description (store_info)
//
//	offset size  field
//	0      i32   type: StoreKeyValue (0), StoreWindow (1) or StoreSession (2)
//	4      i32   reserved, 0
//	8      i64   window_size (window stores)
//	16     i64   advance: the hop of hopping windows, window_size for tumbling (window stores)
//	24     i64   grace (window and session stores)
//	32     i64   retention (window and session stores)
//	40     i64   inactivity_gap (session stores)
//
// Durations are milliseconds; a field that does not apply to the type is 0.
//
// # Windows and sessions
//
// A window store keeps a value per key and window start; a window covers [start, start +
// window_size). A session store keeps a value per key and session [start, end]. Which windows
// a record belongs to (tumbling or hopping by advance) and how sessions merge is the guest's
// logic; the store keeps them, bounds them in time and logs them to the changelog.
//
// Time is the task's stream time T (stream_time). With grace G and retention R:
//
//   - A window is closed when start + window_size + G <= T, a session when end + G < T: a
//     put with a value is dropped (CodeDropped) and counted as late. Deletes still apply.
//     A record is late for sessions when it is closed by its own time (ts + G < T): merged,
//     it could extend or bridge a session that is already final. A guest drops it (the Go
//     SDK's Merge offers the session [ts, ts], which the host drops and counts).
//   - A window is expired when start <= T - R, a session when end <= T - R: it is invisible
//     to reads, writes to it are dropped and counted as expired, and the host deletes
//     expired data in whole time segments. R >= window_size + G (inactivity_gap + G); the
//     default R is a day at least, so that a closed window stays readable until a
//     punctuation emits it (with R = window_size + G a window expires as it closes).
//
// A window's final value is known once it is closed, a session's once end + inactivity_gap
// + G < T (no record that is not late can reach it): emit final results from a stream-time
// punctuation and delete what was emitted. abi.StoreInfo has these predicates.
//
// # Punctuation
//
// statehost_punctuate(id, time_ms) is a guest call like statehost_process_batch, bounded by
// the same time limit, with no current record: record_next and record_headers return
// CodeNoRecord, and emit works, giving its records the timestamp time_ms. A stream-time
// schedule fires when the stream time reached its next time: the first time when the task's
// stream time is known, then when it reaches the previous punctuation's time plus the
// interval (once, however far it jumped), with time_ms the stream time. A wall-clock schedule
// fires the first time one interval after it was scheduled, then when the clock reaches the
// previous punctuation's time plus the interval, with time_ms the clock. The host checks the
// schedules after every batch and while it waits for records, so a stream-time punctuation
// can also fire before the first batch of a task whose stream time was restored. A
// non-zero result or a failure fails the task as a failed batch does.
//
// # Instances and tasks
//
// A task is one processor on one partition: its stores, its stream time, its outputs. An
// instance of a guest serves one task at a time, and may serve many tasks of its processor
// in turn: the host lends an instance to a task for one guest call (a batch or a
// punctuation), then to another, so that its memory grows with the calls it runs at once,
// not with its tasks. The call reaches the stores, stream time and outputs of the task it
// serves; store handles and output indices, resolved once by name, stay valid and reach the
// stores and outputs of that name of whichever task the call serves. What a guest keeps in
// globals from one call to the next it may see again in a call for another task: keep
// per-task state in stores (which the host also restores after a failure, see below), and
// use globals only for what every task shares (handles, buffers, parsed configuration).
//
// A guest that cannot (it keeps per-task data in memory) exports the marker
// statehost_instance_per_task, a function () -> () that is never called (ExportInstancePerTask):
// the host then gives each task an instance of its own, which serves no other task, as long
// as the task runs here. It costs an instance's memory per task.
//
// # Call sequence
//
// Instantiation of a guest (before its first call; for a task when the guest exports
// statehost_instance_per_task):
//
//  1. The host instantiates the module with a fresh memory; the memory is limited (statehost
//     default: 64 MiB) and growing past the limit fails as memory.grow does.
//  2. If the module exports _initialize, the host calls it (Go and wasi-libc reactors run
//     their runtime and package initializers there).
//  3. If the module exports statehost_init, the host calls it once per instance. It may call
//     every function but record_next, record_headers and emit (store_open, output_open,
//     store_info, the state, window and session functions, stream_time, schedule, log,
//     set_error); it returns 0, or a non-zero code that makes the host refuse the instance
//     (for example when a store it needs is unknown). It runs for the task the instance is
//     made for, which is any task of the processor: its state and window functions and
//     stream_time reach that task's stores and time. An init that calls them does per-task
//     work, so the host then runs an init for every task an instance of the module serves:
//     it lends a task only an instance whose init ran for that task, and makes one when
//     none is idle, which costs an instantiation where a shared instance would do. Set up
//     per-task state lazily in a batch instead, and keep init to store_open, output_open,
//     store_info, schedule and log: the instances are then shared.
//
// One batch:
//
//  1. The host calls statehost_process_batch(count), count >= 1 records.
//  2. The guest calls record_next to take each record, and for each record may call the state
//     functions, emit, record_headers, log and set_error. Exactly one record is current from
//     one record_next to the next: the host attributes every call and any failure to it.
//     Before the first record_next, failures are attributed to the batch's first record;
//     see record_next for CodeBufferTooSmall.
//  3. The guest returns 0 on success, once it has taken every record: count calls of
//     record_next have returned a record. It may call record_next once more, which returns
//     0, but need not: a guest that counts records may return right after the last one.
//     Returning 0 before every record has been taken is a protocol error that fails the
//     batch. Returning non-zero fails the batch; conventionally the code is negative, and
//     CodeProcessorFailed says the guest's own logic failed (with set_error to say why).
//
// The whole call is bounded in time (statehost default: 10 s); a guest that runs longer is
// stopped. A trap, an exit (proc_exit), running out of memory, a timeout or a non-zero result
// fails the batch, and the host discards the instance: it never calls it again, for any task.
// The other tasks it served are not affected: their next calls go to other instances. The
// host may later create a new instance and replay the failed task's records from its last
// commit, so a guest must keep everything that matters in stores, not in globals, and must
// not depend on seeing a record only once.
//
// # Store versions and migration
//
// The entries a guest keeps in a key-value store have a form of its choosing: a decimal count,
// a JSON object. A guest that changes that form declares a version per store, and the host
// turns every entry of the old form into the new one before the guest reads the store:
//
//	statehost_store_version(store) -> version
//	    Called after statehost_init with the handle of each of the processor's stores (the
//	    host opens them, as store_open does: a guest may compare the handle with its own
//	    store_open of a name). Returns the version of the entries the guest reads and writes
//	    in that store: DefaultStoreVersion (1) for a store whose form never changed, a higher
//	    number after each change. A version below 1, or above 1 for a window or session store,
//	    refuses the module. A guest without this export declares 1 for every store. It may
//	    call store_open, store_info, log and set_error; its answer must not depend on the task.
//	statehost_migrate(store, from_version, entries) -> 0
//	    Called when the store (its handle) holds entries of from_version, lower than the
//	    version the guest declares for it. entries is an iterator (iter_next, iter_close) over
//	    the next old entries of the task's partition of the store, in key order, a few
//	    thousand at most; the host calls again until it has given every entry once. During the
//	    calls the store holds its new contents as built so far, empty before the first call:
//	    state_get, state_range and state_prefix read them. The guest writes each entry's new
//	    form with state_put: under the same key, under another key (re-keyed: the entry stays
//	    in the task's partition), or not at all (deleted). The processor's other stores are
//	    empty, and what is written to them is dropped. There is no current record:
//	    record_next, record_headers and emit answer CodeNoRecord. A non-zero result fails the
//	    migration; set_error says why, best with the entry's key.
//
// The host records the version of each store partition with its data and in its changelog,
// so that a restore anywhere knows the form of the entries it restores. It migrates a task's
// store when the task is to run a module that declares a higher version than the store holds:
// at a deploy, where it first tries the migration over every task of the instance and refuses
// the module if an entry fails (the old module runs on, its state untouched), or when the
// application starts with such a module. The task processes nothing while it migrates; its
// store's old entries are replaced by the new ones in one commit, together with the new
// version, and the task goes on with the new module from its next record. A module that
// declares a lower version than a store holds is refused: it does not know the form of its
// entries.
//
// A migration must be deterministic: the host may run it more than once over the same
// entries (its trial at a deploy, then the migration itself; again after a crash). Under the
// at_least_once guarantee a crash while a migration's commit is in flight may leave some
// entries in their new form while the store keeps the old version, as it may process a
// record twice: a migration that meets an entry already in the new form should write it as
// it is.
//
// # Reversible migrations
//
// A rollback (statehost rollback) runs the module a processor ran before its last deploy
// again. When that deploy raised a store's version, the entries are in a form the older module
// cannot read: the rollback is possible only if the module rolled back from declares its
// migration reversible, and turns its entries back into the older form:
//
//	statehost_store_reversible(store) -> version
//	    Called, as statehost_store_version, with the handle of each of the processor's
//	    stores. Returns the lowest version to which statehost_migrate_reverse can bring the
//	    store's entries back: the store's own version (or anything above it) when it cannot.
//	    A guest without this export declares every migration irreversible: a rollback over a
//	    store it migrated is refused, with a message naming the store and the versions.
//	statehost_migrate_reverse(store, to_version, entries) -> 0
//	    statehost_migrate's mirror: called when the store holds entries of the version the
//	    guest declares, with to_version lower than it (and at least the version
//	    statehost_store_reversible returned). entries iterates over the next entries of the
//	    guest's own form; the guest writes each one's form of to_version to the store (which
//	    holds the new contents, empty before the first call), under its key or another, or
//	    nothing to delete it. The same rules hold: no current record, the other stores empty,
//	    a non-zero result fails the rollback (it is refused before any task switches back when
//	    it fails on a task's committed entries), and the guest must be deterministic.
//
// The host runs a rollback's reverse migrations as it runs migrations: tried first over every
// task of the instance, then task by task at commit boundaries, each in one commit with the
// store's older version.
//
// # Versioning
//
// Version is bumped on any change that an existing guest or host could misread: a changed
// signature, layout, code meaning or call sequence. New imported functions and new codes may
// be added within a version: a guest that imports a function this host lacks is refused at
// load time with an error naming the import, and guests must treat an unknown negative code as
// a failure. A host supports exactly one version.
//
// Instances that serve many tasks came within version 1: the version always said that an
// instance may be discarded and replaced at any time and that state belongs in stores, and
// store handles and schedules are kept as they were, so guests that follow it run unchanged.
// A version 1 guest that kept per-task data in globals exports statehost_instance_per_task
// (docs/decisions/20261204_pooled_instances.md).
package abi
