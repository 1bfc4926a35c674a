package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/statehost/statehost/host/runtime"
	"github.com/statehost/statehost/internal/wordgen"
)

// TestQueryAndStatusCommands: two instances share the word count; statehost query through the
// first instance's admin listener prints every word's count, whichever instance runs its task
// (the other's are redirected), and exits 1 for an absent key; with --partition it reads the
// partition it names; statehost status prints the
// first instance's tasks and processors.
func TestQueryAndStatusCommands(t *testing.T) {
	bin := buildBinary(t)
	broker := startBroker(t, brokerOptions{})
	a := startInstance(t, bin, broker.addr, t.TempDir(), "a", appOptions{commitInterval: 200 * time.Millisecond})
	b := startInstance(t, bin, broker.addr, t.TempDir(), "b", appOptions{commitInterval: 200 * time.Millisecond})
	lines, ref := wordgen.Sentences(300, 41)
	produceLines(t, bin, broker.addr, "sentences", lines)
	waitCounts(t, broker.addr, "word-counts", wordgen.Strings(ref))
	runsCount := func(st runtime.Status) int {
		n := 0
		for _, ts := range st.Tasks {
			if ts.Processor == "count" && ts.State == "running" {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(60 * time.Second)
	for runsCount(a.status(t)) == 0 || runsCount(b.status(t)) == 0 || runsCount(a.status(t))+runsCount(b.status(t)) != 3 {
		if time.Now().After(deadline) {
			t.Fatal("the count tasks are not shared by the two instances")
		}
		time.Sleep(200 * time.Millisecond)
	}

	// A's configuration, with the port its admin listener got.
	src, err := os.ReadFile(filepath.Join(a.dir, "app.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(a.dir, "query.hcl")
	if err := os.WriteFile(cfg, []byte(strings.Replace(string(src), `"127.0.0.1:0"`, strconv.Quote(a.admin), 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	for w, n := range ref {
		var res result
		// A count is read once committed: retried for a minute (a busy machine commits late).
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
			if res = runCLI(t.Context(), "", "query", "--config", cfg, "counts", w); res.code == 0 && res.stdout == strconv.Itoa(n) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if res.code != 0 || res.stdout != strconv.Itoa(n) {
			t.Fatalf("statehost query counts %s: %s; want %d", w, res, n)
		}
	}
	if res := runCLI(t.Context(), "", "query", "--config", cfg, "counts", "no-such-word"); res.code != 1 || !strings.Contains(res.stderr, "no key") {
		t.Errorf("an absent key: %s; want exit 1 and a message", res)
	}
	// --partition reads the partition it names: the key's own, or another that lacks it.
	for w, n := range ref {
		part := runtime.KeyPartition([]byte(w), 3, 0)
		if res := runCLI(t.Context(), "", "query", "--config", cfg, "--partition", strconv.Itoa(int(part)), "counts", w); res.code != 0 || res.stdout != strconv.Itoa(n) {
			t.Errorf("statehost query --partition %d counts %s: %s; want %d", part, w, res, n)
		}
		other := strconv.Itoa(int(part+1) % 3)
		if res := runCLI(t.Context(), "", "query", "--config", cfg, "--partition", other, "counts", w); res.code != 1 || !strings.Contains(res.stderr, "partition "+other) {
			t.Errorf("statehost query --partition %s counts %s: %s; want exit 1, not in that partition", other, w, res)
		}
		break
	}
	res := runCLI(t.Context(), "", "status", "--config", cfg)
	if res.code != 0 || !strings.Contains(res.stdout, "running") || !strings.Contains(res.stdout, "PROCESSOR") || !strings.Contains(res.stdout, "count_") {
		t.Errorf("statehost status: %s", res)
	}
}
