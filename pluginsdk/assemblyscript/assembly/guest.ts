// Registration of the processor, and the guest's entry points.

import {
  Code, DEFAULT_STORE_VERSION, Level, MAX_ERROR_LEN, NULL_LEN, Punctuation, RECORD_HEADER_COUNT_AT, RECORD_HEADER_SIZE,
  RECORD_HEADERS_SIZE_AT, RECORD_KEY_LEN_AT, RECORD_OFFSET_AT, RECORD_PARTITION_AT, RECORD_TIMESTAMP_AT,
  RECORD_TOPIC_LEN_AT, RECORD_VALUE_LEN_AT, record_next, schedule, set_error,
} from "./abi";
import { Buf, str } from "./bytes";
import { KeyValueIterator, KeyValueStore } from "./store";
import { PunctuationContext, Record, RecordContext, keyValueStore, log, sessionStore, windowStore } from "./context";

/** ProcessFn processes one record. It fails the record by throwing. */
export type ProcessFn = (ctx: RecordContext) => void;
/** PunctuateFn runs a punctuation. It fails the task by throwing, as a failed record does. */
export type PunctuateFn = (ctx: PunctuationContext) => void;

/**
 * MigrateFn turns one entry of a store, key and value in the form of version m.from, into the
 * store's current form: it writes the entry's new form to m.store (put under the same key, or
 * under another key to re-key it), or nothing to drop the entry. It fails the migration by
 * throwing. It must be deterministic, and leave an entry that is already in the new form as
 * it is (see "Store versions and migration" in abi/doc.go).
 */
export type MigrateFn = (m: Migration, key: Uint8Array, value: Uint8Array) => void;

/** Migration is the migration of one store to its current version. */
export class Migration {
  constructor(
    /** The store being migrated: its new contents as built so far, empty at first. */
    public readonly store: KeyValueStore,
    /** The version of the old entries. */
    public readonly from: i32,
    /** The version the entries are migrated to. */
    public readonly to: i32,
  ) {}
}

/** StoreVersion is a store version declared with Registration.withStoreVersion. */
class StoreVersion {
  constructor(
    public name: string,
    public version: i32,
    public fn: MigrateFn | null,
  ) {}
}

/** Punctuator is a punctuation asked for with Registration.withPunctuation. */
class Punctuator {
  id: i32 = -1;
  constructor(
    public kind: Punctuation,
    public intervalMs: i64,
    public fn: PunctuateFn,
  ) {}
}

/**
 * Registration is the processor and what it declares: its stores, opened (and checked) when
 * an instance starts, and its punctuations. Chain its methods:
 *
 *     register(count).withStore("counts");
 *     register(count).withWindowStore("windows").withPunctuation(Punctuation.StreamTime, 1000, emitClosed);
 */
export class Registration {
  stores: string[] = [];
  windowStores: string[] = [];
  sessionStores: string[] = [];
  punctuators: Punctuator[] = [];
  versions: StoreVersion[] = [];

  constructor(public fn: ProcessFn) {}

  /** withStore declares a key-value store. */
  withStore(name: string): Registration {
    this.stores.push(name);
    return this;
  }

  /** withWindowStore declares a window store. */
  withWindowStore(name: string): Registration {
    this.windowStores.push(name);
    return this;
  }

  /** withSessionStore declares a session store. */
  withSessionStore(name: string): Registration {
    this.sessionStores.push(name);
    return this;
  }

  /**
   * withPunctuation asks the host to call fn every intervalMs (>= 1) milliseconds of stream
   * time (Punctuation.StreamTime) or of its clock (Punctuation.WallClock), between batches.
   */
  withPunctuation(kind: Punctuation, intervalMs: i64, fn: PunctuateFn): Registration {
    this.punctuators.push(new Punctuator(kind, intervalMs, fn));
    return this;
  }

  /**
   * withStoreVersion declares that the processor reads and writes the entries of the
   * key-value store name in the form of version (2 and up; a store without a version is at 1),
   * and that fn turns the entries of any older version into that form. When a task starts
   * over a store of an older version, the host migrates it first: it hands each old entry to
   * fn, once, and replaces the store's entries by those fn wrote, with the new version, in one
   * commit. A null fn declares the version without a migration: the module then runs only
   * over stores at that version, or empty.
   *
   *     register(count).withStore("counts").withStoreVersion("counts", 2, toJSON);
   *
   *     function toJSON(m: Migration, key: Uint8Array, value: Uint8Array): void {
   *       m.store.put(key, "{\"n\":" + str(value) + "}");
   *     }
   */
  withStoreVersion(name: string, version: i32, fn: MigrateFn | null = null): Registration {
    if (name.length == 0 || version < DEFAULT_STORE_VERSION) {
      throw new Error("statehost: withStoreVersion(\"" + name + "\", " + version.toString() + "): a store name and a version of at least 1");
    }
    for (let i = 0; i < this.versions.length; i++) {
      if (this.versions[i].name == name) throw new Error("statehost: withStoreVersion: store \"" + name + "\" is declared twice");
    }
    this.versions.push(new StoreVersion(name, version, fn));
    return this;
  }
}

let registered: Registration | null = null;

/**
 * register makes fn the processor. Call it once, at the top level of the entry file: it runs
 * when the instance is initialized, before the host calls it.
 */
export function register(fn: ProcessFn): Registration {
  const r = new Registration(fn);
  registered = r;
  return r;
}

/** setError tells the host why the current call fails. */
export function setError(message: string): void {
  const b = String.UTF8.encode(message);
  set_error(changetype<usize>(b), min(b.byteLength, MAX_ERROR_LEN));
}

function noProcessor(): i32 {
  setError("statehost: no processor registered: call register() at the top level of the entry file");
  return Code.ProcessorFailed;
}

/** init implements statehost_init: it opens the declared stores and schedules the punctuations. */
export function init(): i32 {
  const r = registered;
  if (r === null) return noProcessor();
  for (let i = 0; i < r.stores.length; i++) keyValueStore(r.stores[i]);
  for (let i = 0; i < r.windowStores.length; i++) windowStore(r.windowStores[i]);
  for (let i = 0; i < r.sessionStores.length; i++) sessionStore(r.sessionStores[i]);
  for (let i = 0; i < r.punctuators.length; i++) {
    const p = r.punctuators[i];
    const id = schedule(p.kind, p.intervalMs);
    if (id < 0) {
      setError("statehost: schedule of punctuation " + i.toString() + " every " + p.intervalMs.toString() + " ms failed (code " + id.toString() + ")");
      return id;
    }
    p.id = id;
  }
  return Code.OK;
}

const recordBuf = new Buf(4096);
const rctx = new RecordContext();
const pctx = new PunctuationContext();

let topicBytes = new ArrayBuffer(0); // the current topic's name, as the host wrote it

/** decode makes the record record_next wrote into recordBuf (n bytes) the current one. */
function decode(r: Record, n: i32): void {
  const b = recordBuf;
  const tl = b.i32At(RECORD_TOPIC_LEN_AT);
  const kl = b.i32At(RECORD_KEY_LEN_AT);
  const vl = b.i32At(RECORD_VALUE_LEN_AT);
  if (n < RECORD_HEADER_SIZE || tl < 0 || kl < NULL_LEN || vl < NULL_LEN ||
    <i64>RECORD_HEADER_SIZE + tl + max(kl, 0) + max(vl, 0) > n) {
    throw new Error("statehost: malformed record from the host");
  }
  r.offset = b.i64At(RECORD_OFFSET_AT);
  r.timestamp = b.i64At(RECORD_TIMESTAMP_AT);
  r.partition = b.i32At(RECORD_PARTITION_AT);
  r.headerCount = b.i32At(RECORD_HEADER_COUNT_AT);
  r.headersSize = b.i32At(RECORD_HEADERS_SIZE_AT);
  const topic = b.ptr + RECORD_HEADER_SIZE;
  // The topic string is made again only when the topic changes.
  if (topicBytes.byteLength != tl || memory.compare(changetype<usize>(topicBytes), topic, tl) != 0) {
    topicBytes = b.data.slice(RECORD_HEADER_SIZE, RECORD_HEADER_SIZE + tl);
    r.topic = String.UTF8.decode(topicBytes);
  }
  r.key = kl < 0 ? null : b.copy(RECORD_HEADER_SIZE + tl, kl);
  r.value = vl < 0 ? null : b.copy(RECORD_HEADER_SIZE + tl + max(kl, 0), vl);
}

/** processBatch implements statehost_process_batch: it takes count records and processes each. */
export function processBatch(count: i32): i32 {
  const r = registered;
  if (r === null) return noProcessor();
  const fn = r.fn;
  for (let i = 0; i < count; ) {
    const n = record_next(recordBuf.ptr, recordBuf.cap);
    if (n == Code.BufferTooSmall) {
      recordBuf.grow();
      continue;
    }
    if (n < 0) {
      setError("statehost: record_next failed (code " + n.toString() + ")");
      return n;
    }
    if (n == 0) break;
    decode(rctx.record, n);
    rctx.reset();
    fn(rctx);
    i++;
  }
  return Code.OK;
}

/** punctuate implements statehost_punctuate. */
export function punctuate(id: i32, timeMs: i64): i32 {
  const r = registered;
  if (r === null) return noProcessor();
  for (let i = 0; i < r.punctuators.length; i++) {
    const p = r.punctuators[i];
    if (p.id == id) {
      pctx.id = id;
      pctx.time = timeMs;
      p.fn(pctx);
      return Code.OK;
    }
  }
  setError("statehost: punctuation " + id.toString() + " was not scheduled");
  return Code.ProcessorFailed;
}

/** versionOf returns the declared version of the store whose handle the host passed, or null. */
function versionOf(handle: i32): StoreVersion | null {
  const r = registered;
  if (r === null) return null;
  for (let i = 0; i < r.versions.length; i++) {
    const v = r.versions[i];
    if (keyValueStore(v.name).handle == handle) return v;
  }
  return null;
}

/** storeVersion implements statehost_store_version. */
export function storeVersion(handle: i32): i32 {
  const v = versionOf(handle);
  return v === null ? DEFAULT_STORE_VERSION : v.version;
}

// What a migration is at, for the error of an entry that fails.
let migrating: StoreVersion | null = null;
let migratingFrom: i32 = 0;
let migratingKey: Uint8Array | null = null;

/** migrate implements statehost_migrate: it hands each entry of the iterator entries to the store's MigrateFn. */
export function migrate(handle: i32, from: i32, entries: i32): i32 {
  const v = versionOf(handle);
  let fn: MigrateFn | null = null;
  if (v !== null) fn = v.fn;
  if (v === null || fn === null) {
    setError("statehost: store " + (v === null ? "?" : "\"" + v.name + "\"") + " (handle " + handle.toString() +
      "): no migration from version " + from.toString() + " is registered (withStoreVersion)");
    return Code.ProcessorFailed;
  }
  const m = new Migration(keyValueStore(v.name), from, v.version);
  const it = new KeyValueIterator(v.name, entries);
  migrating = v;
  migratingFrom = from;
  while (it.next()) {
    migratingKey = it.key;
    fn(m, it.key, it.value);
  }
  migrating = null;
  migratingKey = null;
  return Code.OK;
}

let aborting = false;

/**
 * abortHandler replaces AssemblyScript's abort (a failed assertion, a throw, an index out of
 * range, running out of memory): it tells the host why, with where, and traps. The host then
 * fails the call and discards the instance.
 */
export function abortHandler(message: string | null, fileName: string | null, line: u32, column: u32): void {
  if (!aborting) {
    aborting = true; // an abort while reporting one (out of memory) only traps
    let m = message !== null ? message : "abort";
    if (fileName !== null) m += " (" + fileName + ":" + line.toString() + ":" + column.toString() + ")";
    const v = migrating;
    const key = migratingKey;
    if (v !== null && key !== null) {
      m = "statehost: migrate store \"" + v.name + "\" from version " + migratingFrom.toString() + " to " +
        v.version.toString() + ": entry \"" + str(key) + "\": " + m;
    }
    setError(m);
  }
  unreachable();
}

/** traceHandler replaces AssemblyScript's trace: the message and values go to the host's log at debug. */
export function traceHandler(message: string, n: i32 = 0, a0: f64 = 0, a1: f64 = 0, a2: f64 = 0, a3: f64 = 0, a4: f64 = 0): void {
  let m = "trace: " + message;
  if (n > 0) m += " " + a0.toString();
  if (n > 1) m += ", " + a1.toString();
  if (n > 2) m += ", " + a2.toString();
  if (n > 3) m += ", " + a3.toString();
  if (n > 4) m += ", " + a4.toString();
  log(Level.Debug, m);
}

@external("wasi_snapshot_preview1", "random_get")
declare function random_get(buf: usize, len: usize): u16;

/** seedHandler seeds Math.random from the host's random source (WASI's, deterministic). */
export function seedHandler(): f64 {
  const b = new Buf(8);
  random_get(b.ptr, 8);
  return <f64>b.i64At(0);
}
