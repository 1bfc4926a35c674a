package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/internal/topictest"
	"github.com/statehost/statehost/pluginsdk/wasmbuild"
)

// The end-to-end tests run the statehost program as processes: a broker, one or more apps
// running the word count (tokenize and count), and the produce command.

const (
	e2eApp       = "wordcount"
	e2eChangelog = e2eApp + "-counts-changelog"
	e2eRepart    = e2eApp + "-words-repartition"
	e2eTasks     = 7 // tokenize on the 4 partitions of sentences, count on the 3 of the repartition topic
	e2eCommit    = 200 * time.Millisecond
)

var (
	modulesOnce sync.Once
	modulesErr  error
	e2eModules  map[string]string // plugin name -> .wasm path
)

// buildModules builds the tokenize, count and windowcount plugins once for the tests of the package, into
// the directory of the test binary (removed by TestMain).
func buildModules(t testing.TB) map[string]string {
	t.Helper()
	buildBinary(t)
	modulesOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		mods := map[string]string{}
		errs := make(chan error, 3)
		var wg sync.WaitGroup
		for _, name := range []string{"tokenize", "count", "windowcount"} {
			out := filepath.Join(binaryDir, name+".wasm")
			mods[name] = out
			wg.Go(func() {
				if err := wasmbuild.Go(ctx, filepath.Join("..", "..", "plugins", name), out); err != nil {
					errs <- fmt.Errorf("build %s: %w", name, err)
				}
			})
		}
		wg.Wait()
		close(errs)
		modulesErr = <-errs
		e2eModules = mods
	})
	if modulesErr != nil {
		t.Fatal(modulesErr)
	}
	return e2eModules
}

// writeAppConfig writes the word-count configuration for the broker at addr into dir and
// returns its path; the state directory is dir/state, so the app's is dir/state/wordcount.
func writeAppConfig(t testing.TB, dir, addr string, logging bool) string {
	t.Helper()
	return writeAppConfigWith(t, dir, addr, appOptions{commitInterval: e2eCommit, loggingDisabled: !logging})
}

// appOptions vary the word-count configuration that writeAppConfigWith writes.
type appOptions struct {
	guarantee       string        // processing_guarantee; "": the default
	commitInterval  time.Duration // 0: the guarantee's default
	sessionTimeout  time.Duration // 0: the default
	loggingDisabled bool
	admin           bool  // an admin listener on a free port of 127.0.0.1 (logged: "admin listening"); false: none
	standbyReplicas int   // standby_replicas; 0: the default (none)
	recoveryLag     int64 // acceptable_recovery_lag; 0: the default
}

// writeAppConfigWith writes the word-count configuration with the options o into dir (created
// when missing) as app.hcl, and returns its path; the state directory is dir/state.
func writeAppConfigWith(t testing.TB, dir, addr string, o appOptions) string {
	t.Helper()
	mods := buildModules(t)
	var top strings.Builder
	if o.guarantee != "" {
		fmt.Fprintf(&top, "processing_guarantee = %q\n", o.guarantee)
	}
	if o.commitInterval > 0 {
		fmt.Fprintf(&top, "commit_interval = %q\n", o.commitInterval.String())
	}
	if o.sessionTimeout > 0 {
		fmt.Fprintf(&top, "session_timeout = %q\n", o.sessionTimeout.String())
	}
	if o.standbyReplicas > 0 {
		fmt.Fprintf(&top, "standby_replicas = %d\n", o.standbyReplicas)
	}
	if o.recoveryLag > 0 {
		fmt.Fprintf(&top, "acceptable_recovery_lag = %d\n", o.recoveryLag)
	}
	listen := ""
	if o.admin {
		listen = "127.0.0.1:0"
	}
	logBlock := "logging {\n      enabled      = true\n      topic_config = { \"min.compaction.lag.ms\" = \"0\" }\n    }"
	if o.loggingDisabled {
		logBlock = "logging {\n      enabled = false\n    }"
	}
	src := fmt.Sprintf(`application_id  = %q
state_dir       = %q
%skafka {
  brokers = [%q]
}
admin {
  listen = %q
}
topic "sentences" {
  partitions = 4
}
repartition "words" {
  partitions = 3
}
processor "tokenize" {
  module  = %q
  inputs  = ["sentences"]
  outputs = ["words"]
}
processor "count" {
  module  = %q
  inputs  = ["words"]
  outputs = ["word-counts"]
  store "counts" {
    %s
  }
}
`, e2eApp, filepath.Join(dir, "state"), top.String(), addr, listen, mods["tokenize"], mods["count"], logBlock)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "app.hcl")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// appStateDir is the state directory of the app configured by writeAppConfig in dir.
func appStateDir(dir string) string { return filepath.Join(dir, "state", e2eApp) }

// appProcess is `statehost run` running as a process, its logs JSON lines.
type appProcess struct {
	name   string
	cmd    *exec.Cmd
	stderr syncBuffer
	done   chan struct{}
	code   int // the exit code once done is closed; -1 when a signal ended it

	logFile string // where a failed test writes stderr; "": the test log
}

// startApp starts `statehost run --config cfg --log-json [args]`. Cleanup kills it if it
// still runs, and logs its stderr (or writes it to p.logFile when set) if the test failed.
func startApp(t testing.TB, bin, cfg, name string, args ...string) *appProcess {
	t.Helper()
	p := &appProcess{name: name, done: make(chan struct{})}
	p.cmd = exec.Command(bin, append([]string{"run", "--config", cfg, "--log-json"}, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stderr, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := p.cmd.Wait()
		var exit *exec.ExitError
		switch {
		case errors.As(err, &exit):
			p.code = exit.ExitCode()
		case err != nil:
			p.code = -1
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.exited() {
			p.cmd.Process.Kill()
			<-p.done
		}
		switch {
		case !t.Failed():
		case p.logFile != "":
			if err := os.WriteFile(p.logFile, []byte(p.stderr.String()), 0o644); err == nil {
				t.Logf("stderr of %s (exit %d) written to %s", p.name, p.code, p.logFile)
			}
		default:
			t.Logf("stderr of %s (exit %d):\n%s", p.name, p.code, p.stderr.String())
		}
	})
	return p
}

func (p *appProcess) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// logLine is a JSON log line of the app with the fields the tests read.
type logLine struct {
	Message   string `json:"@message"`
	Level     string `json:"@level"`
	Module    string `json:"@module"`
	Processor string `json:"processor"`
	Store     string `json:"store"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	EndOffset int64  `json:"end_offset"`
	Records   int64  `json:"records"`
	Error     string `json:"error"`
	Addr      string `json:"addr"`
}

// logs returns the JSON lines logged so far with the message msg (all lines for "").
func (p *appProcess) logs(msg string) []logLine {
	var out []logLine
	sc := bufio.NewScanner(strings.NewReader(p.stderr.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l logLine
		if json.Unmarshal(sc.Bytes(), &l) == nil && (msg == "" || l.Message == msg) {
			out = append(out, l)
		}
	}
	return out
}

// waitLog polls the logs until cond holds; it fails the test if the process exits first.
func (p *appProcess) waitLog(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if p.exited() {
			t.Fatalf("%s exited %d while waiting for %s", p.name, p.code, what)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: timed out after %v waiting for %s", p.name, timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitTasks waits until every task of the word count has logged "task running".
func (p *appProcess) waitTasks(t testing.TB, timeout time.Duration) {
	t.Helper()
	p.waitLog(t, timeout, "all tasks running", func() bool {
		seen := map[string]bool{}
		for _, l := range p.logs("task running") {
			seen[fmt.Sprintf("%s_%d", l.Processor, l.Partition)] = true
		}
		return len(seen) == e2eTasks
	})
}

// restores returns the "restore started" and "restore done" lines of the store counts.
func (p *appProcess) restores() (started, done []logLine) {
	for _, l := range p.logs("") {
		switch {
		case l.Store != "counts":
		case l.Message == "restore started":
			started = append(started, l)
		case l.Message == "restore done":
			done = append(done, l)
		}
	}
	return started, done
}

// restoredRecords sums the records of the "restore done" lines of the store counts.
func (p *appProcess) restoredRecords() int64 {
	_, done := p.restores()
	var n int64
	for _, l := range done {
		n += l.Records
	}
	return n
}

// stop sends sig and waits for the exit code.
func (p *appProcess) stop(t testing.TB, sig syscall.Signal) int {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%s: %v", p.name, err)
	}
	return p.wait(t, 60*time.Second)
}

// wait waits for the process to exit and returns its exit code.
func (p *appProcess) wait(t testing.TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(timeout):
		t.Fatalf("%s did not exit within %v", p.name, timeout)
		return 0
	}
}

// produceLines writes lines to topic with the `statehost produce` command as a process.
func produceLines(t testing.TB, bin, addr, topic string, lines []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "produce", "--brokers", addr, topic)
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	out, err := cmd.CombinedOutput()
	if want := fmt.Sprintf("produced %d records to %s", len(lines), topic); err != nil || !strings.Contains(string(out), want) {
		t.Fatalf("statehost produce: %v\n%s\nwant %q", err, out, want)
	}
}

// addCounts adds more to ref.
func addCounts(ref, more map[string]int) {
	for k, v := range more {
		ref[k] += v
	}
}

// newKafkaClient returns a client of the broker at addr; the caller closes it.
func newKafkaClient(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// topicEnds returns the end offsets of topic by partition.
func topicEnds(t testing.TB, addr, topic string) map[int32]int64 {
	t.Helper()
	cl := newKafkaClient(t, addr)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	out := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("end offset of %s partition %d: %v", topic, o.Partition, o.Err)
		}
		out[o.Partition] = o.Offset
	})
	return out
}

// latest reads topic to its current end: see topictest.Latest.
func latest(t testing.TB, addr, topic string) (map[string]string, int) {
	t.Helper()
	return topictest.Latest(t, []string{addr}, topic)
}

// waitCounts waits until the latest values of topic equal want.
func waitCounts(t testing.TB, addr, topic string, want map[string]string) {
	t.Helper()
	topictest.WaitLatest(t, []string{addr}, topic, want, 90*time.Second)
}

// waitCommitted waits until the group's committed offsets equal the end offsets of the
// topics, on every partition.
func waitCommitted(t testing.TB, addr, group string, topics ...string) {
	t.Helper()
	cl := newKafkaClient(t, addr)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(60 * time.Second)
	for {
		var behind []string
		resp, err := adm.FetchOffsets(t.Context(), group)
		if err != nil {
			t.Fatal(err)
		}
		for _, topic := range topics {
			for p, end := range topicEnds(t, addr, topic) {
				o, ok := resp.Lookup(topic, p)
				at := int64(0)
				if ok && o.Err == nil {
					at = o.At
				}
				if at != end {
					behind = append(behind, fmt.Sprintf("%s/%d committed %d, end %d", topic, p, at, end))
				}
			}
		}
		if len(behind) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s: offsets not committed to the end: %v", group, behind)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
