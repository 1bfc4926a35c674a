// Window and session stores, their description and iterators.

import {
  Code, NO_TIME, STORE_INFO_ADVANCE_AT, STORE_INFO_GRACE_AT, STORE_INFO_INACTIVITY_GAP_AT,
  STORE_INFO_RETENTION_AT, STORE_INFO_SIZE, STORE_INFO_TYPE_AT, STORE_INFO_WINDOW_SIZE_AT,
  StoreType, WINDOW_ENTRY_END_AT, WINDOW_ENTRY_HEADER_SIZE, WINDOW_ENTRY_KEY_LEN_AT,
  WINDOW_ENTRY_START_AT, WINDOW_ENTRY_VALUE_LEN_AT,
  session_find, session_find_all, session_get, session_put, store_info,
  window_fetch, window_fetch_all, window_get, window_put,
} from "./abi";
import { Buf, fail, keyBytes, lenOf, ptrOf, str, toBytes } from "./bytes";
import { EntryIterator } from "./store";

const VALUE_BUF_SIZE = 256;

/**
 * StoreInfo is a store's description (store_info): its type and, in milliseconds, the
 * durations that apply to it (0 for those that do not). Its predicates say when a window or
 * session is closed, final or expired at a stream time (see "Windows and sessions" in
 * abi/doc.go).
 */
export class StoreInfo {
  type: StoreType = StoreType.KeyValue;
  /** Window stores: the windows' size. */
  windowSize: i64 = 0;
  /** Window stores: the hop of hopping windows; windowSize for tumbling ones. */
  advance: i64 = 0;
  /** Window and session stores. */
  grace: i64 = 0;
  /** Window and session stores. */
  retention: i64 = 0;
  /** Session stores. */
  inactivityGap: i64 = 0;

  /** windowClosed: a put with a value into the window starting at start is dropped at now. */
  windowClosed(start: i64, now: i64): bool {
    return now != NO_TIME && start <= now - this.windowSize - this.grace;
  }

  /** sessionClosed: a put with a value of the session ending at end is dropped at now. */
  sessionClosed(end: i64, now: i64): bool {
    return now != NO_TIME && end < now - this.grace;
  }

  /** sessionFinal: no record that is not late can reach the session ending at end. */
  sessionFinal(end: i64, now: i64): bool {
    return now != NO_TIME && end < now - this.inactivityGap - this.grace;
  }

  /** expired: a window (by its start) or a session (by its end) at t is gone at now. */
  expired(t: i64, now: i64): bool {
    return now != NO_TIME && t <= now - this.retention;
  }
}

/** readStoreInfo reads the description of the store with handle h, named name, into info. */
export function readStoreInfo(name: string, h: i32, info: StoreInfo): void {
  const b = new Buf(STORE_INFO_SIZE);
  const n = store_info(h, b.ptr, b.cap);
  if (n < 0) fail("store \"" + name + "\": info", n);
  info.type = b.i32At(STORE_INFO_TYPE_AT);
  info.windowSize = b.i64At(STORE_INFO_WINDOW_SIZE_AT);
  info.advance = b.i64At(STORE_INFO_ADVANCE_AT);
  info.grace = b.i64At(STORE_INFO_GRACE_AT);
  info.retention = b.i64At(STORE_INFO_RETENTION_AT);
  info.inactivityGap = b.i64At(STORE_INFO_INACTIVITY_GAP_AT);
}

/** storeTypeName names a store type: "key-value", "window" or "session". */
export function storeTypeName(t: i32): string {
  switch (t) {
    case StoreType.KeyValue: return "key-value";
    case StoreType.Window: return "window";
    case StoreType.Session: return "session";
  }
  return "type-" + t.toString();
}

function floorDiv(a: i64, b: i64): i64 {
  const q = a / b;
  return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/**
 * windowStarts returns the starts, ascending, of the windows [start, start + size) that
 * contain ts, among the windows whose starts are the multiples of advance (negative ones
 * included). None if size or advance is not positive.
 */
export function windowStarts(ts: i64, size: i64, advance: i64): i64[] {
  const starts = new Array<i64>();
  if (size <= 0 || advance <= 0) return starts;
  const first = (floorDiv(ts - size, advance) + 1) * advance;
  const last = floorDiv(ts, advance) * advance;
  for (let s = first; s <= last; s += advance) starts.push(s);
  return starts;
}

/**
 * WindowStore is one of the processor's window stores (Context.windowStore): a value per key
 * and window start; a window covers [start, start + info.windowSize). Which windows a record
 * belongs to is the processor's logic: windowsFor gives them for windows aligned to
 * multiples of info.advance (tumbling or hopping). A put into a closed window is dropped
 * (put returns false, and the host counts a late record); an expired window is absent.
 */
export class WindowStore {
  private buf: Buf = new Buf(VALUE_BUF_SIZE);

  constructor(
    public readonly name: string,
    public readonly handle: i32,
    /** The store's description: windowSize, advance, grace, retention. */
    public readonly info: StoreInfo,
  ) {}

  /** windowsFor returns the starts, ascending, of this store's windows that contain ts. */
  windowsFor(ts: i64): i64[] {
    return windowStarts(ts, this.info.windowSize, this.info.advance);
  }

  /** get returns a copy of key's value in the window starting at start, or null. */
  get<K>(key: K, start: i64): Uint8Array | null {
    const k = keyBytes<K>(key, this.name, "get");
    let n: i32;
    while ((n = window_get(this.handle, k.dataStart, k.byteLength, start, this.buf.ptr, this.buf.cap)) == Code.BufferTooSmall) {
      this.buf.grow();
    }
    if (n == Code.NotFound) return null;
    if (n < 0) this.fail("get", n);
    return this.buf.copy(0, n);
  }

  /** getString is get decoded from UTF-8. */
  getString<K>(key: K, start: i64): string | null {
    const v = this.get<K>(key, start);
    return v === null ? null : str(v);
  }

  /**
   * put stores value under key in the window starting at start; a null value deletes it.
   * It returns false, without an error, when the host dropped the put: the window is
   * expired, or closed and the value is not null.
   */
  put<K, V>(key: K, start: i64, value: V): bool {
    const k = keyBytes<K>(key, this.name, "put");
    const v = toBytes<V>(value);
    const n = window_put(this.handle, k.dataStart, k.byteLength, start, ptrOf(v), lenOf(v));
    if (n == Code.Dropped) return false;
    if (n < 0) this.fail("put", n);
    return true;
  }

  /** delete removes key's window starting at start (a closed one too). */
  delete<K>(key: K, start: i64): void {
    const k = keyBytes<K>(key, this.name, "delete");
    const n = window_put(this.handle, k.dataStart, k.byteLength, start, 0, -1);
    if (n < 0) this.fail("delete", n);
  }

  /** fetch iterates over key's windows with from <= start <= to, ascending by start. */
  fetch<K>(key: K, from: i64, to: i64): WindowIterator {
    const k = keyBytes<K>(key, this.name, "fetch");
    const h = window_fetch(this.handle, k.dataStart, k.byteLength, from, to);
    if (h < 0) this.fail("fetch", h);
    return new WindowIterator(this.name, h);
  }

  /** fetchAll iterates over every key's windows with from <= start <= to, in no set order. */
  fetchAll(from: i64, to: i64): WindowIterator {
    const h = window_fetch_all(this.handle, from, to);
    if (h < 0) this.fail("fetchAll", h);
    return new WindowIterator(this.name, h);
  }

  private fail(op: string, code: i32): void {
    fail("store \"" + this.name + "\": " + op, code);
  }
}

/**
 * SessionStore is one of the processor's session stores (Context.sessionStore): a value per
 * key and session [start, end] (both inclusive). Merging sessions (remove the old ones, put
 * the merged one) is the processor's work: find gives the sessions a record at t merges with
 * when asked for t - info.inactivityGap and t + info.inactivityGap.
 */
export class SessionStore {
  private buf: Buf = new Buf(VALUE_BUF_SIZE);

  constructor(
    public readonly name: string,
    public readonly handle: i32,
    /** The store's description: inactivityGap, grace, retention. */
    public readonly info: StoreInfo,
  ) {}

  /** get returns a copy of the value of key's session [start, end], or null. */
  get<K>(key: K, start: i64, end: i64): Uint8Array | null {
    const k = keyBytes<K>(key, this.name, "get");
    let n: i32;
    while ((n = session_get(this.handle, k.dataStart, k.byteLength, start, end, this.buf.ptr, this.buf.cap)) == Code.BufferTooSmall) {
      this.buf.grow();
    }
    if (n == Code.NotFound) return null;
    if (n < 0) this.fail("get", n);
    return this.buf.copy(0, n);
  }

  /** getString is get decoded from UTF-8. */
  getString<K>(key: K, start: i64, end: i64): string | null {
    const v = this.get<K>(key, start, end);
    return v === null ? null : str(v);
  }

  /**
   * put stores value under key for the session [start, end] (start <= end); a null value
   * removes it. It returns false, without an error, when the host dropped the put: the
   * session is expired, or closed and the value is not null.
   */
  put<K, V>(key: K, start: i64, end: i64, value: V): bool {
    const k = keyBytes<K>(key, this.name, "put");
    const v = toBytes<V>(value);
    const n = session_put(this.handle, k.dataStart, k.byteLength, start, end, ptrOf(v), lenOf(v));
    if (n == Code.Dropped) return false;
    if (n < 0) this.fail("put", n);
    return true;
  }

  /** remove removes key's session [start, end]; removing an absent one is not an error. */
  remove<K>(key: K, start: i64, end: i64): void {
    const k = keyBytes<K>(key, this.name, "remove");
    const n = session_put(this.handle, k.dataStart, k.byteLength, start, end, 0, -1);
    if (n < 0) this.fail("remove", n);
  }

  /**
   * find iterates over key's sessions with end >= earliestEnd and start <= latestStart,
   * ascending by end, then start.
   */
  find<K>(key: K, earliestEnd: i64, latestStart: i64): WindowIterator {
    const k = keyBytes<K>(key, this.name, "find");
    const h = session_find(this.handle, k.dataStart, k.byteLength, earliestEnd, latestStart);
    if (h < 0) this.fail("find", h);
    return new WindowIterator(this.name, h);
  }

  /** findAll iterates over every key's sessions with earliestEnd <= end <= latestEnd. */
  findAll(earliestEnd: i64, latestEnd: i64): WindowIterator {
    const h = session_find_all(this.handle, earliestEnd, latestEnd);
    if (h < 0) this.fail("findAll", h);
    return new WindowIterator(this.name, h);
  }

  private fail(op: string, code: i32): void {
    fail("store \"" + this.name + "\": " + op, code);
  }
}

/**
 * WindowIterator walks windows or sessions: each has a key, a start and an end (a window's
 * end is exclusive, start + windowSize; a session's inclusive) and a value:
 *
 *     const it = windows.fetchAll(from, to);
 *     while (it.next()) { use(it.key, it.start, it.end, it.value); }
 */
export class WindowIterator extends EntryIterator {
  /** The current window's or session's start, ms. */
  start: i64 = 0;
  /** The current window's end (exclusive) or session's end (inclusive), ms. */
  end: i64 = 0;

  /** next moves to the next window or session; false when there is none. */
  next(): bool {
    const e = this.entries;
    if (!e.more()) return false;
    const kl = e.buf.i32At(e.pos + WINDOW_ENTRY_KEY_LEN_AT);
    const vl = e.buf.i32At(e.pos + WINDOW_ENTRY_VALUE_LEN_AT);
    if (kl < 0 || vl < 0 || e.pos + WINDOW_ENTRY_HEADER_SIZE + kl + vl > e.end) {
      fail(e.what + ": next: malformed entry", Code.ProcessorFailed);
    }
    this.start = e.buf.i64At(e.pos + WINDOW_ENTRY_START_AT);
    this.end = e.buf.i64At(e.pos + WINDOW_ENTRY_END_AT);
    this.key = e.buf.copy(e.pos + WINDOW_ENTRY_HEADER_SIZE, kl);
    this.value = e.buf.copy(e.pos + WINDOW_ENTRY_HEADER_SIZE + kl, vl);
    e.pos += WINDOW_ENTRY_HEADER_SIZE + kl + vl;
    return true;
  }
}
