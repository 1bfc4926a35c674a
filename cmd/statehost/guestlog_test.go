package main

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/statehost/statehost/pluginsdk/wasmbuild"
)

// maxNoisyStderr is the most the app may write to stderr in TestGuestLogFlood: the guest
// log's burst (1000 lines) and rate (100 lines a second) for the second or so the flood takes,
// about 200 bytes a JSON line, and the app's own lines, with room to spare. Unlimited, the
// 2,000,000 lines were about 300 MB.
const maxNoisyStderr = 1 << 20

// TestGuestLogFlood runs a record that logs 1,000,000 lines and one that writes 1,000,000
// lines to stderr (issue 21, case 7): the app's stderr stays below maxNoisyStderr, the lines
// the rate limit dropped are counted in statehost_guest_log_lines_dropped_total (with the
// lines logged, every one of the 2,000,000 is accounted for), and the processor goes on
// counting the healthy records after them, exactly.
func TestGuestLogFlood(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	br := startBroker(t, brokerOptions{})
	createTopics(t, br.addr, map[string]int{"in": 2, "out": 2})
	app := hostileApp{procs: []hostileProc{{name: "p", input: "in", output: "out"}}}
	cfg := app.write(t, dir, br.addr)
	p := startApp(t, bin, cfg, "app")
	admin := p.adminAddr(t)

	produceKeyed(t, br.addr, "in",
		keyed{"a", "", 0}, keyed{"noisy", "log 1000000", 0}, keyed{"noisy", "print 1000000", 0},
		keyed{"a", "", 0}, keyed{"b", "", 1}, keyed{"a", "x", 0}, keyed{"b", "", 1})
	waitCounts(t, br.addr, "out", map[string]string{"a": "3", "b": "2", "noisy": "2"})

	// The lines dropped and the lines logged are the 2,000,000 the guest wrote.
	logged := func() int {
		n := 0
		for _, l := range p.logLines() {
			if strings.HasPrefix(l.Message, "hostile log line ") || strings.HasPrefix(l.Message, "hostile stderr line ") {
				n++
			}
		}
		return n
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		dropped := scrapeCounter(t, admin, "statehost_guest_log_lines_dropped_total", "processor", "p")
		if n := logged(); int(dropped)+n == 2_000_000 {
			t.Logf("%d guest lines logged, %v dropped; stderr %d bytes", n, dropped, len(p.stderr.String()))
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("%v guest lines dropped and %d logged, want 2000000 together", dropped, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if n := len(p.stderr.String()); n > maxNoisyStderr {
		t.Errorf("the app wrote %d bytes to stderr, want at most %d", n, maxNoisyStderr)
	}
	stopClean(t, p)
}

// scrapeCounter reads GET /metrics on the admin listener at addr and returns the counter name
// of the series with the label (one name and value), or 0 if there is none.
func scrapeCounter(t testing.TB, addr, name, label, value string) float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	for _, m := range fams[name].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == label && l.GetValue() == value {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestGoCrashOneEntry runs a Go guest (the engine's goprobe) whose record writes 100 lines to
// stderr and then panics (issue 21, case 7): under on_error = "skip" the app logs the crash
// dump as one ERROR entry, with the panic and the first lines of the stack, instead of a WARN
// entry for each of its lines, and goes on with the next record.
func TestGoCrashOneEntry(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	mod := filepath.Join(dir, "goprobe.wasm")
	if err := wasmbuild.Go(t.Context(), filepath.Join("..", "..", "host", "engine", "testdata", "goprobe"), mod); err != nil {
		t.Fatal(err)
	}
	br := startBroker(t, brokerOptions{})
	createTopics(t, br.addr, map[string]int{"in": 1, "out": 1})
	app := hostileApp{procs: []hostileProc{{name: "p", input: "in", output: "out", onError: "skip", module: mod, store: "s"}}}
	p := startApp(t, bin, app.write(t, dir, br.addr), "app")
	produceKeyed(t, br.addr, "in", keyed{"x", "noisypanic 100", 0}, keyed{"x", "big 7", 0})
	waitCounts(t, br.addr, "out", map[string]string{"key": "7"})
	stopClean(t, p) // every line the app wrote is read then

	var noise, crashes, other int
	var crash string
	for _, e := range p.logLines() {
		if e.Stream != "stderr" {
			continue
		}
		switch {
		case strings.HasPrefix(e.Message, "goprobe noise line "):
			noise++
		case e.Level == "error" && strings.HasPrefix(e.Message, "panic: boom after the noise"):
			crashes++
			crash = e.Crash
		default:
			other++
			t.Logf("stderr entry: %s", e.raw)
		}
	}
	if noise != 100 || crashes != 1 || other != 0 {
		t.Fatalf("guest stderr: %d noise entries, %d crash entries, %d others; want 100, 1 and 0", noise, crashes, other)
	}
	if !strings.Contains(crash, "goroutine 1 ") {
		t.Errorf("crash entry %q: want the first lines of the stack", crash)
	}
}
