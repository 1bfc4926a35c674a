package store

// Fuzz tests of the decoders of what the store reads back from outside: window and session
// changelog keys (alone and through a restore), checkpoint files and checkpoint records.
// Their seed corpora are under testdata/fuzz/<FuzzName>/; the plain `go test` runs them, and
// .ci/run fuzzes each target briefly:
//
//	go test -run '^$' -fuzz '^FuzzChangelogKey$' -fuzztime 60s ./store

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// FuzzChangelogKey checks the window and session changelog key codec and the local key
// layout: parsing never panics, refuses exactly the keys that are too short or (sessions)
// start after they end, with an error saying so, and parse(encode(x)) == x and
// encode(parse(b)) == b both hold.
func FuzzChangelogKey(f *testing.F) {
	f.Fuzz(func(t *testing.T, session bool, ck []byte, t1, t2, segInterval int64) {
		kind, n := Window, 8
		if session {
			kind, n = Session, 16
		}
		// Decode arbitrary bytes.
		key, p1, p2, err := ParseChangelogKey(kind, ck)
		var wantErr string
		switch {
		case len(ck) < n:
			wantErr = fmt.Sprintf("%s changelog key of %d bytes is shorter than its %d time bytes", kind, len(ck), n)
		case session && int64(binary.BigEndian.Uint64(ck[len(ck)-8:])) > int64(binary.BigEndian.Uint64(ck[len(ck)-16:])):
			wantErr = "session changelog key with start"
		}
		switch {
		case wantErr != "" && err == nil:
			t.Fatalf("ParseChangelogKey(%s, %x) = %q %d %d, want an error %q", kind, ck, key, p1, p2, wantErr)
		case wantErr != "" && !strings.Contains(err.Error(), wantErr):
			t.Fatalf("ParseChangelogKey(%s, %x): error %q does not say %q", kind, ck, err, wantErr)
		case wantErr == "" && err != nil:
			t.Fatalf("ParseChangelogKey(%s, %x): %v", kind, ck, err)
		case err == nil:
			if back := ChangelogKey(kind, key, p1, p2); !bytes.Equal(back, ck) {
				t.Fatalf("ChangelogKey(ParseChangelogKey(%x)) = %x", ck, back)
			}
			if !session && p2 != 0 {
				t.Fatalf("window key %x parsed with a second time %d", ck, p2)
			}
		}

		// Encode, then decode: ck serves as the user key.
		if session && t2 > t1 {
			t1, t2 = t2, t1 // a session's end (t1) is not before its start (t2)
		}
		if !session {
			t2 = 0
		}
		enc := ChangelogKey(kind, ck, t1, t2)
		if len(enc) != len(ck)+n {
			t.Fatalf("ChangelogKey(%s, %x, %d, %d) has %d bytes, want %d", kind, ck, t1, t2, len(enc), len(ck)+n)
		}
		k2, q1, q2, err := ParseChangelogKey(kind, enc)
		if err != nil || !bytes.Equal(k2, ck) || q1 != t1 || q2 != t2 {
			t.Fatalf("ParseChangelogKey(ChangelogKey(%s, %x, %d, %d)) = %x %d %d %v", kind, ck, t1, t2, k2, q1, q2, err)
		}

		// The local layout: segment | key | times, parsed back whatever the segment interval.
		w := &windowed{kind: kind, spec: WindowSpec{SegmentInterval: max(1, segInterval&math.MaxInt64)}}
		lk := w.localKey(nil, ck, t1, t2)
		// Its segment is floor(t1 / interval): seg*interval <= t1 < (seg+1)*interval.
		seg := decTime(lk)
		lo := new(big.Int).Mul(big.NewInt(seg), big.NewInt(w.spec.SegmentInterval))
		hi := new(big.Int).Add(lo, big.NewInt(w.spec.SegmentInterval))
		if bt := big.NewInt(t1); lo.Cmp(bt) > 0 || hi.Cmp(bt) <= 0 {
			t.Fatalf("local key %x of time %d has segment %d, not floor(%d / %d)", lk, t1, seg, t1, w.spec.SegmentInterval)
		}
		lkey, l1, l2, ok := w.parseLocal(lk)
		if !ok || !bytes.Equal(lkey, ck) || l1 != t1 || l2 != t2 {
			t.Fatalf("parseLocal(localKey(%x, %d, %d)) = %x %d %d %v", ck, t1, t2, lkey, l1, l2, ok)
		}
		// Arbitrary bytes as a local key: no panic, and ok exactly when long enough.
		if _, _, _, ok := w.parseLocal(ck); ok != (len(ck) >= 8+n) {
			t.Fatalf("parseLocal(%x) ok = %v with %d bytes", ck, ok, len(ck))
		}
	})
}

// FuzzCheckpointFile checks the checkpoint file reader on arbitrary text: it never panics;
// an error names the file and what is wrong; what it accepts has no line left over (but
// blank ones), and the writer writes it back, to be read back the same; and the writer's
// output for entries made from the input reads back as those entries.
func FuzzCheckpointFile(f *testing.F) {
	const path = "tasks/p_0/.checkpoint"
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := readCheckpointFile(bytes.NewReader(data), path)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "store: checkpoint file "+path+" ") {
				t.Fatalf("error %q does not name the file", err)
			}
		} else {
			// Every line is accounted for: blank, the version, the count or an entry.
			lines := 0
			for line := range bytes.Lines(data) {
				if len(bytes.TrimSpace(line)) > 0 {
					lines++
				}
			}
			if lines != 2+len(entries) {
				t.Fatalf("read %d entries from %q, whose %d lines are not blank", len(entries), data, lines)
			}
			text, err := encodeCheckpointFile(entries)
			if err != nil {
				t.Fatalf("the writer refuses entries %v that the reader accepted from %q: %v", entries, data, err)
			}
			again, err := readCheckpointFile(bytes.NewReader(text), path)
			if err != nil {
				t.Fatalf("reading back %q: %v", text, err)
			}
			if !slices.Equal(again, sortedEntries(entries)) {
				t.Fatalf("read %q back as %v, want %v", text, again, sortedEntries(entries))
			}
		}

		// The input as entries: one per line, "topic" then partition and offset taken from
		// the line's bytes.
		var es []CheckpointEntry
		for line := range bytes.Lines(data) {
			topic, rest, _ := bytes.Cut(bytes.TrimSuffix(line, []byte("\n")), []byte{0})
			var num [12]byte
			copy(num[:], rest)
			es = append(es, CheckpointEntry{
				Topic:     string(topic),
				Partition: int32(binary.LittleEndian.Uint32(num[:4])),
				Offset:    int64(binary.LittleEndian.Uint64(num[4:])),
			})
		}
		text, err := encodeCheckpointFile(es)
		if err != nil {
			if !validEntries(es) {
				return
			}
			t.Fatalf("encodeCheckpointFile(%v): %v", es, err)
		}
		if !validEntries(es) {
			t.Fatalf("encodeCheckpointFile accepted invalid entries %v: %q", es, text)
		}
		back, err := readCheckpointFile(bytes.NewReader(text), path)
		if err != nil {
			t.Fatalf("reading %q written from %v: %v", text, es, err)
		}
		if !slices.Equal(back, sortedEntries(es)) {
			t.Fatalf("wrote %v, read %v", es, back)
		}
	})
}

// validEntries is what a checkpoint file can hold: topics not empty, without white space and
// at most maxCheckpointTopic bytes, partitions >= 0, one entry per topic partition.
func validEntries(es []CheckpointEntry) bool {
	seen := map[CheckpointEntry]bool{}
	for _, e := range es {
		tp := CheckpointEntry{Topic: e.Topic, Partition: e.Partition}
		if e.Topic == "" || len(e.Topic) > maxCheckpointTopic || len(strings.Fields(e.Topic)) != 1 || strings.Fields(e.Topic)[0] != e.Topic || e.Partition < 0 || seen[tp] {
			return false
		}
		seen[tp] = true
	}
	return true
}

func sortedEntries(es []CheckpointEntry) []CheckpointEntry {
	out := slices.Clone(es)
	slices.SortFunc(out, func(a, b CheckpointEntry) int {
		if a.Topic != b.Topic {
			return strings.Compare(a.Topic, b.Topic)
		}
		return int(a.Partition) - int(b.Partition)
	})
	return out
}

// FuzzCheckpointRecord checks the codec of the checkpoint record kept in Pebble: any value
// of another length than 24 bytes is refused with an error giving its length, and any
// 24-byte value decodes and encodes back to itself.
func FuzzCheckpointRecord(f *testing.F) {
	f.Fuzz(func(t *testing.T, v []byte) {
		cp, err := decodeCheckpoint(v)
		if len(v) != 24 {
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("of %d bytes", len(v))) {
				t.Fatalf("decodeCheckpoint(%x) = %v, %v: want an error naming the length", v, cp, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("decodeCheckpoint(%x): %v", v, err)
		}
		if back := encodeCheckpoint(cp); !bytes.Equal(back, v) {
			t.Fatalf("encodeCheckpoint(decodeCheckpoint(%x)) = %x", v, back)
		}
	})
}

// fuzzWrite is a changelog record of FuzzRestoreWindowed, with what its key should decode to.
type fuzzWrite struct {
	Write
	key    []byte
	t1, t2 int64
	bad    bool // the key is not a valid changelog key
}

// decodeFuzzWrites turns fuzz bytes into changelog records for a window or session store.
// Each record is a flags byte, then its key, its value and its timestamp:
//
//	flags&1  a delete (no value)
//	flags&2  raw key bytes (len byte, bytes), valid or not; else key len byte, key bytes,
//	         then the times as small numbers (int16 * 7; a session's start end - uint8 * 3),
//	         or (flags&8) as raw int64s
//	flags&4  a raw int64 timestamp; else uint16 * 5
func decodeFuzzWrites(t *testing.T, kind Kind, b []byte) []fuzzWrite {
	take := func(n int) []byte {
		n = min(n, len(b))
		out := b[:n:n]
		b = b[n:]
		return out
	}
	u64 := func(n int) uint64 {
		var buf [8]byte
		copy(buf[:], take(n))
		return binary.LittleEndian.Uint64(buf[:])
	}
	var ws []fuzzWrite
	for off := int64(0); len(b) > 0; off++ {
		flags := take(1)[0]
		w := fuzzWrite{Write: Write{Offset: off, Delete: flags&1 != 0}}
		if flags&2 != 0 {
			w.Key = bytes.Clone(take(int(u64(1) % 24)))
			var err error
			w.key, w.t1, w.t2, err = ParseChangelogKey(kind, w.Key)
			w.bad = err != nil
			n := suffixLen(kind)
			if wantBad := len(w.Key) < n || kind == Session &&
				int64(binary.BigEndian.Uint64(w.Key[len(w.Key)-8:])) > int64(binary.BigEndian.Uint64(w.Key[len(w.Key)-16:])); wantBad != w.bad {
				t.Fatalf("ParseChangelogKey(%s, %x): error %v", kind, w.Key, err) // FuzzChangelogKey's business
			}
		} else {
			w.key = bytes.Clone(take(int(u64(1) % 8)))
			if flags&8 != 0 {
				w.t1, w.t2 = int64(u64(8)), int64(u64(8))
				if kind == Session && w.t2 > w.t1 {
					w.t1, w.t2 = w.t2, w.t1
				}
			} else {
				w.t1 = int64(int16(u64(2))) * 7
				w.t2 = w.t1 - int64(u64(1))*3
			}
			if kind == Window {
				w.t2 = 0
			}
			w.Key = ChangelogKey(kind, w.key, w.t1, w.t2)
		}
		if !w.Delete {
			w.Value = bytes.Clone(take(int(u64(1) % 8)))
		}
		if flags&4 != 0 {
			w.Timestamp = int64(u64(8))
		} else {
			w.Timestamp = int64(u64(2)) * 5
		}
		ws = append(ws, w)
	}
	return ws
}

// fuzzTasks numbers the tasks of FuzzRestoreWindowed, one per input.
var fuzzTasks atomic.Int32

// FuzzRestoreWindowed restores arbitrary changelog records into a fresh window or session
// store partition (memory or Pebble) through Partition.ApplyRestore, the path the restore
// takes. A batch with a malformed key fails with an error naming that record's offset and
// applies nothing; any other batch applies: the stream time is the largest timestamp, and
// the store then holds exactly the last value written to each window or session that is not
// expired at it.
func FuzzRestoreWindowed(f *testing.F) {
	m, err := Open(Settings{Dir: f.TempDir(), MemoryBytes: MinMemoryBytes})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = m.Close() })
	f.Fuzz(func(t *testing.T, session, pebbleBackend bool, data []byte) {
		kind, spec := Window, WindowSpec{Size: 10, Grace: 5, Retention: 100, SegmentInterval: 50}
		if session {
			kind, spec = Session, WindowSpec{Gap: 10, Grace: 5, Retention: 100, SegmentInterval: 50}
		}
		o := Options{Backend: Memory, Kind: kind, Window: spec}
		if pebbleBackend {
			o.Backend = Pebble
		}
		// A memory store starts empty in a task opened again; a Pebble store needs a new task
		// (whose partitions are left behind: deleting them would cost an fsync per input).
		id := TaskID{Processor: "fuzz"}
		if pebbleBackend {
			id.Partition = fuzzTasks.Add(1)
		}
		task, err := m.OpenTask(id.Processor, id.Partition)
		if err != nil {
			t.Fatal(err)
		}
		defer task.Close()
		var ws WindowStore
		var ss SessionStore
		if session {
			ss, err = task.OpenSession("s", o)
		} else {
			ws, err = task.OpenWindow("s", o)
		}
		if err != nil {
			t.Fatal(err)
		}
		all := func() []string {
			var it WindowIterator
			var err error
			if session {
				it, err = ss.FindAll(math.MinInt64, math.MaxInt64)
			} else {
				it, err = ws.FetchAll(math.MinInt64, math.MaxInt64)
			}
			if err != nil {
				t.Fatal(err)
			}
			defer it.Close()
			var out []string
			for it.Next() {
				out = append(out, fmt.Sprintf("%x@%d/%d=%x", it.Key(), it.Start(), endOrZero(session, it.End()), it.Value()))
			}
			if err := it.Err(); err != nil {
				t.Fatal(err)
			}
			slices.Sort(out)
			return out
		}

		writes := decodeFuzzWrites(t, kind, data)
		batch := make([]Write, len(writes))
		firstBad := -1
		for i, w := range writes {
			batch[i] = w.Write
			if w.bad && firstBad < 0 {
				firstBad = i
			}
		}
		p := task.Partition("s")
		err = p.ApplyRestore(batch, Checkpoint{Offset: int64(len(batch))})
		if firstBad >= 0 {
			want := fmt.Sprintf("changelog record at offset %d: store: %s changelog key", firstBad, kind)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("restore of a malformed key at offset %d: error %v, want one saying %q", firstBad, err, want)
			}
			if _, has, _ := p.Checkpoint(); has {
				t.Fatalf("a failed restore set the checkpoint")
			}
			if got := all(); len(got) > 0 {
				t.Fatalf("a failed restore applied %q", got)
			}
			return
		}
		if err != nil {
			t.Fatalf("restore of %d valid records: %v", len(batch), err)
		}
		now := NoTime
		for _, w := range writes {
			if w.Timestamp > 0 {
				now = max(now, w.Timestamp)
			}
		}
		if got := task.StreamTime(); got != now {
			t.Fatalf("stream time after restore %d, want %d", got, now)
		}
		skipped := int64(0) // records already expired at the final stream time
		for _, w := range writes {
			if now != NoTime && w.t1 <= now-spec.Retention {
				skipped++
			}
		}
		if _, _, got := task.DroppedWrites(); got != skipped {
			t.Fatalf("restore skipped %d expired records, want %d", got, skipped)
		}
		if cp, has, err := p.Checkpoint(); err != nil || !has || cp.Offset != int64(len(batch)) {
			t.Fatalf("checkpoint after restore %v %v %v, want offset %d", cp, has, err, len(batch))
		}
		type slot struct {
			key    string
			t1, t2 int64
		}
		last := map[slot]fuzzWrite{}
		for _, w := range writes {
			last[slot{string(w.key), w.t1, w.t2}] = w
		}
		var want []string
		for s, w := range last {
			if w.Delete || now != NoTime && s.t1 <= now-spec.Retention {
				continue
			}
			start, end := s.t1, int64(0)
			if session {
				start, end = s.t2, s.t1
			}
			want = append(want, fmt.Sprintf("%x@%d/%d=%x", s.key, start, end, w.Value))
			// Get finds it too.
			var v []byte
			var found bool
			if session {
				v, found, err = ss.Get([]byte(s.key), start, end)
			} else {
				v, found, err = ws.Get([]byte(s.key), start)
			}
			if err != nil || !found || !bytes.Equal(v, w.Value) {
				t.Fatalf("Get(%x, %d, %d) = %x %v %v after restore, want %x", s.key, start, end, v, found, err, w.Value)
			}
		}
		slices.Sort(want)
		if got := all(); !slices.Equal(got, want) {
			t.Fatalf("after restoring %d records at stream time %d the store holds\n%q\nwant\n%q", len(batch), now, got, want)
		}
	})
}

// endOrZero is a session's end; a window's end (start + size) is left out, as 0.
func endOrZero(session bool, end int64) int64 {
	if session {
		return end
	}
	return 0
}

var writeFuzzSeeds = flag.Bool("write-fuzz-seeds", false, "write the seed corpora of the fuzz tests to testdata/fuzz")

// TestWriteFuzzSeeds writes the seed corpora of this package's fuzz tests (files seed-*)
// when -write-fuzz-seeds is given:
//
//	go test ./store -run '^TestWriteFuzzSeeds$' -write-fuzz-seeds
func TestWriteFuzzSeeds(t *testing.T) {
	if !*writeFuzzSeeds {
		t.Skip("a generator: run with -write-fuzz-seeds")
	}
	write := func(target, name string, values ...any) {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		body := "go test fuzz v1\n"
		for _, v := range values {
			switch v := v.(type) {
			case []byte:
				body += fmt.Sprintf("[]byte(%q)\n", v)
			case string:
				body += fmt.Sprintf("[]byte(%q)\n", v)
			default:
				body += fmt.Sprintf("%T(%v)\n", v, v)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, "seed-"+name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old, _ := filepath.Glob(filepath.Join("testdata", "fuzz", "*", "seed-*"))
	for _, p := range old {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}

	// FuzzChangelogKey: session, key bytes, t1, t2, segment interval.
	win := ChangelogKey(Window, []byte("word"), 60_000, 0)
	sess := ChangelogKey(Session, []byte("user-1"), 90_000, 30_000)
	write("FuzzChangelogKey", "window", false, win, int64(60_000), int64(0), int64(60_000))
	write("FuzzChangelogKey", "session", true, sess, int64(90_000), int64(30_000), int64(60_000))
	write("FuzzChangelogKey", "session-start-after-end", true, ChangelogKey(Session, []byte("k"), 1, 2), int64(1), int64(2), int64(1))
	write("FuzzChangelogKey", "short", true, []byte("0123456789abcde"), int64(-1), int64(0), int64(0))
	write("FuzzChangelogKey", "empty", false, []byte{}, int64(math.MinInt64), int64(math.MaxInt64), int64(math.MaxInt64))
	write("FuzzChangelogKey", "negative-times", true, ChangelogKey(Session, nil, -5, math.MinInt64), int64(-5), int64(math.MinInt64), int64(3))
	write("FuzzChangelogKey", "extremes", false, ChangelogKey(Window, []byte{0xff, 0}, math.MaxInt64, 0), int64(math.MaxInt64), int64(1), int64(7))

	// FuzzCheckpointFile: a file's text.
	for name, text := range map[string]string{
		"written":            "0\n2\napp-a-changelog 2 100\napp-b-changelog 2 7\n",
		"kafka-streams":      "0\n3\napp-s-changelog 0 42\napp-s-changelog 1 -4\napp-t-changelog 0 0\n",
		"empty-count":        "0\n0\n",
		"blank-lines-crlf":   "\r\n0\r\n\r\n1\r\n  app-a-changelog\t3   9  \r\n\r\n",
		"empty":              "",
		"version-1":          "1\n1\na 0 1\n",
		"missing-count":      "0\n",
		"huge-count":         "0\n99999999999999999\na 0 1\n",
		"negative-count":     "0\n-1\n",
		"too-few":            "0\n3\na 0 1\nb 0 2\n",
		"too-many":           "0\n1\na 0 1\nb 0 2\n",
		"duplicate":          "0\n2\na 0 1\na 0 2\n",
		"partition-overflow": "0\n1\na 2147483648 1\n",
		"negative-partition": "0\n1\na -1 1\n",
		"offset-overflow":    "0\n1\na 0 9223372036854775808\n",
		"two-fields":         "0\n1\na 0\n",
		"four-fields":        "0\n1\na b 0 1\n",
		"nul-and-utf8":       "0\n1\na\x00\xff\xfe 0 1\n",
		"unicode-space":      "0\n1\na\u00a0b 0 1\n",
		"tab-in-topic":       "a\tb\x00\x01\x00\x00\x00\x05",
		"long-line":          "0\n1\n" + strings.Repeat("t", 70_000) + " 0 1\n",
	} {
		write("FuzzCheckpointFile", name, text)
	}

	// FuzzCheckpointRecord: a record's value.
	write("FuzzCheckpointRecord", "valid", encodeCheckpoint(Checkpoint{Offset: 42, LogID: [16]byte{1, 2, 3}}))
	write("FuzzCheckpointRecord", "short", make([]byte, 23))
	write("FuzzCheckpointRecord", "long", make([]byte, 25))
	write("FuzzCheckpointRecord", "empty", []byte{})

	// FuzzRestoreWindowed: session, pebble, records (see decodeFuzzWrites).
	rec := func(flags byte, parts ...[]byte) []byte { return append([]byte{flags}, bytes.Join(parts, nil)...) }
	le16 := func(v int16) []byte { return binary.LittleEndian.AppendUint16(nil, uint16(v)) }
	le64 := func(v int64) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(v)) }
	small := bytes.Join([][]byte{
		rec(0, []byte{1}, []byte("a"), le16(10), []byte{2}, []byte{1}, []byte("v"), le16(20)),
		rec(0, []byte{1}, []byte("a"), le16(20), []byte{0}, []byte{2}, []byte("vv"), le16(30)),
		rec(1, []byte{1}, []byte("b"), le16(10), []byte{1}, le16(30)),
		rec(0, []byte{2}, []byte("bb"), le16(-3), []byte{0}, []byte{0}, le16(1000)),
	}, nil)
	extreme := bytes.Join([][]byte{
		rec(8, []byte{1}, []byte("x"), le64(math.MaxInt64), le64(math.MinInt64), []byte{1}, []byte("v"), le16(1)),
		rec(8|4, []byte{1}, []byte("y"), le64(math.MinInt64), le64(math.MinInt64), []byte{1}, []byte("w"), le64(math.MaxInt64)),
	}, nil)
	malformed := bytes.Join([][]byte{
		rec(0, []byte{1}, []byte("a"), le16(10), []byte{0}, []byte{1}, []byte("v"), le16(20)),
		rec(2, []byte{3}, []byte("abc"), []byte{1}, []byte("v"), le16(20)),
	}, nil)
	for _, session := range []bool{false, true} {
		kind := "window"
		if session {
			kind = "session"
		}
		write("FuzzRestoreWindowed", kind+"-memory", session, false, small)
		write("FuzzRestoreWindowed", kind+"-pebble", session, true, small)
		write("FuzzRestoreWindowed", kind+"-extreme", session, false, extreme)
		write("FuzzRestoreWindowed", kind+"-malformed", session, true, malformed)
	}
	sessKey := ChangelogKey(Session, []byte("k"), 1, 2) // start after end
	write("FuzzRestoreWindowed", "session-start-after-end", true, false,
		rec(2, []byte{byte(len(sessKey))}, sessKey, []byte{1}, []byte("v"), le16(5)))
}
