package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/host/runtime"
	"github.com/statehost/statehost/internal/kafkacluster"
	"github.com/statehost/statehost/internal/topictest"
)

// The harness of the process tests: the one set of helpers that start a broker and the
// statehost program as processes, make clients of the broker, produce in the background and
// read what the processes wrote. The reading of the processes' events is in
// harness_events_test.go, in one place; of their log lines in harness_logs_test.go.

var (
	binaryOnce sync.Once
	binaryPath string
	binaryErr  error
	binaryDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binaryDir != "" {
		os.RemoveAll(binaryDir)
	}
	os.Exit(code)
}

// buildBinary builds the statehost program once for the tests of the package.
func buildBinary(t testing.TB) string {
	t.Helper()
	binaryOnce.Do(func() {
		if binaryDir, binaryErr = os.MkdirTemp("", "statehost-test"); binaryErr != nil {
			return
		}
		binaryPath = filepath.Join(binaryDir, "statehost")
		out, err := exec.Command("go", "build", "-o", binaryPath, ".").CombinedOutput()
		if err != nil {
			binaryErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if binaryErr != nil {
		t.Fatal(binaryErr)
	}
	return binaryPath
}

// brokerProcess is the test's broker: `statehost broker` running as a process, or an Apache
// Kafka cluster.
type brokerProcess struct {
	cmd  *exec.Cmd
	addr string
	done chan error
	log  syncBuffer // its stderr, logged when the test fails

	cluster *kafkacluster.Cluster // instead of the process, with STATEHOST_TEST_KAFKA=1
}

// brokerOptions say which broker startBroker starts. The zero value is the test's broker.
type brokerOptions struct {
	// kfake: `statehost broker` (kfake) even with STATEHOST_TEST_KAFKA=1, for the tests of
	// the broker command itself and of its restarts on one address and data directory.
	kfake bool
	dir   string // the data directory of `statehost broker`; "": a new temporary one
	// addr is the address of `statehost broker`; "": a free port of 127.0.0.1. An address that
	// is still taken (by the socket of the previous broker on it) is tried again for 10 s.
	addr string
}

// startBroker starts a broker, the one way the tests do: `statehost broker` (kfake), its
// address that of its broker_listening event; or, with STATEHOST_TEST_KAFKA=1 (unless o.kfake),
// an Apache Kafka cluster (scripts/kafka) of 3 nodes (STATEHOST_TEST_KAFKA_NODES=1: of 1), its
// address the first node's: the clients find the others from it. The test's cleanup kills the
// process (or stops the cluster), and logs its stderr when the test failed.
func startBroker(t testing.TB, o brokerOptions) *brokerProcess {
	t.Helper()
	if kafkacluster.Requested() && !o.kfake {
		c := kafkacluster.Start(t, kafkacluster.Nodes(t))
		return &brokerProcess{addr: c.Brokers()[0], cluster: c}
	}
	bin := buildBinary(t)
	if o.dir == "" {
		o.dir = t.TempDir()
	}
	if o.addr == "" {
		p, err := tryStartBroker(t, bin, o.dir, "127.0.0.1:0")
		if err != nil {
			t.Fatalf("statehost broker: %v", err)
		}
		return p
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		p, err := tryStartBroker(t, bin, o.dir, o.addr)
		if err == nil {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("statehost broker on %s: %v", o.addr, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// tryStartBroker is startBroker's start of `statehost broker` on addr with the data directory
// dir, which waits 20 s for its broker_listening event.
func tryStartBroker(t testing.TB, bin, dir, addr string) (*brokerProcess, error) {
	events := newEventLog(t)
	cmd := exec.Command(bin, "broker", "--listen", addr, "--data-dir", dir, "--log-json", "--events", events.path)
	p := &brokerProcess{cmd: cmd, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = &p.log, &p.log
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { p.done <- cmd.Wait() }()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if es := ofKinds(events.all(), eventBrokerListening); len(es) > 0 {
			p.addr = es[0].Addr
			break
		}
		select {
		case err := <-p.done:
			return nil, fmt.Errorf("exited before listening (%v): %s", err, strings.TrimSpace(p.log.String()))
		default:
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-p.done
			return nil, fmt.Errorf("wrote no broker_listening event within 20s")
		}
	}
	t.Cleanup(func() {
		events.check(t)
		if p.cmd.ProcessState == nil {
			p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("stderr of statehost broker (%s):\n%s", addr, p.log.String())
		}
	})
	return p, nil
}

// stop sends SIGTERM and returns the exit code: on a Kafka cluster, to every node, and 0 once
// they are gone (scripts/kafka down SIGKILLs a node still there after its timeout).
func (p *brokerProcess) stop(t testing.TB) int {
	t.Helper()
	if p.cluster != nil {
		p.cluster.Stop(t)
		return 0
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(20 * time.Second):
		t.Fatal("statehost broker did not exit within 20s of SIGTERM")
		return -1
	}
}

// freeAddr returns a 127.0.0.1 address with a port that was free a moment ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// halt stops the broker with sig (SIGTERM: a clean stop, exit 0; SIGKILL: death) and waits
// for its end.
func (p *brokerProcess) halt(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if sig == syscall.SIGTERM {
		if code := p.stop(t); code != 0 {
			t.Fatalf("statehost broker exited %d after SIGTERM, want 0", code)
		}
		return
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		t.Fatalf("statehost broker did not die within 20s of %v", sig)
	}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// testClient returns a client of the broker at addr with the options opts: the one way the
// tests make a client. The caller closes it.
func testClient(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// appProcess is `statehost run` running as a process, its logs JSON lines, its events in a
// file of its own.
type appProcess struct {
	name   string
	cmd    *exec.Cmd
	stderr syncBuffer
	evlog  *eventLog // its --events file
	done   chan struct{}
	code   int // the exit code once done is closed; -1 when a signal ended it

	logFile string // where a failed test writes stderr; "": the test log
}

// startApp starts `statehost run --config cfg --log-json --events FILE [args]`, FILE a new
// temporary file. Cleanup kills it if it still runs, checks that FILE holds only events, and
// logs its stderr (or writes it to p.logFile when set) if the test failed.
func startApp(t testing.TB, bin, cfg, name string, args ...string) *appProcess {
	t.Helper()
	p := &appProcess{name: name, done: make(chan struct{}), evlog: newEventLog(t)}
	p.cmd = exec.Command(bin, append([]string{"run", "--config", cfg, "--log-json", "--events", p.evlog.path}, args...)...)
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
		p.evlog.check(t)
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

// stopClean sends SIGTERM to the app and expects exit 0 after one stopped event without an
// error.
func stopClean(t *testing.T, app *appProcess) {
	t.Helper()
	if code := app.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("%s exited %d after SIGTERM, want 0", app.name, code)
	}
	if es := app.events(runtime.EventStopped); len(es) != 1 || es[0].Error != "" {
		t.Errorf("%s wrote the stopped events %+v, want one without an error", app.name, es)
	}
}

// kill sends SIGKILL to the app and waits for it to die.
func kill(t *testing.T, app *appProcess) {
	t.Helper()
	if code := app.stop(t, syscall.SIGKILL); code != -1 {
		t.Fatalf("%s exited %d after SIGKILL, want death by the signal", app.name, code)
	}
}

// instance is one statehost process of the word count among several: its directory (config
// and state) and the address of its admin listener.
type instance struct {
	*appProcess
	dir      string
	admin    string    // host:port
	killedAt time.Time // when it died of SIGKILL; zero: not killed
}

// startInstance writes the word-count configuration o, with an admin listener on a free port,
// into dir and starts it as a process; it returns once the admin listener is up. A failed test
// writes the instance's stderr to a file in the temporary directory (they are long).
func startInstance(t testing.TB, bin, addr, dir, name string, o appOptions) *instance {
	t.Helper()
	o.admin = true
	cfg := writeAppConfigWith(t, dir, addr, o)
	in := &instance{appProcess: startApp(t, bin, cfg, name), dir: dir}
	in.logFile = filepath.Join(os.TempDir(), strings.NewReplacer("/", "_", " ", "-", "=", "").Replace(t.Name()+"-"+name)+".log")
	in.admin = in.adminAddr(t)
	return in
}

// status returns the instance's GET /v1/status.
func (in *instance) status(t testing.TB) runtime.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+in.admin+"/v1/status", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: GET /v1/status: %v", in.name, err)
	}
	defer resp.Body.Close()
	var st runtime.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: GET /v1/status: %s: %v", in.name, resp.Status, err)
	}
	return st
}

// killNow sends SIGKILL to the instance and waits for its death.
func (in *instance) killNow(t testing.TB) {
	t.Helper()
	if err := in.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("%s: SIGKILL: %v", in.name, err)
	}
	if code := in.wait(t, 30*time.Second); code != -1 {
		t.Fatalf("%s exited %d after SIGKILL, want death by the signal", in.name, code)
	}
	in.killedAt = time.Now()
}

// producer writes batches of records to the broker in the background, the one background
// producer of the tests: a batch at once, then one every interval, until it runs out of
// batches, fails or is stopped. The test's cleanup stops it.
type producer struct {
	stopc chan struct{}
	once  sync.Once
	done  chan struct{} // closed once it ended; then err says why
	err   error         // nil: out of batches, or stopped

	mu     sync.Mutex
	acked  []*kgo.Record // acknowledged, batch after batch
	ranOut bool
	fails  int   // produce attempts that failed (with retry: that were tried again)
	last   error // the last of them
}

// producerOptions say how a producer writes.
type producerOptions struct {
	every time.Duration // from a batch to the next
	// timeout is how long a batch waits for its acknowledgement; 0: as long as the test runs.
	timeout time.Duration
	// retry: a batch that the broker does not acknowledge (it is away) is tried again, 200 ms
	// later, until it is or the producer is stopped. Otherwise the producer ends with the error.
	retry bool
	opts  []kgo.Opt // of its client, after the seed broker
}

// startProducer starts a producer of the batches that next returns, one a call, on the
// broker at addr; a batch of no record ends it.
func startProducer(t testing.TB, addr string, o producerOptions, next func() []*kgo.Record) *producer {
	t.Helper()
	ctx := t.Context()
	cl := testClient(t, addr, o.opts...)
	p := &producer{stopc: make(chan struct{}), done: make(chan struct{})}
	send := func(recs []*kgo.Record) error {
		pctx, cancel := ctx, context.CancelFunc(func() {})
		if o.timeout > 0 {
			pctx, cancel = context.WithTimeout(ctx, o.timeout)
		}
		defer cancel()
		return cl.ProduceSync(pctx, recs...).FirstErr()
	}
	go func() {
		defer close(p.done)
		defer cl.Close()
		tick := time.NewTicker(o.every)
		defer tick.Stop()
		for {
			recs := next()
			if len(recs) == 0 {
				p.mu.Lock()
				p.ranOut = true
				p.mu.Unlock()
				return
			}
			for {
				err := send(recs)
				if err == nil {
					break
				}
				p.mu.Lock()
				p.fails++
				p.last = err
				n := len(p.acked)
				p.mu.Unlock()
				if !o.retry {
					p.err = fmt.Errorf("producing %d records after the %d acknowledged: %w", len(recs), n, err)
					return
				}
				select {
				case <-p.stopc:
					return
				case <-time.After(200 * time.Millisecond):
				}
			}
			p.mu.Lock()
			p.acked = append(p.acked, recs...)
			p.mu.Unlock()
			select {
			case <-p.stopc:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(p.stop)
	return p
}

// records returns the records acknowledged so far, in the order of their batches.
func (p *producer) records() []*kgo.Record {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clip(p.acked)
}

// failures returns how many produce attempts failed so far, and the last one's error.
func (p *producer) failures() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fails, p.last
}

// stop stops the producer and waits for its end.
func (p *producer) stop() {
	p.once.Do(func() { close(p.stopc) })
	<-p.done
}

// wait waits for the producer to end by itself, out of batches, and returns the records
// acknowledged; it fails the test if the producer failed, or did not end within within (0:
// without a bound of its own).
func (p *producer) wait(t testing.TB, within time.Duration) []*kgo.Record {
	t.Helper()
	var timeout <-chan time.Time
	if within > 0 {
		timeout = time.After(within)
	}
	select {
	case <-p.done:
		if p.err != nil {
			t.Fatalf("producer: %v", p.err)
		}
	case <-timeout:
		t.Fatalf("the producer has not written every batch within %v", within)
	}
	return p.records()
}

// finish stops the producer and returns the records acknowledged; it fails the test if the
// producer failed, or did not stop within within.
func (p *producer) finish(t testing.TB, within time.Duration) []*kgo.Record {
	t.Helper()
	p.once.Do(func() { close(p.stopc) })
	select {
	case <-p.done:
		if p.err != nil {
			t.Fatalf("producer: %v", p.err)
		}
	case <-time.After(within):
		t.Fatalf("the producer did not stop within %v", within)
	}
	p.mu.Lock()
	ranOut := p.ranOut
	p.mu.Unlock()
	if ranOut {
		t.Logf("the producer ran out of records (%d) before it was stopped", len(p.records()))
	}
	return p.records()
}

// batchesOf returns the batches of size records of recs, in order, for startProducer.
func batchesOf(recs []*kgo.Record, size int) func() []*kgo.Record {
	return func() []*kgo.Record {
		n := min(size, len(recs))
		batch := recs[:n]
		recs = recs[n:]
		return batch
	}
}

// sentenceRecords returns lines as records of the topic sentences, without keys.
func sentenceRecords(lines []string) []*kgo.Record {
	recs := make([]*kgo.Record, len(lines))
	for i, l := range lines {
		recs[i] = &kgo.Record{Topic: "sentences", Value: []byte(l)}
	}
	return recs
}

// values returns the values of recs as strings.
func values(recs []*kgo.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.Value)
	}
	return out
}

// readChecked reads topic from its start to its end, read_committed or not, with
// topictest.Read, the one reader of what the processes wrote (it fails the test when the read
// takes more than 30 s), and on Apache Kafka checks the records against kcat's (kcatCheck) up
// to the end offsets (read_committed: last stable offsets) listed before the read.
func readChecked(t testing.TB, addr, topic string, committed bool) []*kgo.Record {
	t.Helper()
	var upTo map[int32]int64
	if kafkacluster.Requested() {
		offs := crashListOffsets(t, addr, topic)
		upTo = offs.end
		if committed {
			upTo = offs.stable
		}
	}
	recs := topictest.Read(t, []string{addr}, topic, committed)
	if upTo != nil {
		byPart := map[int32][]*kgo.Record{}
		for _, r := range recs {
			byPart[r.Partition] = append(byPart[r.Partition], r)
		}
		kcatCheck(t, addr, topic, committed, byPart, upTo)
	}
	return recs
}

// waitCounts waits until the latest values of topic equal want.
func waitCounts(t testing.TB, addr, topic string, want map[string]string) {
	t.Helper()
	topictest.WaitLatest(t, []string{addr}, topic, want, 90*time.Second)
}
