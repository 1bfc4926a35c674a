package engine

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// jsonLogs is an engine's log as JSON entries.
type jsonLogs struct{ buf logBuffer }

// logger returns a logger at level that writes JSON entries to l.
func (l *jsonLogs) logger(level hclog.Level) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Output: &l.buf, Level: level, JSONFormat: true})
}

// entries returns the entries logged so far for which keep is true.
func (l *jsonLogs) entries(t *testing.T, keep func(map[string]any) bool) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(l.buf.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e map[string]any
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}

// guestLines counts the entries whose message starts with prefix (a guest's lines).
func (l *jsonLogs) guestLines(t *testing.T, prefix string) int {
	return len(l.entries(t, func(e map[string]any) bool { return strings.HasPrefix(e["@message"].(string), prefix) }))
}

// reportedDrops sums the "dropped" of the "N guest log lines dropped" entries, checking that
// they carry the task's keys.
func (l *jsonLogs) reportedDrops(t *testing.T, processor string, partition int32) int64 {
	t.Helper()
	var n int64
	for _, e := range l.entries(t, func(e map[string]any) bool { _, ok := e["dropped"]; return ok }) {
		if e["@level"] != "warn" || e["processor"] != processor || e["partition"] != float64(partition) ||
			!strings.HasSuffix(e["@message"].(string), " guest log lines dropped") {
			t.Errorf("drop report %v: want a warn entry of processor %s partition %d", e, processor, partition)
		}
		n += int64(e["dropped"].(float64))
	}
	return n
}

// dropCounter is a Config.OnGuestLogsDropped that sums the drops per processor.
type dropCounter struct {
	mu sync.Mutex
	n  map[string]int64
}

func (d *dropCounter) add(proc string, _ int32, lines int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.n == nil {
		d.n = map[string]int64{}
	}
	d.n[proc] += lines
}

func (d *dropCounter) get(proc string) int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n[proc]
}

// TestGuestLogRateLimit checks that a task's log entries and stderr lines share one token
// bucket: past its burst (the rate is next to nothing here) every line is dropped, counted in
// Config.OnGuestLogsDropped and reported in a WARN entry; that the bucket is the task's, so a
// new instance after a failure finds it empty; and that lines below the log level take no
// token.
func TestGuestLogRateLimit(t *testing.T) {
	var logs jsonLogs
	drops := &dropCounter{}
	const burst = 50
	e, _ := testEngine(t, Config{Logger: logs.logger(hclog.Info), GuestLogRate: 1e-9, GuestLogBurst: burst, OnGuestLogsDropped: drops.add})
	ctx := context.Background()
	limiter := &LogLimiter{reportIn: 100 * time.Millisecond}
	task := newRig(t, "s").task("probe", "out")
	task.Partition = 3
	task.LogLimiter = limiter
	in := instantiate(t, e, "probe", task)
	if err := in.ProcessBatch(ctx, recs("log 1000", "print 1000")); err != nil {
		t.Fatal(err)
	}
	if got, want := logs.guestLines(t, "probe log line"), burst; got != want {
		t.Errorf("%d log entries logged of 1000, want the burst %d", got, want)
	}
	if got := logs.guestLines(t, "probe stderr line"); got != 0 {
		t.Errorf("%d stderr lines logged after the burst was spent, want 0", got)
	}
	if got, want := drops.get("probe"), int64(2000-burst); got != want {
		t.Errorf("OnGuestLogsDropped counted %d lines, want %d", got, want)
	}

	// The next instance of the task (after a trap) shares the spent bucket.
	if err := in.ProcessBatch(ctx, recs("trap")); !errors.Is(err, ErrTrap) {
		t.Fatalf("trap: %v", err)
	}
	in2 := instantiate(t, e, "probe", task)
	if err := in2.ProcessBatch(ctx, recs("log 10", "print 10")); err != nil {
		t.Fatal(err)
	}
	if got := logs.guestLines(t, "probe "); got != burst {
		t.Errorf("%d guest lines logged after the restart, want still %d", got, burst)
	}
	if got, want := drops.get("probe"), int64(2020-burst); got != want {
		t.Errorf("OnGuestLogsDropped counted %d lines, want %d", got, want)
	}
	// Every dropped line is reported, the last ones by the report's timer.
	deadline := time.Now().Add(30 * time.Second)
	for logs.reportedDrops(t, "probe", 3) != 2020-burst {
		if time.Now().After(deadline) {
			t.Fatalf("reports of dropped lines sum to %d, want %d", logs.reportedDrops(t, "probe", 3), 2020-burst)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Another task has a bucket of its own; lines below the level (stdout is debug) take no
	// token from it.
	other := newRig(t, "s").task("other", "out")
	in3 := instantiate(t, e, "probe", other)
	if err := in3.ProcessBatch(ctx, recs("sandbox", "log 10")); err != nil {
		t.Fatal(err)
	}
	if got := logs.guestLines(t, "probe log line"); got != burst+10 {
		t.Errorf("the other task logged %d lines, want 10", got-burst)
	}
	if got := drops.get("other"); got != 0 {
		t.Errorf("the other task dropped %d lines, want 0", got)
	}
}

// TestGuestLogUnlimited checks that a negative GuestLogRate lets every line through.
func TestGuestLogUnlimited(t *testing.T) {
	var logs jsonLogs
	drops := &dropCounter{}
	e, _ := testEngine(t, Config{Logger: logs.logger(hclog.Info), GuestLogRate: -1, GuestLogBurst: 1, OnGuestLogsDropped: drops.add})
	in := instantiate(t, e, "probe", newRig(t, "s").task("probe", "out"))
	if err := in.ProcessBatch(context.Background(), recs("log 300", "print 300")); err != nil {
		t.Fatal(err)
	}
	if got := logs.guestLines(t, "probe "); got != 600 || drops.get("probe") != 0 {
		t.Errorf("%d lines logged and %d dropped, want 600 and 0", got, drops.get("probe"))
	}
}
