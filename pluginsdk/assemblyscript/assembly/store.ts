// Key-value stores and their iterators.

import {
  Code, ENTRY_HEADER_SIZE, ENTRY_KEY_LEN_AT, ENTRY_VALUE_LEN_AT, NULL_LEN,
  iter_close, iter_next, state_delete, state_get, state_prefix, state_put, state_range,
} from "./abi";
import { Buf, fail, keyBytes, lenOf, ptrOf, str, toBytes } from "./bytes";

const VALUE_BUF_SIZE = 256;
const ITER_BUF_SIZE = 4096;

/**
 * KeyValueStore is one of the processor's key-value stores, opened by name once per
 * instance (Context.store). Keys are byte strings ordered bytewise, never null; keys and
 * values are given as Uint8Array, ArrayBuffer or string (UTF-8).
 *
 * A host failure (the store failed, a write too large for its changelog topic) throws: the
 * guest call fails with the error, and the host fails, skips or dead-letters the record as
 * the processor's on_error says.
 */
export class KeyValueStore {
  private buf: Buf = new Buf(VALUE_BUF_SIZE);

  constructor(
    /** The store's name. */
    public readonly name: string,
    /** The host's handle. */
    public readonly handle: i32,
  ) {}

  /** get returns a copy of the value under key, or null if there is none. */
  get<K>(key: K): Uint8Array | null {
    const k = keyBytes<K>(key, this.name, "get");
    let n: i32;
    while ((n = state_get(this.handle, k.dataStart, k.byteLength, this.buf.ptr, this.buf.cap)) == Code.BufferTooSmall) {
      this.buf.grow();
    }
    if (n == Code.NotFound) return null;
    if (n < 0) this.fail("get", n);
    return this.buf.copy(0, n);
  }

  /** getString returns the value under key decoded from UTF-8, or null if there is none. */
  getString<K>(key: K): string | null {
    const v = this.get<K>(key);
    return v === null ? null : str(v);
  }

  /** has reports whether there is a value under key. */
  has<K>(key: K): bool {
    return this.get<K>(key) !== null;
  }

  /**
   * put stores value under key; a null value deletes the key (as Kafka Streams' put(k,
   * null)). The host copies both. A write whose changelog record would not fit the store's
   * changelog topic (about 1 MiB by default) throws, and changes nothing.
   */
  put<K, V>(key: K, value: V): void {
    const k = keyBytes<K>(key, this.name, "put");
    const v = toBytes<V>(value);
    const n = state_put(this.handle, k.dataStart, k.byteLength, ptrOf(v), lenOf(v));
    if (n < 0) this.fail("put", n);
  }

  /** delete removes key; removing an absent key is not an error. */
  delete<K>(key: K): void {
    const k = keyBytes<K>(key, this.name, "delete");
    const n = state_delete(this.handle, k.dataStart, k.byteLength);
    if (n < 0) this.fail("delete", n);
  }

  /**
   * range iterates over the keys start <= key < end, ascending; a null bound is unbounded
   * on its side. Close the iterator when you stop early (at most 16 may be open at once;
   * the host closes those left open when the guest call returns).
   */
  range<S, E>(start: S, end: E): KeyValueIterator {
    const s = toBytes<S>(start);
    const e = toBytes<E>(end);
    const h = state_range(this.handle, ptrOf(s), lenOf(s), ptrOf(e), lenOf(e));
    if (h < 0) this.fail("range", h);
    return new KeyValueIterator(this.name, h);
  }

  /** all iterates over every key, ascending. */
  all(): KeyValueIterator {
    return this.range<Uint8Array | null, Uint8Array | null>(null, null);
  }

  /** prefix iterates, ascending, over the keys that begin with prefix. */
  prefix<P>(prefix: P): KeyValueIterator {
    const p = keyBytes<P>(prefix, this.name, "prefix");
    const h = state_prefix(this.handle, p.dataStart, p.byteLength);
    if (h < 0) this.fail("prefix", h);
    return new KeyValueIterator(this.name, h);
  }

  private fail(op: string, code: i32): void {
    fail("store \"" + this.name + "\": " + op, code);
  }
}

/**
 * Entries is what iter_next wrote: entries back to back, read one at a time. It closes its
 * host iterator when it is exhausted.
 */
export class Entries {
  buf: Buf = new Buf(ITER_BUF_SIZE);
  pos: i32 = 0;
  end: i32 = 0;
  open: bool = true;

  constructor(public readonly what: string, public readonly handle: i32) {}

  /** more makes at least one entry available at pos; false when the iterator is exhausted. */
  more(): bool {
    if (this.pos < this.end) return true;
    if (!this.open) return false;
    let n: i32;
    while ((n = iter_next(this.handle, this.buf.ptr, this.buf.cap)) == Code.BufferTooSmall) {
      this.buf.grow();
    }
    if (n < 0) fail(this.what + ": next", n);
    if (n == 0) {
      this.close();
      return false;
    }
    this.pos = 0;
    this.end = n;
    return true;
  }

  close(): void {
    if (!this.open) return;
    this.open = false;
    this.pos = this.end = 0;
    const n = iter_close(this.handle);
    if (n < 0) fail(this.what + ": close", n);
  }
}

/**
 * EntryIterator is what the SDK's iterators share: the current entry's key and value, and
 * closing. key and value are copies, yours to keep. An iterator closes itself when
 * exhausted; call close() when you stop early (at most 16 may be open at once).
 */
export class EntryIterator {
  protected entries: Entries;
  /** The current entry's key. */
  key: Uint8Array = new Uint8Array(0);
  /** The current entry's value. */
  value: Uint8Array = new Uint8Array(0);

  constructor(store: string, handle: i32) {
    this.entries = new Entries("store \"" + store + "\": iterator", handle);
  }

  /** The current entry's key, decoded from UTF-8. */
  keyString(): string {
    return str(this.key);
  }

  /** The current entry's value, decoded from UTF-8. */
  valueString(): string {
    return str(this.value);
  }

  /** close releases the host's iterator; closing twice is harmless. */
  close(): void {
    this.entries.close();
  }
}

/**
 * KeyValueIterator walks the entries of a range or prefix scan:
 *
 *     const it = store.prefix("user:");
 *     while (it.next()) { use(it.key, it.value); }
 */
export class KeyValueIterator extends EntryIterator {
  /** next moves to the next entry; false when there is none. */
  next(): bool {
    const e = this.entries;
    if (!e.more()) return false;
    const kl = e.buf.i32At(e.pos + ENTRY_KEY_LEN_AT);
    let vl = e.buf.i32At(e.pos + ENTRY_VALUE_LEN_AT);
    if (vl == NULL_LEN) vl = 0;
    if (kl < 0 || vl < 0 || e.pos + ENTRY_HEADER_SIZE + kl + vl > e.end) {
      fail(e.what + ": next: malformed entry", Code.ProcessorFailed);
    }
    this.key = e.buf.copy(e.pos + ENTRY_HEADER_SIZE, kl);
    this.value = e.buf.copy(e.pos + ENTRY_HEADER_SIZE + kl, vl);
    e.pos += ENTRY_HEADER_SIZE + kl + vl;
    return true;
  }
}
