// Bytes and strings: what the SDK takes as keys and values, and its reusable buffers.

import { buffer_needed, Code, codeText } from "./abi";

/** bytes encodes a string as UTF-8. */
export function bytes(s: string): Uint8Array {
  return Uint8Array.wrap(String.UTF8.encode(s));
}

/** str decodes UTF-8 bytes to a string. */
export function str(b: Uint8Array): string {
  return String.UTF8.decodeUnsafe(b.dataStart, <usize>b.byteLength);
}

/**
 * toBytes takes a key or value as the SDK's functions accept it: a Uint8Array (used as it
 * is, not copied), an ArrayBuffer, or a string (encoded as UTF-8). null, or a nullable value
 * that is null, gives null.
 */
export function toBytes<T>(v: T): Uint8Array | null {
  if (isInteger<T>()) {
    // A literal null argument infers an integer type parameter.
    if (<usize>v != 0) throw new Error("statehost: a number is not bytes: pass a Uint8Array, an ArrayBuffer or a string");
    return null;
  } else if (isString<T>()) {
    if (isNullable<T>()) {
      if (changetype<usize>(v) == 0) return null;
    }
    return Uint8Array.wrap(String.UTF8.encode(changetype<string>(v)));
  } else if (isReference<T>()) {
    if (isNullable<T>()) {
      if (changetype<usize>(v) == 0) return null;
    }
    if (v instanceof Uint8Array) return changetype<Uint8Array>(v);
    if (v instanceof ArrayBuffer) return Uint8Array.wrap(changetype<ArrayBuffer>(v));
    throw new Error("statehost: bytes must be a Uint8Array, an ArrayBuffer or a string");
  } else {
    ERROR("statehost: bytes must be a Uint8Array, an ArrayBuffer or a string");
  }
}

/** keyBytes is toBytes for a key, which is never null; store and op name it in the error. */
export function keyBytes<T>(v: T, store: string, op: string): Uint8Array {
  const b = toBytes<T>(v);
  if (b === null) throw new Error("statehost: store \"" + store + "\": " + op + ": a key is never null");
  return b;
}

/** ptrOf is the address of b's bytes, 0 for null. */
// @ts-ignore: decorator
@inline export function ptrOf(b: Uint8Array | null): usize {
  return b === null ? 0 : b.dataStart;
}

/** lenOf is the ABI length of b: NULL_LEN (-1) for null. */
// @ts-ignore: decorator
@inline export function lenOf(b: Uint8Array | null): i32 {
  return b === null ? -1 : b.byteLength;
}

/** Buf is a buffer the host writes into, grown on CodeBufferTooSmall and reused. */
export class Buf {
  data: ArrayBuffer;

  constructor(size: i32) {
    this.data = new ArrayBuffer(size);
  }

  /** The address of the buffer. */
  get ptr(): usize {
    return changetype<usize>(this.data);
  }

  /** The capacity of the buffer. */
  get cap(): i32 {
    return this.data.byteLength;
  }

  /** grow makes the buffer hold at least buffer_needed() bytes; its content is lost. */
  grow(): void {
    const need = buffer_needed();
    let n = this.cap * 2;
    if (n < need) n = need;
    this.data = new ArrayBuffer(n);
  }

  /** copy returns a copy of len bytes at offset at. */
  copy(at: i32, len: i32): Uint8Array {
    const b = new Uint8Array(len);
    memory.copy(b.dataStart, this.ptr + <usize>at, <usize>len);
    return b;
  }

  i32At(at: i32): i32 {
    return load<i32>(this.ptr + <usize>at);
  }

  i64At(at: i32): i64 {
    return load<i64>(this.ptr + <usize>at);
  }
}

/** fail stops the guest call with an error that names what failed and the host's code. */
export function fail(what: string, code: i32): void {
  throw new Error("statehost: " + what + ": " + codeText(code) + " (code " + code.toString() + ")");
}

/** isTooSmall reports whether the host asked for a larger buffer. */
// @ts-ignore: decorator
@inline export function isTooSmall(code: i32): bool {
  return code == Code.BufferTooSmall;
}
