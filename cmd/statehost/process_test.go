package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/internal/topictest"
)

func TestBrokerProcessRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the statehost program")
	}
	dir := filepath.Join(t.TempDir(), "broker-data") // created by the broker
	ctx := testContext(t)

	p := startBroker(t, brokerOptions{kfake: true, dir: dir})
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

	p = startBroker(t, brokerOptions{kfake: true, dir: dir})
	recs := topictest.Read(t, []string{p.addr}, "kept", false)
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
	p := startBroker(t, brokerOptions{kfake: true, dir: dir})
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
