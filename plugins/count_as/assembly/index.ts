// count_as: the count processor of the word-count demo, in AssemblyScript with the statehost
// SDK (pluginsdk/assemblyscript). Same contract as plugins/count:
//
//   For a record with key k and a null value, delete k from the store "counts" and emit a
//   tombstone for k to the first output. Otherwise increment the count stored under k
//   (decimal ASCII; absent means 0), store it, and emit key k with the new count in
//   decimal. Records with a null key are skipped with a warning.
//
// Build (from the repository root): statehost build plugins/count_as
// (npm ci, then asc; or, in this directory, npm ci && npm run build).

import { Level, RecordContext, bytes, register, str } from "@statehost/sdk";

export * from "@statehost/sdk/assembly/exports";

register(count).withStore("counts");

function count(ctx: RecordContext): void {
  const rec = ctx.record;
  const key = rec.key;
  if (key === null) {
    ctx.log(Level.Warn, "skipping record with a null key");
    return;
  }
  const counts = ctx.store("counts");
  if (rec.isNull()) {
    counts.delete(key);
    ctx.emitTombstone(key);
    return;
  }
  const old = counts.get(key);
  let n: u64 = 0;
  if (old !== null) n = parseCount(key, old);
  const num = bytes((n + 1).toString());
  counts.put(key, num);
  ctx.emit(key, num);
}

/** parseCount parses a stored count: 1 to 19 decimal digits. */
function parseCount(key: Uint8Array, b: Uint8Array): u64 {
  let ok = b.length > 0 && b.length <= 19;
  let n: u64 = 0;
  for (let i = 0; ok && i < b.length; i++) {
    const c = b[i];
    ok = c >= 0x30 && c <= 0x39;
    n = n * 10 + <u64>(c - 0x30);
  }
  if (!ok) throw new Error("count_as: key \"" + str(key) + "\": stored count \"" + str(b) + "\" is not a decimal number");
  return n;
}
