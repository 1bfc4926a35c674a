package runtime

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/internal/topictest"
)

// ttlHCL runs testdata/ttl over a key-value store with a ttl of one minute (clock %[3]s), on
// one partition so that the test knows the task's stream time.
const ttlHCL = `
application_id       = "ttl"
state_dir            = "state"
processing_guarantee = "%[1]s"
commit_interval      = "100ms"
admin { listen = "127.0.0.1:0" }
topic "cmds" {
  partitions = 1
}
processor "p" {
  module  = "%[2]s"
  inputs  = ["cmds"]
  outputs = ["answers"]
  store "kv" {
    ttl       = "1m"
    ttl_clock = "%[3]s"
  }
}
`

// ttlRun is a TTL test's application: its configuration, broker and client, the answers it
// expects of the plugin so far, and its running instance.
type ttlRun struct {
	t       *testing.T
	dir     string
	src     string
	brokers []string
	cl      *kgo.Client
	answers map[string]string // the latest answer per key, as the test expects them
	in      *instance
}

func newTTLRun(t *testing.T, guarantee, clock string) *ttlRun {
	dir := t.TempDir()
	r := &ttlRun{t: t, dir: dir, brokers: cluster(t), answers: map[string]string{},
		src: fmt.Sprintf(ttlHCL, guarantee, buildTestdata(t, dir, "ttl"), clock)}
	r.cl, _ = client(t, r.brokers)
	return r
}

// start starts the application with the options of mods, and waits for its task to run.
func (r *ttlRun) start(mods ...func(*Options)) {
	r.t.Helper()
	r.in = start(r.t, loadConfig(r.t, r.dir, r.src), r.brokers, mods...)
	waitFor(r.t, 60*time.Second, "the task to run", func() bool {
		if r.in.rt.local.adminAddr() == "" {
			return false // not listening yet
		}
		code, _, _ := query(r.t, http.DefaultClient, r.in, "/v1/stores/kv/keys/none")
		return code == http.StatusNotFound
	})
}

// stop stops the application, and deletes its state directory when wipe is set.
func (r *ttlRun) stop(wipe bool) {
	r.t.Helper()
	if err := r.in.stop(r.t); err != nil {
		r.t.Fatalf("Run: %v", err)
	}
	if wipe {
		if err := os.RemoveAll(filepath.Join(r.dir, "state", "ttl")); err != nil {
			r.t.Fatal(err)
		}
	}
}

// send produces the commands, each "key command" at its timestamp, in order, and waits for
// the answers the test expects of them (want: key -> value).
func (r *ttlRun) send(ts time.Time, want map[string]string, cmds ...string) {
	r.t.Helper()
	recs := make([]*kgo.Record, len(cmds))
	for i, c := range cmds {
		k, v, _ := strings.Cut(c, " ")
		recs[i] = &kgo.Record{Topic: "cmds", Key: []byte(k), Value: []byte(v), Timestamp: ts}
	}
	if err := r.cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		r.t.Fatal(err)
	}
	for k, v := range want {
		r.answers[k] = v
	}
	topictest.WaitLatest(r.t, r.brokers, "answers", r.answers, 30*time.Second)
}

// iq returns what the interactive queries answer for each of keys ("<404>" when absent), and
// the store's range, "key=value" joined by ",".
func (r *ttlRun) iq(keys ...string) []string {
	r.t.Helper()
	var out []string
	for _, k := range keys {
		code, body, _ := query(r.t, http.DefaultClient, r.in, "/v1/stores/kv/keys/"+k)
		switch code {
		case http.StatusOK:
			out = append(out, body)
		case http.StatusNotFound:
			out = append(out, "<404>")
		default:
			r.t.Fatalf("GET key %s: %d %s", k, code, body)
		}
	}
	code, body, _ := query(r.t, http.DefaultClient, r.in, "/v1/stores/kv/range")
	if code != http.StatusOK {
		r.t.Fatalf("GET range: %d %s", code, body)
	}
	var entries []string
	for _, e := range rangeLines(r.t, body) {
		entries = append(entries, *e.Key+"="+*e.Value)
	}
	return append(out, strings.Join(entries, ","))
}

// waitIQ waits until the interactive queries answer want (iq's form).
func (r *ttlRun) waitIQ(want []string, keys ...string) {
	r.t.Helper()
	var got []string
	deadline := time.Now().Add(30 * time.Second)
	for got = r.iq(keys...); !slices.Equal(got, want); got = r.iq(keys...) {
		if time.Now().After(deadline) {
			r.t.Fatalf("interactive queries %v: %v, want %v", keys, got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// changelog returns the records of the store's changelog, "key=value@ms" with the time
// relative to base ("key=<tombstone>@ms" for a tombstone), reading committed records.
func (r *ttlRun) changelog(base time.Time) []string {
	r.t.Helper()
	var out []string
	for _, rec := range topictest.Read(r.t, r.brokers, "ttl-kv-changelog", true) {
		v := "<tombstone>"
		if rec.Value != nil {
			v = string(rec.Value)
		}
		out = append(out, fmt.Sprintf("%s=%s@%d", rec.Key, v, rec.Timestamp.Sub(base).Milliseconds()))
	}
	return out
}

// waitChangelog waits until the store's changelog holds want (changelog's form).
func (r *ttlRun) waitChangelog(base time.Time, want ...string) {
	r.t.Helper()
	var got []string
	deadline := time.Now().Add(30 * time.Second)
	for got = r.changelog(base); !slices.Equal(got, want); got = r.changelog(base) {
		if time.Now().After(deadline) {
			r.t.Fatalf("changelog:\n got %v\nwant %v", got, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// expired returns statehost_store_expired_total of the store kv.
func (r *ttlRun) expired() float64 {
	r.t.Helper()
	fams := scrape(r.t, "http://"+r.in.rt.local.adminAddr())
	if len(matching(fams, "statehost_store_expired_total", "processor", "p", "store", "kv")) != 1 {
		r.t.Fatal("no series statehost_store_expired_total{processor=\"p\",store=\"kv\"}")
	}
	return sum(fams, "statehost_store_expired_total", "processor", "p", "store", "kv")
}

func noSweep(o *Options)   { o.sweepEvery = -1 }
func fastSweep(o *Options) { o.sweepEvery = 50 * time.Millisecond }

// TestStoreTTLStreamTime runs a store with a ttl of one minute in stream time, under both
// guarantees. The plugin writes keys at known record timestamps; once the stream time is a
// minute past a key's write, the plugin (get, range, prefix) and the interactive queries no
// longer see it. The first run does not sweep: its changelog holds the puts alone, with their
// write times as timestamps. The second starts from a deleted state directory: the restore
// brings the stream time back from the records' timestamps, so the expired key stays hidden
// before any record arrives, and the sweep deletes it with a tombstone (counted). Records at a
// later stream time expire two more keys, which the sweep deletes. A third start, again from
// nothing, restores exactly the live key, and has nothing to sweep.
func TestStoreTTLStreamTime(t *testing.T) {
	for _, guarantee := range []string{"at_least_once", "exactly_once"} {
		t.Run(guarantee, func(t *testing.T) { testStoreTTLStreamTime(t, guarantee) })
	}
}

func testStoreTTLStreamTime(t *testing.T, guarantee string) {
	r := newTTLRun(t, guarantee, "stream_time")
	base := time.UnixMilli(1_700_000_000_000)
	at := func(s int) time.Time { return base.Add(time.Duration(s) * time.Second) }

	r.start(noSweep)
	r.send(at(0), map[string]string{"k-a": "va"}, "k-a put va", "k-a get")
	r.send(at(10), nil, "k-b put vb")
	r.send(at(30), nil, "k-c put vc")
	// At 65s k-a (0s) has expired; k-b (10s), k-c (30s) and k-d (65s) live.
	r.send(at(65), map[string]string{"k-a": "<none>", "k-b": "vb", "q1": "k-b=vb,k-c=vc,k-d=vd", "q2": "k-b=vb,k-c=vc,k-d=vd"},
		"k-d put vd", "k-a get", "k-b get", "q1 range", "q2 prefix k-")
	r.waitIQ([]string{"<404>", "vb", "k-b=vb,k-c=vc,k-d=vd"}, "k-a", "k-b")
	if n := r.expired(); n != 0 {
		t.Fatalf("statehost_store_expired_total = %v without a sweep", n)
	}
	r.stop(true)
	puts := []string{"k-a=va@0", "k-b=vb@10000", "k-c=vc@30000", "k-d=vd@65000"}
	if got := r.changelog(base); !slices.Equal(got, puts) {
		t.Fatalf("changelog of the first run:\n got %v\nwant %v", got, puts)
	}

	r.start(fastSweep)
	// Restored at the stream time of the last write, 65s: k-a is hidden, and swept.
	if got, want := r.iq("k-a", "k-b"), []string{"<404>", "vb", "k-b=vb,k-c=vc,k-d=vd"}; !slices.Equal(got, want) {
		t.Fatalf("interactive queries after the restore: %v, want %v", got, want)
	}
	r.waitChangelog(base, append(puts, "k-a=<tombstone>@65000")...)
	waitFor(t, 10*time.Second, "statehost_store_expired_total = 1", func() bool { return r.expired() == 1 })
	// At 95s k-b (10s) and k-c (30s) have expired too.
	r.send(at(95), map[string]string{"k-c": "<none>", "q3": "k-d=vd"}, "k-c get", "q3 range")
	r.waitChangelog(base, append(puts, "k-a=<tombstone>@65000", "k-b=<tombstone>@95000", "k-c=<tombstone>@95000")...)
	waitFor(t, 10*time.Second, "statehost_store_expired_total = 3", func() bool { return r.expired() == 3 })
	r.waitIQ([]string{"<404>", "<404>", "k-d=vd"}, "k-a", "k-b")
	r.stop(true)

	r.start(fastSweep)
	if got, want := r.iq("k-a", "k-b", "k-d"), []string{"<404>", "<404>", "vd", "k-d=vd"}; !slices.Equal(got, want) {
		t.Fatalf("interactive queries after the second restore: %v, want %v", got, want)
	}
	time.Sleep(300 * time.Millisecond) // several sweep intervals: nothing is left to sweep
	if n := r.expired(); n != 0 {
		t.Fatalf("statehost_store_expired_total = %v after the second restore", n)
	}
	if got := r.changelog(base); len(got) != 7 {
		t.Fatalf("changelog after the second restore: %v", got)
	}
}

// TestStoreTTLWallClock runs a store with a ttl of one minute in wall-clock time, on a clock
// the test moves: entries expire as the clock passes, without records, and the sweep deletes
// them with tombstones stamped with the clock; a restart from a deleted state directory
// restores the write times from the records' timestamps and expires by the clock, whatever
// the records' own timestamps.
func TestStoreTTLWallClock(t *testing.T) {
	r := newTTLRun(t, "at_least_once", "wall_clock")
	base := time.UnixMilli(1_800_000_000_000)
	var now atomic.Int64
	set := func(s int) { now.Store(base.Add(time.Duration(s) * time.Second).UnixMilli()) }
	clock := func(o *Options) { o.wallClock = func() time.Time { return time.UnixMilli(now.Load()) } }
	old := time.UnixMilli(1_000) // the records' timestamps, which do not count

	set(0)
	r.start(clock, fastSweep)
	r.send(old, map[string]string{"a": "va"}, "a put va", "a get")
	set(30)
	r.send(old, map[string]string{"b": "vb"}, "b put vb", "b get")
	set(61) // a (0s) expires, with no record to process
	r.waitChangelog(base, "a=va@0", "b=vb@30000", "a=<tombstone>@61000")
	r.waitIQ([]string{"<404>", "vb", "b=vb"}, "a", "b")
	r.send(old, map[string]string{"q": "b=vb"}, "q range")
	waitFor(t, 10*time.Second, "statehost_store_expired_total = 1", func() bool { return r.expired() == 1 })
	r.stop(true)

	set(95) // b (30s) has expired while the application was stopped
	r.start(clock, fastSweep)
	if got, want := r.iq("a", "b"), []string{"<404>", "<404>", ""}; !slices.Equal(got, want) {
		t.Fatalf("interactive queries after the restore: %v, want %v", got, want)
	}
	r.waitChangelog(base, "a=va@0", "b=vb@30000", "a=<tombstone>@61000", "b=<tombstone>@95000")
	waitFor(t, 10*time.Second, "statehost_store_expired_total = 1", func() bool { return r.expired() == 1 })
}
