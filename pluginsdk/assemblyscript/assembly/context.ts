// What a processor sees: the record, the stores, emit and log.

import {
  Code, ENTRY_HEADER_SIZE, ENTRY_KEY_LEN_AT, ENTRY_VALUE_LEN_AT, Level, MAX_LOG_LEN, NULL_LEN,
  StoreType, emit, log as hostLog, output_open, record_headers, store_open, stream_time,
} from "./abi";
import { Buf, fail, lenOf, ptrOf, str, toBytes } from "./bytes";
import { KeyValueStore } from "./store";
import { SessionStore, StoreInfo, WindowStore, readStoreInfo, storeTypeName } from "./window";

/** Header is a record header; a null value is null. */
export class Header {
  constructor(
    public key: string,
    public value: Uint8Array | null,
  ) {}

  /** of makes a header of a string key and a string value (UTF-8), or a null value. */
  static of(key: string, value: string | null): Header {
    return new Header(key, value === null ? null : Uint8Array.wrap(String.UTF8.encode(value)));
  }

  /** valueString is the value decoded from UTF-8, or null. */
  valueString(): string | null {
    const v = this.value;
    return v === null ? null : str(v);
  }
}

/** Record is an input record. key and value are null when null, else copies (maybe empty). */
export class Record {
  topic: string = "";
  partition: i32 = 0;
  offset: i64 = 0;
  /** Milliseconds since the Unix epoch. */
  timestamp: i64 = 0;
  key: Uint8Array | null = null;
  value: Uint8Array | null = null;
  /** How many headers the record has (RecordContext.headers fetches them). */
  headerCount: i32 = 0;
  headersSize: i32 = 0;

  /** isNull reports whether the value is null: the record is a tombstone. */
  isNull(): bool {
    return this.value === null;
  }

  /** keyString is the key decoded from UTF-8, or null. */
  keyString(): string | null {
    const k = this.key;
    return k === null ? null : str(k);
  }

  /** valueString is the value decoded from UTF-8, or null. */
  valueString(): string | null {
    const v = this.value;
    return v === null ? null : str(v);
  }
}

// The instance's state: what it opened, shared by every task it serves.
const kvStores = new Array<KeyValueStore>();
const windowStores = new Array<WindowStore>();
const sessionStores = new Array<SessionStore>();
const outputNames = new Array<string>();
const outputIndexes = new Array<i32>();
const emitHeaders = new Buf(256);
const timeBuf = new Buf(8);

/**
 * openStore opens the store called name, reads its description into info, checks that it
 * has type want, and returns its handle.
 */
function openStore(name: string, want: StoreType, info: StoreInfo): i32 {
  const n = String.UTF8.encode(name);
  const h = store_open(changetype<usize>(n), n.byteLength);
  if (h < 0) fail("store \"" + name + "\": open", h);
  readStoreInfo(name, h, info);
  if (info.type != want) {
    throw new Error("statehost: store \"" + name + "\": open: wrong store type (code -13): it is a " +
      storeTypeName(info.type) + " store, not a " + storeTypeName(want) + " store");
  }
  if (want == StoreType.Window && (info.windowSize <= 0 || info.advance <= 0)) {
    throw new Error("statehost: store \"" + name + "\": info: window_size " + info.windowSize.toString() +
      " and advance " + info.advance.toString() + " must be positive");
  }
  return h;
}

/** keyValueStore returns the key-value store called name, opened on first use. */
export function keyValueStore(name: string): KeyValueStore {
  for (let i = 0, n = kvStores.length; i < n; i++) {
    const s = unchecked(kvStores[i]);
    if (s.name == name) return s;
  }
  const h = openStore(name, StoreType.KeyValue, new StoreInfo());
  const s = new KeyValueStore(name, h);
  kvStores.push(s);
  return s;
}

/** windowStore returns the window store called name, opened on first use. */
export function windowStore(name: string): WindowStore {
  for (let i = 0, n = windowStores.length; i < n; i++) {
    const s = unchecked(windowStores[i]);
    if (s.name == name) return s;
  }
  const info = new StoreInfo();
  const h = openStore(name, StoreType.Window, info);
  const s = new WindowStore(name, h, info);
  windowStores.push(s);
  return s;
}

/** sessionStore returns the session store called name, opened on first use. */
export function sessionStore(name: string): SessionStore {
  for (let i = 0, n = sessionStores.length; i < n; i++) {
    const s = unchecked(sessionStores[i]);
    if (s.name == name) return s;
  }
  const info = new StoreInfo();
  const h = openStore(name, StoreType.Session, info);
  const s = new SessionStore(name, h, info);
  sessionStores.push(s);
  return s;
}

/** outputIndex returns the index of the declared output topic called name. */
function outputIndex(name: string): i32 {
  for (let i = 0, n = outputNames.length; i < n; i++) {
    if (unchecked(outputNames[i]) == name) return unchecked(outputIndexes[i]);
  }
  const b = String.UTF8.encode(name);
  const idx = output_open(changetype<usize>(b), b.byteLength);
  if (idx < 0) fail("output \"" + name + "\"", idx);
  outputNames.push(name);
  outputIndexes.push(idx);
  return idx;
}

/** encodeHeaders writes hs as a sequence of entries into emitHeaders and returns its length. */
function encodeHeaders(hs: Header[]): i32 {
  const keys = new Array<ArrayBuffer>(hs.length);
  let size = 0;
  for (let i = 0, n = hs.length; i < n; i++) {
    const h = unchecked(hs[i]);
    const k = String.UTF8.encode(h.key);
    unchecked((keys[i] = k));
    size += ENTRY_HEADER_SIZE + k.byteLength + (h.value === null ? 0 : h.value!.byteLength);
  }
  if (emitHeaders.cap < size) emitHeaders.data = new ArrayBuffer(size);
  let p = emitHeaders.ptr;
  for (let i = 0, n = hs.length; i < n; i++) {
    const h = unchecked(hs[i]);
    const k = unchecked(keys[i]);
    const v = h.value;
    store<i32>(p + ENTRY_KEY_LEN_AT, k.byteLength);
    store<i32>(p + ENTRY_VALUE_LEN_AT, lenOf(v));
    p += ENTRY_HEADER_SIZE;
    memory.copy(p, changetype<usize>(k), k.byteLength);
    p += k.byteLength;
    if (v !== null) {
      memory.copy(p, v.dataStart, v.byteLength);
      p += v.byteLength;
    }
  }
  return size;
}

/** emitTo sends a record to the output with index out. */
function emitIndex(out: i32, key: Uint8Array | null, value: Uint8Array | null, headers: Header[] | null): void {
  let hp: usize = 0;
  let hl = 0;
  if (headers !== null && headers.length > 0) {
    hl = encodeHeaders(headers);
    hp = emitHeaders.ptr;
  }
  const n = emit(out, ptrOf(key), lenOf(key), ptrOf(value), lenOf(value), hp, hl);
  if (n < 0) fail("emit", n);
}

/** log writes message to the host's log at level; it works anywhere, also outside a call of the host. */
export function log(level: Level, message: string): void {
  const b = String.UTF8.encode(message);
  hostLog(level, changetype<usize>(b), min(b.byteLength, MAX_LOG_LEN));
}

/**
 * Context is what a processor and a punctuation see: the task's stores and stream time, the
 * processor's outputs, and the log. It is valid only during the call it is given to.
 */
export class Context {
  /** store returns the key-value store called name, opened once per instance. */
  store(name: string): KeyValueStore {
    return keyValueStore(name);
  }

  /** windowStore returns the window store called name, opened once per instance. */
  windowStore(name: string): WindowStore {
    return windowStore(name);
  }

  /** sessionStore returns the session store called name, opened once per instance. */
  sessionStore(name: string): SessionStore {
    return sessionStore(name);
  }

  /**
   * streamTime returns the task's stream time in milliseconds since the Unix epoch: the
   * largest timestamp of the records the task has taken, kept across restarts; NO_TIME (-1)
   * before any.
   */
  streamTime(): i64 {
    const n = stream_time(timeBuf.ptr);
    if (n < 0) fail("stream time", n);
    return timeBuf.i64At(0);
  }

  /**
   * emit sends a record to the processor's first output topic. Key and value are
   * Uint8Array, ArrayBuffer, string (UTF-8) or null; a null value is a tombstone. The host
   * copies everything. A record that would not fit the output topic, or past the emit
   * budget of the current record, throws: the record fails.
   */
  emit<K, V>(key: K, value: V, headers: Header[] | null = null): void {
    emitIndex(0, toBytes<K>(key), toBytes<V>(value), headers);
  }

  /**
   * emitTombstone sends a tombstone (a null value) for key to the first output topic. It is
   * emit(key, null) without naming null's type.
   */
  emitTombstone<K>(key: K): void {
    emitIndex(0, toBytes<K>(key), null, null);
  }

  /** emitTo sends a record to the declared output topic called output. */
  emitTo<K, V>(output: string, key: K, value: V, headers: Header[] | null = null): void {
    emitIndex(outputIndex(output), toBytes<K>(key), toBytes<V>(value), headers);
  }

  /** log writes message to the host's log, tagged with processor, partition and offset. */
  log(level: Level, message: string): void {
    log(level, message);
  }
}

/** RecordContext is what a processor sees for one record. */
export class RecordContext extends Context {
  /** The current record. */
  record: Record = new Record();
  private headerList: Header[] | null = null;

  /** headers returns the current record's headers, in their order (fetched on first call). */
  headers(): Header[] {
    let hs = this.headerList;
    if (hs !== null) return hs;
    hs = new Array<Header>();
    const r = this.record;
    if (r.headerCount > 0) {
      const b = new Buf(max(r.headersSize, 8));
      let n: i32;
      while ((n = record_headers(b.ptr, b.cap)) == Code.BufferTooSmall) b.grow();
      if (n < 0) fail("headers", n);
      let p = 0;
      while (p + ENTRY_HEADER_SIZE <= n) {
        const kl = b.i32At(p + ENTRY_KEY_LEN_AT);
        const vl = b.i32At(p + ENTRY_VALUE_LEN_AT);
        if (kl < 0 || vl < NULL_LEN || p + ENTRY_HEADER_SIZE + kl + max(vl, 0) > n) {
          fail("headers: malformed entry", Code.ProcessorFailed);
        }
        p += ENTRY_HEADER_SIZE;
        const key = String.UTF8.decodeUnsafe(b.ptr + <usize>p, <usize>kl);
        p += kl;
        let value: Uint8Array | null = null;
        if (vl >= 0) {
          value = b.copy(p, vl);
          p += vl;
        }
        hs.push(new Header(key, value));
      }
    }
    this.headerList = hs;
    return hs;
  }

  /** reset forgets the previous record's headers. */
  reset(): void {
    this.headerList = null;
  }
}

/** PunctuationContext is what a punctuation sees: no record, but stores, emit and log. */
export class PunctuationContext extends Context {
  /** The punctuation's schedule id (0, 1, ... in the order of withPunctuation). */
  id: i32 = 0;
  /**
   * The punctuation's time in milliseconds: the stream time for Punctuation.StreamTime, the
   * host's clock for Punctuation.WallClock. Emitted records get this timestamp.
   */
  time: i64 = 0;
}
