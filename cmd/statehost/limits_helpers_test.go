package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Helpers of the process tests of issue 21's size and memory limits (limits_test.go).

// limitsCommit is the commit interval of the apps of the limits tests.
const limitsCommit = 200 * time.Millisecond

// startHostile starts a broker, creates the topics in and out (2 partitions each), produces
// recs to in, and starts an app of one hostile processor p (in -> out, on_error onError, ""
// for the default) that commits every limitsCommit; it returns the broker and the app.
func startHostile(t *testing.T, onError string, recs ...keyed) (*brokerProcess, *appProcess) {
	t.Helper()
	bin := buildBinary(t)
	dir := t.TempDir()
	br := startBroker(t, brokerOptions{})
	createTopics(t, br.addr, map[string]int{"in": 2, "out": 2})
	app := hostileApp{commitInterval: limitsCommit, procs: []hostileProc{{name: "p", input: "in", output: "out", onError: onError}}}
	cfg := app.write(t, dir, br.addr)
	produceKeyed(t, br.addr, "in", recs...)
	return br, startApp(t, bin, cfg, "app")
}

// stopRunning fails the test if the app has exited, else stops it as stopClean does.
func (p *appProcess) stopRunning(t *testing.T) {
	t.Helper()
	if p.exited() {
		t.Fatalf("%s exited %d", p.name, p.code)
	}
	stopClean(t, p)
}

// metric returns the value of the sample of metric name whose labels are exactly labels (as
// written in the exposition, e.g. `processor="p",reason="error"`) on the admin listener at
// addr; 0 when there is no such sample (a counter that never moved).
func metric(t testing.TB, addr, name, labels string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	want := name + "{" + labels + "} "
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), want); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("metric %s: %v", want, err)
			}
			return f
		}
	}
	return 0
}

// waitMetric waits until metric (see metric) equals want; it fails the test if the app exits
// first, or after 90 s.
func (p *appProcess) waitMetric(t testing.TB, addr, name, labels string, want float64) {
	t.Helper()
	p.waitFor(t, 90*time.Second, fmt.Sprintf("%s{%s} = %v", name, labels, want), func() bool {
		return metric(t, addr, name, labels) == want
	})
}

// waitCommittedRunning waits until the group has committed the end offsets of topic on every
// partition that holds records (the commits after the bad records succeeded), failing at once
// if the app exits.
func (p *appProcess) waitCommittedRunning(t testing.TB, addr, group, topic string) {
	t.Helper()
	cl := testClient(t, addr)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ends := topicEnds(t, addr, topic)
	p.waitFor(t, 90*time.Second, "the offsets of "+topic+" committed to their end", func() bool {
		resp, err := adm.FetchOffsets(t.Context(), group)
		if err != nil {
			return false
		}
		for part, end := range ends {
			if o, ok := resp.Lookup(topic, part); end > 0 && (!ok || o.Err != nil || o.At != end) {
				return false
			}
		}
		return true
	})
}

// header returns the value of r's header key, and whether it has one.
func header(r *kgo.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

// peakRSS returns the peak resident set size of the process pid (VmHWM), in bytes.
func peakRSS(t testing.TB, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("reading the status of process %d: %v", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("process %d: no VmHWM in its status", pid)
	return 0
}

// alterTopicConfig sets one config of topic on the broker at addr.
func alterTopicConfig(t testing.TB, addr, topic, key, value string) {
	t.Helper()
	cl := testClient(t, addr)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: key, Value: kadm.StringPtr(value)}}, topic)
	if err == nil {
		var r kadm.AlterConfigsResponse
		if r, err = resp.On(topic, nil); err == nil {
			err = r.Err
		}
	}
	if err != nil {
		t.Fatalf("set %s=%s on %s: %v", key, value, topic, err)
	}
}
