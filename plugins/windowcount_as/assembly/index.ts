// windowcount_as: counts records per key and time window in the window store "windows", and
// emits each window's final count once, when the window closes; in AssemblyScript with the
// statehost SDK (pluginsdk/assemblyscript). Same contract as plugins/windowcount:
//
//   Input: key = a word; the value is ignored (a tombstone counts as any record). Records
//   with a null key are skipped with a warning. A record's timestamp selects its windows: the
//   windows [start, start + window_size) that contain it, their starts being the multiples of
//   the store's advance (tumbling or hopping windows). For each window the count stored
//   under the word (decimal ASCII; absent means 0) is incremented and stored. A put into a
//   closed window is dropped, and the host counts the late record.
//
//   Output: a stream-time punctuation (every second of stream time) emits every closed
//   window that is not expired (start + window_size + grace <= stream time < start +
//   retention) to the first output topic, key = the word, value = "<start_ms>,<end_ms>,<count>"
//   in decimal (end = start + window_size, exclusive), then deletes the window: each window
//   is emitted once. The records of one punctuation come by window start, then word, with
//   the punctuation's time as timestamp.
//
// The store, for example:
//
//   store "windows" {
//     type        = "window"
//     window_size = "1m"
//     advance     = "30s"   # leave out for tumbling windows
//     grace       = "10s"
//   }
//
// Build (from the repository root): statehost build plugins/windowcount_as
// (npm ci, then asc; or, in this directory, npm ci && npm run build).

import { Level, Punctuation, PunctuationContext, RecordContext, NO_TIME, bytes, register, str } from "@statehost/sdk";

export * from "@statehost/sdk/assembly/exports";

const STORE = "windows";

register(count).withWindowStore(STORE).withPunctuation(Punctuation.StreamTime, 1000, emitClosed);

function count(ctx: RecordContext): void {
  const key = ctx.record.key;
  if (key === null) {
    ctx.log(Level.Warn, "skipping record with a null key");
    return;
  }
  const windows = ctx.windowStore(STORE);
  const starts = windows.windowsFor(ctx.record.timestamp);
  for (let i = 0; i < starts.length; i++) {
    const start = starts[i];
    const old = windows.get(key, start);
    let n: u64 = 0;
    if (old !== null) n = parseCount(key, start, old);
    // A put into a closed window is dropped (put returns false): the host counts it.
    windows.put(key, start, bytes((n + 1).toString()));
  }
}

/** Closed is a window emitClosed found. */
class Closed {
  constructor(
    public key: Uint8Array,
    public start: i64,
    public end: i64,
    public count: u64,
  ) {}
}

/** compareBytes orders byte strings bytewise. */
function compareBytes(a: Uint8Array, b: Uint8Array): i32 {
  const n = min(a.length, b.length);
  const c = memory.compare(a.dataStart, b.dataStart, n);
  if (c != 0) return c;
  return a.length - b.length;
}

/** emitClosed emits and deletes every closed window that is not expired. */
function emitClosed(ctx: PunctuationContext): void {
  const windows = ctx.windowStore(STORE);
  const now = ctx.streamTime();
  if (now == NO_TIME) return;
  const info = windows.info;
  // Closed: start + window_size + grace <= now. Not expired: start > now - retention.
  const from = now - info.retention + 1;
  const to = now - info.windowSize - info.grace;
  if (from > to) return;
  // Collect first: whether an open iterator sees the deletes is not specified.
  const closed = new Array<Closed>();
  const it = windows.fetchAll(from, to);
  while (it.next()) {
    closed.push(new Closed(it.key, it.start, it.end, parseCount(it.key, it.start, it.value)));
  }
  closed.sort((a: Closed, b: Closed): i32 => {
    if (a.start != b.start) return a.start < b.start ? -1 : 1;
    return compareBytes(a.key, b.key);
  });
  for (let i = 0; i < closed.length; i++) {
    const w = closed[i];
    ctx.emit(w.key, w.start.toString() + "," + w.end.toString() + "," + w.count.toString());
    windows.delete(w.key, w.start);
  }
}

/** parseCount parses a stored count: 1 to 19 decimal digits. */
function parseCount(key: Uint8Array, start: i64, b: Uint8Array): u64 {
  let ok = b.length > 0 && b.length <= 19;
  let n: u64 = 0;
  for (let i = 0; ok && i < b.length; i++) {
    const c = b[i];
    ok = c >= 0x30 && c <= 0x39;
    n = n * 10 + <u64>(c - 0x30);
  }
  if (!ok) {
    throw new Error("windowcount_as: key \"" + str(key) + "\", window " + start.toString() +
      ": stored count \"" + str(b) + "\" is not a decimal number");
  }
  return n;
}
