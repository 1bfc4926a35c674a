package main

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// The process tests of issue 21's cases 2, 3, 4 and 6 (size limits, dead letters that do
// not fit, the emit flood) and of failed produces that name their input record.

// TestOversizedStateWriteIsPoison (issue 21, case 2): a state write whose changelog record
// cannot fit (a 10 MiB key, a 2 MiB value) is refused at the call (CodeLimit), so the guest
// fails on its record: under skip and dead_letter the record is dropped and the commits go
// on; under fail the application stops with an error that names the record and the limit.
// Before, the writes returned 0 and every commit failed with MESSAGE_TOO_LARGE, under every
// policy and at every restart.
func TestOversizedStateWriteIsPoison(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	br := startBroker(t, brokerOptions{})
	recs := []keyed{
		{"a", "", 0},
		{"k1", "putkey 10485760", 0}, // offset 1: a 10 MiB key
		{"a", "", 0},
		{"k2", "put 2097152", 0}, // offset 3: a 2 MiB value
		{"b", "", 0},
		{"c", "", 1},
	}
	for _, policy := range []string{"skip", "dead_letter", "fail"} {
		t.Run(policy, func(t *testing.T) {
			id := "put-" + strings.ReplaceAll(policy, "_", "")
			in, out := id+"-in", id+"-out"
			createTopics(t, br.addr, map[string]int{in: 2, out: 2})
			app := hostileApp{id: id, commitInterval: limitsCommit,
				procs: []hostileProc{{name: "p", input: in, output: out, onError: policy}}}
			cfg := app.write(t, dir+"/"+id, br.addr)
			produceKeyed(t, br.addr, in, recs...)
			p := startApp(t, bin, cfg, id)
			if policy == "fail" {
				code, msg := p.stoppedError(t)
				if code != 1 || !strings.Contains(msg, `offset 1 (topic "`+in+`"`) || !strings.Contains(msg, "changelog record") ||
					!strings.Contains(msg, "the limit") {
					t.Fatalf("exit %d, error %q: want exit 1 and an error naming offset 1 of %s and the changelog's limit", code, msg, in)
				}
				return
			}
			admin := p.adminAddr(t)
			waitCounts(t, br.addr, out, map[string]string{"a": "2", "b": "1", "c": "1"})
			p.waitCommittedRunning(t, br.addr, id, in)
			if policy == "skip" {
				p.waitMetric(t, admin, "statehost_records_skipped_total", `processor="p",reason="error"`, 2)
			} else {
				var offsets []string
				for _, r := range readChecked(t, br.addr, id+"-p-dlq", false) {
					o, _ := header(r, "statehost.offset")
					offsets = append(offsets, o)
				}
				if fmt.Sprint(offsets) != "[1 3]" {
					t.Errorf("dead letters of offsets %v, want [1 3]", offsets)
				}
			}
			p.stopRunning(t)
		})
	}
}

// TestOversizedEmitIsPoison (issue 21, case 3): an emit of 1,048,500 bytes, whose record
// batch is larger than the producer's 1 MiB batch bound, is refused at the call: the record
// is skipped and the commits go on; 1,048,400 bytes still goes out. Before, the emit
// returned 0 and the commit failed with MESSAGE_TOO_LARGE.
func TestOversizedEmitIsPoison(t *testing.T) {
	br, p := startHostile(t, "skip", keyed{"a", "emit 1048500", 0}, keyed{"a", "emit 1048400", 0}, keyed{"b", "", 0})
	admin := p.adminAddr(t)
	waitCounts(t, br.addr, "out", map[string]string{"a": "1", "b": "1"})
	p.waitCommittedRunning(t, br.addr, "hostile", "in")
	p.waitMetric(t, admin, "statehost_records_skipped_total", `processor="p",reason="error"`, 1)
	var big []int
	for _, r := range readChecked(t, br.addr, "out", false) {
		if len(r.Value) > 1000 {
			big = append(big, len(r.Value))
		}
	}
	if fmt.Sprint(big) != "[1048400]" {
		t.Errorf("large output values %v, want one of 1048400 bytes", big)
	}
	p.stopRunning(t)
}

// TestProduceLineTheBrokerTakes (issue 21, case 3): statehost produce writes a line of
// 1,040,008 bytes, which the broker takes (its max.message.bytes is 1,048,588). Before, the
// command's client refused it (franz-go's default batch bound, 1,000,012 bytes).
func TestProduceLineTheBrokerTakes(t *testing.T) {
	bin := buildBinary(t)
	br := startBroker(t, brokerOptions{})
	createTopics(t, br.addr, map[string]int{"lines": 1})
	line := strings.Repeat("x", 1040008)
	produceLines(t, bin, br.addr, "lines", []string{line})
	recs := readChecked(t, br.addr, "lines", false)
	if len(recs) != 1 || string(recs[0].Value) != line {
		t.Fatalf("read %d records, want the line", len(recs))
	}
}

// TestOversizedDeadLetterIsCut (issue 21, case 4): a poison record of 1,048,450 bytes, which
// the broker took (its batch is below the topic's 1,048,588), does not fit the dead-letter
// topic with the statehost.* headers (about 250 bytes here: the record of 1,046,510
// bytes came with a longer error): it is dead-lettered with its value cut and the header
// statehost.truncated holding the original value's length, and the application goes on.
// Before, every commit failed with MESSAGE_TOO_LARGE, at every restart.
func TestOversizedDeadLetterIsCut(t *testing.T) {
	const size = 1048450
	poison := "fail " + strings.Repeat("x", size-5)
	br, p := startHostile(t, "dead_letter", keyed{"a", "", 0}, keyed{"big", poison, 0}, keyed{"a", "", 0})
	waitCounts(t, br.addr, "out", map[string]string{"a": "2"})
	p.waitCommittedRunning(t, br.addr, "hostile", "in")
	var dl [][]byte
	for _, r := range readChecked(t, br.addr, "hostile-p-dlq", false) {
		if string(r.Key) != "big" {
			t.Errorf("dead letter of key %q", r.Key)
		}
		if n, _ := header(r, "statehost.truncated"); n != strconv.Itoa(size) {
			t.Errorf("statehost.truncated = %q, want %d", n, size)
		}
		if o, _ := header(r, "statehost.offset"); o != "1" {
			t.Errorf("statehost.offset = %q, want 1", o)
		}
		if _, ok := header(r, "statehost.error"); !ok {
			t.Error("no statehost.error header")
		}
		dl = append(dl, r.Value)
	}
	if len(dl) != 1 || len(dl[0]) >= size || len(dl[0]) < size-64<<10 || !bytes.HasPrefix([]byte(poison), dl[0]) {
		t.Fatalf("%d dead letters, want one whose value is a cut of the poison record (under %d bytes, by less than 64 KiB)", len(dl), size)
	}
	p.stopRunning(t)
}

// emitFloodRSSBound is the bound on the app's peak RSS under the emit flood. What the flood
// record may make the app hold: its emits, held back until the record is done (on_error =
// "skip"), up to the emit budget (64 MiB), twice that with Go's collector (GOGC=100: the heap
// grows to twice what lives before a collection), the guest's memory (a few MiB of its 64 MiB
// limit: the hostile guest emits one 100 KB buffer) and the app's own (43 MiB measured with
// healthy records only: the runtime, Pebble's caches, the clients). Measured: about 100 MiB;
// the flood reached 3 GB without the budget.
const emitFloodRSSBound = 256 << 20

// TestEmitFloodBoundedMemory (issue 21, case 6): a record that emits a 100 KB value 20,000
// times (2 GB) passes the processor's emit budget (64 MiB by default): it is skipped (reason
// emit_budget), the app's peak RSS stays under emitFloodRSSBound, and the healthy records
// are counted exactly. Before, the flood drove the app past 3 GB.
func TestEmitFloodBoundedMemory(t *testing.T) {
	br, p := startHostile(t, "skip", keyed{"a", "", 0}, keyed{"f", "flood 20000 100000", 0}, keyed{"a", "", 0}, keyed{"b", "", 1})
	admin := p.adminAddr(t)
	waitCounts(t, br.addr, "out", map[string]string{"a": "2", "b": "1"})
	p.waitCommittedRunning(t, br.addr, "hostile", "in")
	p.waitMetric(t, admin, "statehost_records_skipped_total", `processor="p",reason="emit_budget"`, 1)
	peak := peakRSS(t, p.cmd.Process.Pid)
	t.Logf("peak RSS %d MiB (bound %d MiB)", peak>>20, emitFloodRSSBound>>20)
	if peak > emitFloodRSSBound {
		t.Errorf("peak RSS %d MiB, more than the bound of %d MiB", peak>>20, emitFloodRSSBound>>20)
	}
	if out := readChecked(t, br.addr, "out", false); len(out) != 3 {
		t.Errorf("%d output records, want the 3 counts (none of the flood)", len(out))
	}
	p.stopRunning(t)
}

// TestFailedProduceNamesInput (issue 21, case 6 "clear texts"): an output record the broker
// refuses at the commit (the output topic's max.message.bytes was lowered while the app ran,
// after the app learned it) stops the app with an error that names the input record it came
// of: its topic, partition and offset. Before, the error named only the output topic.
func TestFailedProduceNamesInput(t *testing.T) {
	br, p := startHostile(t, "", keyed{"a", "", 1})
	waitCounts(t, br.addr, "out", map[string]string{"a": "1"})
	// The producer compresses batches: 4000 bytes 'x' take about 200 as a batch, the count
	// of a key alone less than 100.
	alterTopicConfig(t, br.addr, "out", "max.message.bytes", "100")
	produceKeyed(t, br.addr, "in", keyed{"k", "emit 4000", 1}) // offset 1 of partition 1
	code, msg := p.stoppedError(t)
	if want := `input record "in" partition 1 offset 1`; code != 1 || !strings.Contains(msg, want) {
		t.Fatalf("exit %d, error %q: want exit 1 and an error naming %s", code, msg, want)
	}
}
