package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/host/runtime"
	"github.com/statehost/statehost/restore"
)

// ansi matches the escape sequences of a terminal: colors, cursor moves, erasures.
var ansi = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]`)

// readPty copies what the terminal of master shows into buf until master is closed (or the
// process on the other side exits: Linux then reports EIO), then closes done.
func readPty(master *os.File, buf *syncBuffer) (done chan struct{}) {
	done = make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.Copy(buf, master)
	}()
	return done
}

// pollUntil polls cond every 20ms until it holds; it fails the test after timeout.
func pollUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, timeout)
		}
	}
}

// barsShown reports whether the bars' container of prog exists.
func barsShown(prog *restoreProgress, ui *barUI) bool {
	prog.mu.Lock()
	defer prog.mu.Unlock()
	return ui.p != nil
}

// feedRestore sends the events of a restore of n offsets from 0, in batches of batch every
// pause, to lis.
func feedRestore(lis restore.Listener, proc, st string, part int32, n, batch int64, pause time.Duration) {
	topic := "app-" + st + "-changelog"
	lis.OnRestoreStart(restore.StartEvent{Processor: proc, Store: st, Topic: topic, Partition: part, StartOffset: 0, EndOffset: n})
	began := time.Now()
	for off := int64(0); off < n; off += batch {
		time.Sleep(pause)
		last := min(off+batch, n) - 1
		lis.OnBatchRestored(restore.BatchEvent{Processor: proc, Store: st, Topic: topic, Partition: part,
			Records: int(last - off + 1), Offset: last, HighWatermark: n})
	}
	lis.OnRestoreEnd(restore.EndEvent{Processor: proc, Store: st, Topic: topic, Partition: part, Records: n, Duration: time.Since(began)})
}

// On a terminal, each restore that runs long enough has a bar with its processor, store,
// partition, progress, rate and time left; log lines print above the bars, and once the
// restores end the bars are gone and the logger writes to the terminal again.
func TestRestoreProgressBars(t *testing.T) {
	master, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer master.Close()
	if err := pty.Setsize(tty, &pty.Winsize{Rows: 30, Cols: 140}); err != nil {
		t.Fatal(err)
	}
	var shown syncBuffer
	done := readPty(master, &shown)

	ui, out := newBarUI(tty)
	log := hclog.New(&hclog.LoggerOptions{Name: "statehost", Output: out, Level: hclog.Info})
	prog := newRestoreProgress(log.Named("restore"), ui, time.Second)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		feedRestore(prog, "count", "counts", 2, 120_000, 4_000, 40*time.Millisecond) // 1.2s
	}()
	go feedRestore(prog, "count", "counts", 0, 50, 50, 0) // too short for a bar
	pollUntil(t, 20*time.Second, "a bar for count/counts p2 on the terminal", func() bool {
		return strings.Contains(ansi.ReplaceAllString(shown.String(), ""), "count/counts p2")
	})
	log.Info("a line while the bars show")
	<-finished
	// The container goes at a tick without restores.
	pollUntil(t, 20*time.Second, "the bars' container gone after the restores ended", func() bool { return !barsShown(prog, ui) })
	log.Info("a line after the bars")
	prog.Close()
	tty.Close()
	<-done

	screen := ansi.ReplaceAllString(shown.String(), "")
	for _, want := range []string{"count/counts p2", " of 120.0k", "%", "/s", "eta ", "a line while the bars show", "a line after the bars"} {
		if !strings.Contains(screen, want) {
			t.Errorf("the terminal does not show %q:\n%s", want, screen)
		}
	}
	if strings.Contains(screen, "p0") {
		t.Errorf("a restore shorter than %v got a bar:\n%s", barDelay, screen)
	}
	if ui.p != nil {
		t.Error("the bars' container is still there after the restores ended")
	}
	// The line after the bars went straight to the terminal: it is the last thing shown.
	if i, j := strings.LastIndex(screen, "a line after the bars"), strings.LastIndex(screen, "count/counts p2"); i < j {
		t.Errorf("a bar shows after the last log line:\n%s", screen)
	}
}

// The run stopping in the middle of a restore removes its bar.
func TestRestoreProgressBarsClose(t *testing.T) {
	master, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer master.Close()
	var shown syncBuffer
	done := readPty(master, &shown)
	ui, out := newBarUI(tty)
	prog := newRestoreProgress(hclog.New(&hclog.LoggerOptions{Output: out}), ui, time.Second)
	prog.OnRestoreStart(restore.StartEvent{Processor: "p", Store: "s", Topic: "t", Partition: 1, StartOffset: 10, EndOffset: 1010})
	time.Sleep(2 * barDelay)
	prog.OnBatchRestored(restore.BatchEvent{Processor: "p", Store: "s", Topic: "t", Partition: 1, Records: 500, Offset: 509})
	pollUntil(t, 20*time.Second, "a bar at 500 of 1000 on the terminal", func() bool {
		screen := ansi.ReplaceAllString(shown.String(), "")
		return strings.Contains(screen, "p/s p1") && strings.Contains(screen, "500 of 1000")
	})
	stopped := make(chan struct{})
	go func() {
		prog.Close()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return within 5s")
	}
	prog.OnBatchRestored(restore.BatchEvent{Processor: "p", Store: "s", Topic: "t", Partition: 1, Records: 500, Offset: 1009}) // ignored
	tty.Close()
	<-done
	screen := ansi.ReplaceAllString(shown.String(), "")
	if !strings.Contains(screen, "p/s p1") || !strings.Contains(screen, "500 of 1000") {
		t.Errorf("no bar at 500 of 1000:\n%q", screen)
	}
	if ui.p != nil {
		t.Error("the bars' container is still there after Close")
	}
}

// Without a terminal, a restore that runs longer than the interval logs a progress line
// every interval, with the fixed keys; a short one logs none, and a restore whose task went
// away (revoked: no end event) stops logging.
func TestRestoreProgressLog(t *testing.T) {
	var buf syncBuffer
	log := hclog.New(&hclog.LoggerOptions{Name: "statehost", Output: &buf, JSONFormat: true})
	prog := newRestoreProgress(log.Named("restore"), nil, 150*time.Millisecond)
	var revoked atomic.Bool
	prog.setAlive(func(proc string, part int32) bool { return !(revoked.Load() && part == 9) })

	go feedRestore(prog, "count", "counts", 0, 20, 20, 0)
	began := time.Now()
	feedRestore(prog, "count", "counts", 1, 10_000, 500, 40*time.Millisecond) // 800ms, longer on a busy machine
	took := time.Since(began)

	// A restore that never ends: its task is revoked.
	prog.OnRestoreStart(restore.StartEvent{Processor: "count", Store: "counts", Topic: "t", Partition: 9, StartOffset: 100, EndOffset: 200})
	prog.OnBatchRestored(restore.BatchEvent{Processor: "count", Store: "counts", Topic: "t", Partition: 9, Records: 10, Offset: 109})
	pollUntil(t, 20*time.Second, "a progress line of the restore that stalls", func() bool {
		return strings.Contains(buf.String(), `"partition":9`)
	})
	revoked.Store(true)
	pollUntil(t, 20*time.Second, "the restore of the revoked task dropped", func() bool {
		prog.mu.Lock()
		defer prog.mu.Unlock()
		return prog.active[restoreKey{"count", "counts", 9}] == nil
	})
	before := strings.Count(buf.String(), `"partition":9`)
	time.Sleep(500 * time.Millisecond)
	prog.Close()

	type line struct {
		Message   string  `json:"@message"`
		Module    string  `json:"@module"`
		Processor string  `json:"processor"`
		Store     string  `json:"store"`
		Partition int32   `json:"partition"`
		Offset    int64   `json:"offset"`
		Restored  int64   `json:"restored"`
		Total     int64   `json:"total"`
		Percent   int64   `json:"percent"`
		Rate      float64 `json:"rate"`
		ETA       *int64  `json:"eta"`
		Topic     string  `json:"topic"`
	}
	var lines []line
	sc := bufio.NewScanner(strings.NewReader(buf.String()))
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("%v: %s", err, sc.Bytes())
		}
		lines = append(lines, l)
	}
	byPart := map[int32][]line{}
	for _, l := range lines {
		if l.Message != "restore progress" || l.Module != "statehost.restore" || l.Processor != "count" || l.Store != "counts" {
			t.Errorf("unexpected line %+v", l)
			continue
		}
		byPart[l.Partition] = append(byPart[l.Partition], l)
	}
	// At most one line per interval, the first an interval after the start.
	if n, most := len(byPart[1]), int(took/(150*time.Millisecond)); n < 2 || n > most {
		t.Errorf("%d progress lines for a restore of %v at a 150ms interval, want 2 to %d:\n%s", n, took, most, buf.String())
	}
	for _, l := range byPart[1] {
		if l.Total != 10_000 || l.Restored <= 0 || l.Restored > l.Total || l.Offset != l.Restored-1 || l.Rate <= 0 ||
			l.ETA == nil || l.Percent != l.Restored*100/l.Total || l.Topic != "app-counts-changelog" {
			t.Errorf("bad progress line %+v", l)
		}
	}
	if len(byPart[0]) > 0 {
		t.Errorf("a restore that ended at once logged progress: %+v", byPart[0])
	}
	if len(byPart[9]) == 0 {
		t.Errorf("no progress line of the restore that stalls:\n%s", buf.String())
	}
	if after := strings.Count(buf.String(), `"partition":9`); after != before {
		t.Errorf("the restore of a revoked task still logs: %d lines, then %d", before, after)
	}
	for _, l := range byPart[9] {
		if l.Offset != 109 || l.Restored != 10 || l.Total != 100 {
			t.Errorf("bad progress line %+v", l)
		}
	}
}

func TestProgressFormats(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		want string
	}{{0, "0"}, {9999, "9999"}, {12_345, "12.3k"}, {4_560_000, "4.56M"}, {7_890_000_000, "7.89G"}} {
		if got := compact(tc.n); got != tc.want {
			t.Errorf("compact(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
	if got := etaOf(1000, 100); got != 10*time.Second {
		t.Errorf("etaOf(1000, 100/s) = %v, want 10s", got)
	}
	if got := etaOf(1000, 0); got != 0 {
		t.Errorf("etaOf with no rate = %v, want 0", got)
	}
	if got := percentOf(1, 3); got != 33 {
		t.Errorf("percentOf(1, 3) = %d", got)
	}
}

// run --progress refuses other modes.
func TestRunProgressFlag(t *testing.T) {
	r := runCLI(t.Context(), "", "run", "--progress", "bars")
	if r.code != exitUsage || !strings.Contains(r.stderr, `--progress "bars": want auto, log or off`) {
		t.Errorf("run --progress bars: %v", r)
	}
	r = runCLI(t.Context(), "", "run", "--progress-interval", "0s")
	if r.code != exitUsage || !strings.Contains(r.stderr, "want a positive duration") {
		t.Errorf("run --progress-interval 0s: %v", r)
	}
}

// fillChangelog writes n records with distinct keys to each of the partitions of topic,
// directly, as a store's changelog that grew large.
func fillChangelog(t testing.TB, addr, topic string, partitions int32, n int) {
	t.Helper()
	cl := testClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond), kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(100_000))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var failed atomic.Pointer[error]
	for p := range partitions {
		for i := range n {
			rec := &kgo.Record{Topic: topic, Partition: p, Key: fmt.Appendf(nil, "w%d-%07d", p, i), Value: binary.BigEndian.AppendUint64(nil, 1)}
			cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
				if err != nil {
					failed.CompareAndSwap(nil, &err)
				}
			})
		}
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := failed.Load(); err != nil {
		t.Fatalf("produce to %s: %v", topic, *err)
	}
}

// `statehost run` under a pseudo-terminal shows a bar per restoring store partition; with
// stderr not a terminal it logs progress lines instead.
func TestRunProgressProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the statehost program")
	}
	// Enough for each restore to last well beyond barDelay and the progress interval: a
	// cold restore loads about 5 million records/s on 2 cores.
	const perPartition = 2_000_000
	bin := buildBinary(t)
	dir := t.TempDir()
	b := startBroker(t, brokerOptions{})
	cfg := writeAppConfigWith(t, dir, b.addr, appOptions{commitInterval: e2eCommit})

	// The changelog of the store counts exists before the first run, large (the runtime
	// leaves the configs of an existing changelog alone, and checks its partition count).
	began := time.Now()
	cl := testClient(t, b.addr)
	resp, err := kadm.NewClient(cl).CreateTopic(t.Context(), 3, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, e2eChangelog)
	cl.Close()
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatal(err)
	}
	fillChangelog(t, b.addr, e2eChangelog, 3, perPartition)
	t.Logf("changelog filled: %v", time.Since(began))

	// Under a terminal: bars.
	began = time.Now()
	events := newEventLog(t)
	cmd := exec.Command(bin, "run", "--config", cfg, "--events", events.path)
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 160})
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	var shown syncBuffer
	done := readPty(ptmx, &shown)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	screen := func() string { return ansi.ReplaceAllString(shown.String(), "") }
	deadline := time.Now().Add(60 * time.Second)
	restored := func() int {
		n := 0
		for _, e := range ofKinds(events.all(), runtime.EventRestoreDone) {
			if e.Processor == "count" && e.Store == "counts" {
				n++
			}
		}
		return n
	}
	for restored() < 3 {
		select {
		case err := <-exited:
			t.Fatalf("statehost run exited: %v\n%s", err, screen())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("the restores did not end within 60s:\n%s", screen())
		}
	}
	t.Logf("run under a terminal, restored: %v", time.Since(began))
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("statehost run under a terminal: %v", err)
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("statehost run did not exit within 30s of SIGTERM")
	}
	ptmx.Close()
	<-done
	events.check(t)
	out := screen()
	bar := regexp.MustCompile(`count/counts p[0-2] +\[[=>-]+\] +[0-9.]+[kM]? of 2\.00M +[0-9]+% +[0-9.kM]+/s +eta `)
	if !bar.MatchString(out) {
		t.Errorf("no progress bar of the store counts on the terminal:\n%s", out)
	}
	if strings.Contains(out, `"@message"`) || !strings.Contains(out, "[INFO]  statehost.runtime: ") {
		t.Errorf("the logs on the terminal are not text lines:\n%s", out)
	}
	if t.Failed() {
		return
	}

	// Without a terminal (stderr is a pipe, the logs JSON): progress lines.
	// The stores go, the compiled modules stay.
	for _, sub := range []string{"pebble", "tasks"} {
		if err := os.RemoveAll(filepath.Join(appStateDir(dir), sub)); err != nil {
			t.Fatal(err)
		}
	}
	began = time.Now()
	app := startApp(t, bin, cfg, "log", "--progress-interval", "200ms")
	app.waitFor(t, 60*time.Second, "the restores of counts", func() bool {
		_, done := app.restores()
		return len(done) == 3
	})
	t.Logf("run without a terminal, restored: %v", time.Since(began))
	if code := app.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("run without a terminal exited %d", code)
	}
	var progress int
	for _, l := range app.logLines() {
		if l.Message != "restore progress" { // the log line that this test tests
			continue
		}
		if l.Module != "statehost.restore" || l.Processor != "count" || l.Store != "counts" {
			t.Errorf("progress line of %+v", l)
		}
		progress++
	}
	if progress == 0 {
		t.Errorf("no \"restore progress\" line")
	}
	for _, line := range strings.Split(app.stderr.String(), "\n") {
		if strings.Contains(line, `"restore progress"`) {
			for _, key := range []string{`"offset":`, `"restored":`, `"total":2000000`, `"rate":`, `"eta":`, `"partition":`} {
				if !strings.Contains(line, key) {
					t.Errorf("progress line without %s: %s", key, line)
				}
			}
		}
	}
}
