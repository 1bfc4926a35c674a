// The statehost ABI, version 1, for AssemblyScript: the host functions a guest imports from
// the module "statehost", the status codes and the byte layouts, restated from the
// specification (abi/doc.go, abi/abi.go, abi/layout.go and abi/statehost.h in the statehost
// repository). Pointers are usize (i32 on wasm32), times and durations i64 milliseconds.

/** Status codes: zero or a positive count is success, a negative code a failure. */
export enum Code {
  OK = 0,
  /** window_put and session_put: success without a write (closed or expired). */
  Dropped = 1,
  NotFound = -1,
  BufferTooSmall = -2,
  OutOfBounds = -3,
  BadArgument = -4,
  UnknownStore = -5,
  UnknownOutput = -6,
  BadHandle = -7,
  NoRecord = -8,
  StoreFailed = -9,
  EmitFailed = -10,
  /** A host limit: nothing was written or emitted. A fault of the record. */
  Limit = -11,
  /** What a guest returns when its own logic failed. */
  ProcessorFailed = -12,
  WrongStoreType = -13,
}

/** codeText describes a status code, e.g. "buffer too small", as the host does. */
export function codeText(code: i32): string {
  switch (code) {
    case Code.OK: return "ok";
    case Code.Dropped: return "dropped";
    case Code.NotFound: return "not found";
    case Code.BufferTooSmall: return "buffer too small";
    case Code.OutOfBounds: return "out of bounds";
    case Code.BadArgument: return "bad argument";
    case Code.UnknownStore: return "unknown store";
    case Code.UnknownOutput: return "unknown output";
    case Code.BadHandle: return "bad handle";
    case Code.NoRecord: return "no current record";
    case Code.StoreFailed: return "store failed";
    case Code.EmitFailed: return "emit failed";
    case Code.Limit: return "limit reached";
    case Code.ProcessorFailed: return "processor failed";
    case Code.WrongStoreType: return "wrong store type";
  }
  return code > 0 ? "ok" : "unknown code";
}

/** Log levels of log(); the host's (hclog's) numbers. */
export enum Level {
  Trace = 1,
  Debug = 2,
  Info = 3,
  Warn = 4,
  Error = 5,
}

/** Store types, as store_info reports them. */
export enum StoreType {
  KeyValue = 0,
  Window = 1,
  Session = 2,
}

/** What drives a punctuation (the kinds of schedule). */
export enum Punctuation {
  /** Every interval of the task's stream time. */
  StreamTime = 0,
  /** Every interval of the host's clock. */
  WallClock = 1,
}

/** NO_TIME is the stream time before the task has seen a record with a timestamp. */
export const NO_TIME: i64 = -1;
/** DEFAULT_STORE_VERSION is the version of a store whose guest declares none. */
export const DEFAULT_STORE_VERSION: i32 = 1;
/**
 * RESERVED_KEY is the one key a guest cannot write to a key-value store (the host's records
 * of store versions): put and delete of it fail with Code.BadArgument.
 */
export const RESERVED_KEY = "\x00statehost.store_version";

/** NULL_LEN is the length that stands for null (a null key, value or header value). */
export const NULL_LEN: i32 = -1;

// Limits.
export const MAX_NAME_LEN: i32 = 255;
export const MAX_OPEN_ITERATORS: i32 = 16;
export const MAX_LOG_LEN: i32 = 65536;
export const MAX_ERROR_LEN: i32 = 4096;
export const MAX_EMIT_BYTES: i32 = 1048576;
export const MAX_EMIT_HEADERS: i32 = 1024;
export const MAX_SCHEDULES: i32 = 16;

// Record header written by record_next (little-endian, unaligned).
export const RECORD_OFFSET_AT: i32 = 0; // i64 Kafka offset
export const RECORD_TIMESTAMP_AT: i32 = 8; // i64 ms since the Unix epoch
export const RECORD_PARTITION_AT: i32 = 16; // i32
export const RECORD_TOPIC_LEN_AT: i32 = 20; // i32 >= 0
export const RECORD_KEY_LEN_AT: i32 = 24; // i32, NULL_LEN = null
export const RECORD_VALUE_LEN_AT: i32 = 28; // i32, NULL_LEN = null (tombstone)
export const RECORD_HEADER_COUNT_AT: i32 = 32; // i32
export const RECORD_HEADERS_SIZE_AT: i32 = 36; // i32, bytes record_headers needs
export const RECORD_HEADER_SIZE: i32 = 40; // then topic, key, value bytes

// Entry (iter_next, record_headers, emit headers): key_len, value_len, key, value.
export const ENTRY_KEY_LEN_AT: i32 = 0;
export const ENTRY_VALUE_LEN_AT: i32 = 4;
export const ENTRY_HEADER_SIZE: i32 = 8;

// Window entry (iter_next on window and session iterators).
export const WINDOW_ENTRY_START_AT: i32 = 0; // i64
export const WINDOW_ENTRY_END_AT: i32 = 8; // i64
export const WINDOW_ENTRY_KEY_LEN_AT: i32 = 16; // i32
export const WINDOW_ENTRY_VALUE_LEN_AT: i32 = 20; // i32
export const WINDOW_ENTRY_HEADER_SIZE: i32 = 24;

// Store description (store_info); durations in ms.
export const STORE_INFO_TYPE_AT: i32 = 0;
export const STORE_INFO_WINDOW_SIZE_AT: i32 = 8;
export const STORE_INFO_ADVANCE_AT: i32 = 16;
export const STORE_INFO_GRACE_AT: i32 = 24;
export const STORE_INFO_RETENTION_AT: i32 = 32;
export const STORE_INFO_INACTIVITY_GAP_AT: i32 = 40;
export const STORE_INFO_SIZE: i32 = 48;

// The host functions (module "statehost"). The host copies what it is given before it
// returns and never keeps a pointer into guest memory.
@external("statehost", "store_open")
export declare function store_open(name: usize, nameLen: i32): i32;
@external("statehost", "output_open")
export declare function output_open(name: usize, nameLen: i32): i32;
@external("statehost", "state_get")
export declare function state_get(store: i32, key: usize, keyLen: i32, buf: usize, bufCap: i32): i32;
@external("statehost", "state_put")
export declare function state_put(store: i32, key: usize, keyLen: i32, val: usize, valLen: i32): i32;
@external("statehost", "state_delete")
export declare function state_delete(store: i32, key: usize, keyLen: i32): i32;
@external("statehost", "state_range")
export declare function state_range(store: i32, start: usize, startLen: i32, end: usize, endLen: i32): i32;
@external("statehost", "state_prefix")
export declare function state_prefix(store: i32, prefix: usize, prefixLen: i32): i32;
@external("statehost", "iter_next")
export declare function iter_next(iterator: i32, buf: usize, bufCap: i32): i32;
@external("statehost", "iter_close")
export declare function iter_close(iterator: i32): i32;
@external("statehost", "record_next")
export declare function record_next(buf: usize, bufCap: i32): i32;
@external("statehost", "record_headers")
export declare function record_headers(buf: usize, bufCap: i32): i32;
@external("statehost", "emit")
export declare function emit(output: i32, key: usize, keyLen: i32, val: usize, valLen: i32, hdr: usize, hdrLen: i32): i32;
@external("statehost", "log")
export declare function log(level: i32, msg: usize, msgLen: i32): i32;
@external("statehost", "set_error")
export declare function set_error(msg: usize, msgLen: i32): i32;
@external("statehost", "buffer_needed")
export declare function buffer_needed(): i32;
@external("statehost", "store_info")
export declare function store_info(store: i32, buf: usize, bufCap: i32): i32;
@external("statehost", "window_put")
export declare function window_put(store: i32, key: usize, keyLen: i32, startMs: i64, val: usize, valLen: i32): i32;
@external("statehost", "window_get")
export declare function window_get(store: i32, key: usize, keyLen: i32, startMs: i64, buf: usize, bufCap: i32): i32;
@external("statehost", "window_fetch")
export declare function window_fetch(store: i32, key: usize, keyLen: i32, fromMs: i64, toMs: i64): i32;
@external("statehost", "window_fetch_all")
export declare function window_fetch_all(store: i32, fromMs: i64, toMs: i64): i32;
@external("statehost", "session_put")
export declare function session_put(store: i32, key: usize, keyLen: i32, startMs: i64, endMs: i64, val: usize, valLen: i32): i32;
@external("statehost", "session_get")
export declare function session_get(store: i32, key: usize, keyLen: i32, startMs: i64, endMs: i64, buf: usize, bufCap: i32): i32;
@external("statehost", "session_find")
export declare function session_find(store: i32, key: usize, keyLen: i32, earliestEndMs: i64, latestStartMs: i64): i32;
@external("statehost", "session_find_all")
export declare function session_find_all(store: i32, earliestEndMs: i64, latestEndMs: i64): i32;
@external("statehost", "stream_time")
export declare function stream_time(out: usize): i32;
@external("statehost", "schedule")
export declare function schedule(kind: i32, intervalMs: i64): i32;
