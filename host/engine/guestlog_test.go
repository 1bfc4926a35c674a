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

// TestGoCrashFolded checks that a Go guest's runtime crash dump (a panic, a fatal error) is
// one ERROR entry with the first lines of the stack, not a WARN entry per line, and that the
// GuestError's Detail starts with the panic message even when the guest wrote more than
// Detail keeps before it.
func TestGoCrashFolded(t *testing.T) {
	for _, tc := range []struct {
		cmd, first string
		kind       error
		noise      int // stderr lines written before the crash
	}{
		{"panic", "panic: boom on purpose", ErrPanic, 0},
		{"noisypanic 100", "panic: boom after the noise", ErrPanic, 100},
		{"oom", "fatal error: out of memory", ErrOutOfMemory, 0},
	} {
		t.Run(tc.cmd, func(t *testing.T) {
			var logs jsonLogs
			e, _ := testEngine(t, Config{Logger: logs.logger(hclog.Info), MemoryLimit: 32 << 20})
			in := instantiate(t, e, "goprobe", newRig(t, "s").task("goprobe", "out"))
			err := in.ProcessBatch(context.Background(), recs("x", tc.cmd))
			ge := guestError(t, err, tc.kind)
			stderr := logs.entries(t, func(e map[string]any) bool { return e["stream"] == "stderr" })
			var crashes []map[string]any
			for _, e := range stderr {
				if e["@level"] == "error" {
					crashes = append(crashes, e)
				}
			}
			if len(stderr) != tc.noise+1 || len(crashes) != 1 {
				for _, e := range stderr[:min(len(stderr), 25)] {
					t.Logf("%v", e)
				}
				t.Fatalf("%d stderr entries, %d of them errors: want the %d lines of noise and one error", len(stderr), len(crashes), tc.noise)
			}
			c := crashes[0]
			lines := strings.Split(c["crash"].(string), "\n")
			total := int(c["crash_lines"].(float64))
			if !strings.Contains(c["crash"].(string), tc.first) || len(lines) > maxCrashLines || total < len(lines) ||
				!strings.Contains(c["crash"].(string), "goroutine 1 ") {
				t.Errorf("crash entry %q (%d lines of %d): want %q and the stack's first lines, at most %d", c["crash"], len(lines), total, tc.first, maxCrashLines)
			}
			if !strings.Contains(ge.Detail, tc.first) || !strings.Contains(ge.Detail, "goroutine 1 ") || len(ge.Detail) > maxGuestDetail {
				t.Errorf("Detail %q: want %q and the stack's first lines, at most %d bytes", ge.Detail, tc.first, maxGuestDetail)
			}
			t.Logf("crash entry %q, %d lines in the dump; Detail %q", c["@message"], total, ge.Detail)
		})
	}
}

// TestStderrNotACrash checks that "runtime: " lines that no fatal error follows are logged as
// other stderr lines, in a call that fails or not.
func TestStderrNotACrash(t *testing.T) {
	var logs jsonLogs
	e, _ := testEngine(t, Config{Logger: logs.logger(hclog.Info)})
	in := instantiate(t, e, "probe", newRig(t, "s").task("probe", "out"))
	if err := in.ProcessBatch(context.Background(), recs("say runtime: one", "say two", "say runtime: three")); err != nil {
		t.Fatal(err)
	}
	if err := in.ProcessBatch(context.Background(), recs("say runtime: four", "trap")); !errors.Is(err, ErrTrap) {
		t.Fatalf("trap: %v", err)
	}
	var got []string
	for _, e := range logs.entries(t, func(e map[string]any) bool { return e["stream"] == "stderr" }) {
		got = append(got, e["@level"].(string)+" "+e["@message"].(string))
	}
	want := []string{"warn runtime: one", "warn two", "warn runtime: three", "warn runtime: four"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("stderr entries %q, want %q", got, want)
	}
}
