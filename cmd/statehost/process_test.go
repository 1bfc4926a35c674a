package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

	"github.com/statehost/statehost/internal/kafkacluster"
)

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

// brokerProcess is `statehost broker` running as a process.
type brokerProcess struct {
	cmd  *exec.Cmd
	addr string
	done chan error
	log  syncBuffer // its stderr, logged when the test fails

	cluster *kafkacluster.Cluster // instead of the process, with STATEHOST_TEST_KAFKA=1
}

// startBrokerProcess starts the test's broker: `statehost broker` on a free port with dir,
// once it logged "broker listening"; or, with STATEHOST_TEST_KAFKA=1, an Apache Kafka
// cluster (scripts/kafka) of 3 nodes (STATEHOST_TEST_KAFKA_NODES=1: of 1), its address the
// first broker's: the clients find the others from it.
func startBrokerProcess(t testing.TB, bin, dir string) *brokerProcess {
	t.Helper()
	if kafkacluster.Requested() {
		c := kafkacluster.Start(t, kafkacluster.Nodes(t))
		return &brokerProcess{addr: c.Brokers()[0], cluster: c}
	}
	return startStatehostBroker(t, bin, dir)
}

// startStatehostBroker starts `statehost broker` on a free port with dir and waits for its
// "broker listening" log line, whatever broker the other tests use: for the tests of the
// command itself.
func startStatehostBroker(t testing.TB, bin, dir string) *brokerProcess {
	t.Helper()
	p, err := tryStartBroker(t, bin, dir, "127.0.0.1:0")
	if err != nil {
		t.Fatalf("statehost broker: %v", err)
	}
	return p
}

// tryStartBroker starts `statehost broker` on addr with the data directory dir and waits for
// its "broker listening" log line (of that directory). The test's cleanup kills it, and logs
// its stderr when the test failed.
func tryStartBroker(t testing.TB, bin, dir, addr string) (*brokerProcess, error) {
	cmd := exec.Command(bin, "broker", "--listen", addr, "--data-dir", dir, "--log-json")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &brokerProcess{cmd: cmd, done: make(chan error, 1)}
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			fmt.Fprintf(&p.log, "%s\n", sc.Bytes())
			var line struct {
				Message string `json:"@message"`
				Addr    string `json:"addr"`
				DataDir string `json:"data_dir"`
			}
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Message == "broker listening" && line.DataDir == dir {
				listening <- line.Addr
			}
		}
		io.Copy(&p.log, stderr)
		p.done <- cmd.Wait()
	}()
	select {
	case p.addr = <-listening:
	case err := <-p.done:
		return nil, fmt.Errorf("exited before listening (%v): %s", err, strings.TrimSpace(p.log.String()))
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		<-p.done
		return nil, fmt.Errorf("did not log \"broker listening\" within 20s")
	}
	t.Cleanup(func() {
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

func TestBrokerProcessRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the statehost program")
	}
	bin := buildBinary(t)
	dir := filepath.Join(t.TempDir(), "broker-data") // created by the broker
	ctx := testContext(t)

	p := startStatehostBroker(t, bin, dir)
	cl := testClient(t, p.addr)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, "kept"); err != nil {
		t.Fatal(err)
	}
	const n = 20
	for i := range n {
		rec := &kgo.Record{Topic: "kept", Key: fmt.Appendf(nil, "k%d", i%3), Value: fmt.Appendf(nil, "%d", i)}
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()
	if code := p.stop(t); code != 0 {
		t.Fatalf("statehost broker exited %d after SIGTERM, want 0", code)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("data dir: %v", err)
	}

	p = startStatehostBroker(t, bin, dir)
	recs := readAll(t, p.addr, "kept", n)
	seen := map[string]bool{}
	for _, r := range recs {
		seen[string(r.Value)] = true
	}
	for i := range n {
		if !seen[fmt.Sprint(i)] {
			t.Errorf("record %d lost across the restart", i)
		}
	}
	// The CLI reads them too.
	r := runCLI(ctx, "", "consume", "--brokers", p.addr, "kept")
	if r.code != 0 || len(sortedLines(r.stdout)) != n {
		t.Errorf("consume after restart: %v", r)
	}
	if code := p.stop(t); code != 0 {
		t.Errorf("second run exited %d after SIGTERM, want 0", code)
	}
}

// A second broker process on a data dir in use fails with exit 1 and says why.
func TestBrokerProcessLock(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the statehost program")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	p := startStatehostBroker(t, bin, dir)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "broker", "--listen", "127.0.0.1:0", "--data-dir", dir).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "is used by another broker") {
		t.Errorf("second broker on %s: %v\n%s", dir, err, out)
	}
	if code := p.stop(t); code != 0 {
		t.Errorf("exit %d after SIGTERM, want 0", code)
	}
}
