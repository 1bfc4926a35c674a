// The SDK's test guest: each record's value is a command that exercises a part of the SDK,
// and the guest emits what it saw. host/engine/assemblyscript_test.go builds it (the
// package's asconfig.json) and runs it against the real engine, with a key-value store "s",
// a window store "w" (10 s windows), a session store "ss" (100 ms gap) and the outputs "out"
// and "second".

import {
  Header, Level, Migration, Punctuation, PunctuationContext, RecordContext, KeyValueIterator, NO_TIME,
  WindowIterator, bytes, codeText, log, register, str, windowStarts,
} from "../assembly/index";

export * from "../assembly/exports";

register(probe)
  .withStore("s")
  .withWindowStore("w")
  .withSessionStore("ss")
  .withPunctuation(Punctuation.StreamTime, 1000, streamTick)
  .withPunctuation(Punctuation.WallClock, 1, wallTick)
  .withStoreVersion("s", 3, migrateS);

log(Level.Info, "probe: initialized");

function streamTick(ctx: PunctuationContext): void {
  ctx.emit("stream-tick", ctx.id.toString() + "@" + ctx.time.toString() + " st=" + ctx.streamTime().toString());
}

/**
 * migrateS turns an entry k=v of "s" into k=v3:<from>:v; "drop..." keys are dropped, "old:x"
 * re-keyed to "new:x", and the value "fail" fails the migration.
 */
function migrateS(m: Migration, key: Uint8Array, value: Uint8Array): void {
  const k = str(key);
  const v = str(value);
  if (v == "fail") throw new Error("cannot migrate this one");
  if (k.startsWith("drop")) return;
  const to = k.startsWith("old:") ? "new:" + k.substring(4) : k;
  const before = m.store.getString("new:seen");
  m.store.put("new:seen", (before === null ? "" : before) + k + ";");
  m.store.put(to, "v" + m.to.toString() + ":" + m.from.toString() + ":" + v);
}

function wallTick(ctx: PunctuationContext): void {
  // Only once: the test drives it when it wants one.
  const s = ctx.store("s");
  if (s.has("ticked")) return;
  s.put("ticked", "1");
  ctx.emit("wall-tick", ctx.id.toString());
}

/** entries joins what an iterator walks as "k=v,k=v". */
function entries(it: KeyValueIterator): string {
  let out = "";
  while (it.next()) {
    if (out.length > 0) out += ",";
    out += it.keyString() + "=" + it.valueString();
  }
  it.close(); // closing an exhausted iterator again is harmless
  return out;
}

/** windows joins what a window iterator walks as "k@start-end=v,...". */
function windows(it: WindowIterator): string {
  let out = "";
  while (it.next()) {
    if (out.length > 0) out += ",";
    out += it.keyString() + "@" + it.start.toString() + "-" + it.end.toString() + "=" + it.valueString();
  }
  return out;
}

function probe(ctx: RecordContext): void {
  const rec = ctx.record;
  const cmd = rec.valueString();
  if (cmd === null) {
    ctx.emitTombstone(rec.key!);
    return;
  }
  if (cmd == "kv") {
    const s = ctx.store("s");
    s.put("a", "1"); // strings
    s.put(bytes("ab"), bytes("2")); // Uint8Array
    s.put(String.UTF8.encode("b"), String.UTF8.encode("3")); // ArrayBuffer
    s.put("c", new Uint8Array(0)); // empty, not null
    s.put("gone", "x");
    s.delete("gone");
    s.put("gone2", "y");
    s.put<string, Uint8Array | null>("gone2", null); // put null deletes
    const big = new Uint8Array(5000).fill(0x7a);
    s.put("big", big); // larger than the value buffer: it grows
    const back = s.get("big");
    ctx.emit("big", back !== null && back.length == 5000 && back[4999] == 0x7a ? "ok" : "bad");
    ctx.emit("get-a", s.getString("a")!);
    ctx.emit("get-c", s.get("c")!.length.toString());
    ctx.emit("has-gone", s.has("gone") || s.has("gone2") ? "yes" : "no");
    ctx.emit("range", entries(s.range("a", "b")));
    ctx.emit("range-open", entries(s.range<Uint8Array | null, string>(null, "ab")));
    ctx.emit("prefix", entries(s.prefix("a")));
    const it = s.all();
    it.next();
    it.close(); // stopped early
    let n = 0;
    const all = s.all();
    while (all.next()) n++;
    ctx.emit("all", n.toString());
    return;
  }
  if (cmd == "headers") {
    const hs = ctx.headers();
    let seen = "";
    for (let i = 0; i < hs.length; i++) {
      const v = hs[i].valueString();
      seen += hs[i].key + "=" + (v === null ? "<null>" : v) + ";";
    }
    const out = new Array<Header>();
    out.push(Header.of("seen", seen));
    out.push(Header.of("null", null));
    out.push(new Header("bytes", bytes("\x01\x02")));
    ctx.emitTo("second", rec.key, "headers:" + hs.length.toString() + ":" + rec.headerCount.toString(), out);
    return;
  }
  if (cmd == "window") {
    const w = ctx.windowStore("w");
    const t = rec.timestamp; // 1500
    const starts = w.windowsFor(t);
    ctx.emit("windows-for", starts.join(","));
    ctx.emit("hopping", windowStarts(12000, 10000, 5000).join(","));
    ctx.emit("info", w.info.type.toString() + "," + w.info.windowSize.toString() + "," + w.info.advance.toString());
    w.put("k", 0, "v1");
    w.put("k", 10000, "v2");
    w.put("j", 0, bytes("v3"));
    ctx.emit("window-get", w.getString("k", 0)! + "," + (w.get("k", 20000) === null ? "absent" : "present"));
    ctx.emit("fetch", windows(w.fetch("k", 0, 10000)));
    let all = windows(w.fetchAll(0, 10000));
    ctx.emit("fetch-all-count", all.split(",").length.toString());
    w.delete("k", 10000);
    ctx.emit("fetch-after-delete", windows(w.fetch("k", 0, 20000)));
    ctx.emit("closed", w.info.windowClosed(0, 10000) ? "closed" : "open");
    return;
  }
  if (cmd == "session") {
    const ss = ctx.sessionStore("ss");
    ss.put("u", 1000, 1200, "s1");
    ss.put("u", 1400, 1500, "s2");
    ss.put("v", 1000, 1000, "s3");
    ctx.emit("session-get", ss.getString("u", 1000, 1200)!);
    ctx.emit("find", windows(ss.find("u", 1150, 1450)));
    ctx.emit("find-all", windows(ss.findAll(0, 2000)).split(",").length.toString());
    ss.remove("u", 1000, 1200);
    ctx.emit("find-after-remove", windows(ss.find("u", 0, 5000)));
    ctx.emit("gap", ss.info.inactivityGap.toString());
    return;
  }
  if (cmd == "time") {
    ctx.emit("stream-time", ctx.streamTime().toString() + "," + (NO_TIME == -1 ? "ok" : "bad"));
    ctx.emit("record", rec.topic + "/" + rec.partition.toString() + "/" + rec.offset.toString() + "/" + rec.timestamp.toString() + "/" + rec.keyString()!);
    return;
  }
  if (cmd == "nullkey") {
    ctx.emit<Uint8Array | null, string>(null, "no key");
    ctx.emitTo("second", "k", str(bytes("é")));
    return;
  }
  if (cmd == "log") {
    ctx.log(Level.Warn, "probe: warning from a record");
    trace("probe trace", 2, 1.5, 2.5);
    ctx.emit("code", codeText(-11));
    return;
  }
  if (cmd == "throw") {
    throw new Error("probe failed on purpose");
  }
  if (cmd == "unknown") {
    ctx.store("nope");
    return;
  }
  if (cmd == "random") {
    const r = Math.random();
    ctx.emit("random", r >= 0 && r < 1 ? "ok" : "bad");
    return;
  }
  throw new Error("probe: unknown command " + cmd);
}
