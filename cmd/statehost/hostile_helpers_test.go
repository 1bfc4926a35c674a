package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/pluginsdk/wasmbuild"
)

// The process tests of bad records run the hostile guest (testdata/hostile/hostile.c): it
// counts healthy records like count_c, and a record's value can make it loop, write or emit
// too much, log without end, fail or trap.

var rewrite = flag.Bool("rewrite", false, "rewrite the checked-in builds of the test guests from their sources")

const hostileSource = "testdata/hostile/hostile.c"
const hostilePrebuilt = "testdata/hostile/hostile.wasm"

var (
	hostileOnce sync.Once
	hostilePath string
	hostileErr  error
)

// hostileModule returns the path of the hostile guest: built from its source where clang is
// present (into the test binary's directory), else the checked-in build.
func hostileModule(t testing.TB) string {
	t.Helper()
	buildBinary(t)
	hostileOnce.Do(func() {
		if !wasmbuild.HaveClang() {
			hostilePath, hostileErr = filepath.Abs(hostilePrebuilt)
			return
		}
		hostilePath = filepath.Join(binaryDir, "hostile.wasm")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		hostileErr = wasmbuild.C(ctx, hostileSource, hostilePath, filepath.Join("..", "..", "abi"))
	})
	if hostileErr != nil {
		t.Fatal(hostileErr)
	}
	return hostilePath
}

// TestHostilePrebuiltCurrent checks that the checked-in build of the hostile guest matches its
// source (where clang is present); -rewrite refreshes it.
func TestHostilePrebuiltCurrent(t *testing.T) {
	if !wasmbuild.HaveClang() {
		t.Skip("clang for wasm32-wasi not found")
	}
	fresh, err := os.ReadFile(hostileModule(t))
	if err != nil {
		t.Fatal(err)
	}
	if *rewrite {
		if err := os.WriteFile(hostilePrebuilt, fresh, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	old, err := os.ReadFile(hostilePrebuilt)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fresh, old) {
		t.Errorf("%s is stale: run go test ./cmd/statehost -run TestHostilePrebuiltCurrent -rewrite", hostilePrebuilt)
	}
}

// hostileApp is an application of processors that run the hostile guest.
type hostileApp struct {
	id             string // application_id; "": "hostile"
	admin          string // admin listen address; "": a free port of 127.0.0.1 (write sets it)
	guarantee      string // processing_guarantee; "": the default
	commitInterval time.Duration
	topics         map[string]int // topic blocks: name -> partitions
	procs          []hostileProc
	top            string // more top-level settings, as HCL
}

// hostileProc is a processor of a hostileApp: it reads input, emits to output and counts in
// its store counts<i>, i its place in hostileApp.procs from 1.
type hostileProc struct {
	name, input, output string
	onError             string // on_error; "": the default (fail)
	extra               string // more settings of the processor block, as HCL
	module, store       string // another module and its store; "": the hostile guest and counts<i>
}

func (a hostileApp) appID() string {
	if a.id == "" {
		return "hostile"
	}
	return a.id
}

// write writes the configuration for the broker at addr into dir as app.hcl and returns its
// path; the state directory is dir/state.
func (a *hostileApp) write(t *testing.T, dir, addr string) string {
	t.Helper()
	mod := hostileModule(t)
	if a.admin == "" {
		a.admin = freeAddr(t)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "application_id = %q\nstate_dir = %q\n", a.appID(), filepath.Join(dir, "state"))
	if a.guarantee != "" {
		fmt.Fprintf(&b, "processing_guarantee = %q\n", a.guarantee)
	}
	if a.commitInterval > 0 {
		fmt.Fprintf(&b, "commit_interval = %q\n", a.commitInterval.String())
	}
	b.WriteString(a.top)
	fmt.Fprintf(&b, "\nkafka {\n  brokers = [%q]\n}\nadmin {\n  listen = %q\n}\n", addr, a.admin)
	for name, n := range a.topics {
		fmt.Fprintf(&b, "topic %q {\n  partitions = %d\n}\n", name, n)
	}
	for i, p := range a.procs {
		module, store := mod, fmt.Sprintf("counts%d", i+1)
		if p.module != "" {
			module, store = p.module, p.store
		}
		fmt.Fprintf(&b, "processor %q {\n  module = %q\n  inputs = [%q]\n  outputs = [%q]\n", p.name, module, p.input, p.output)
		if p.onError != "" {
			fmt.Fprintf(&b, "  on_error = %q\n", p.onError)
		}
		fmt.Fprintf(&b, "%s\n  store %q {}\n}\n", p.extra, store)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "app.hcl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// createTopics creates the topics (name -> partitions) on the broker at addr.
func createTopics(t testing.TB, addr string, topics map[string]int) {
	t.Helper()
	cl := testClient(t, addr)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	for name, n := range topics {
		resp, err := adm.CreateTopic(ctx, int32(n), 1, nil, name)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatalf("create topic %s: %v", name, err)
		}
	}
}

// keyed is a record to produce: its key, value and partition.
type keyed struct {
	key, value string
	partition  int32
}

// produceKeyed produces recs to topic, each to its partition, and waits for their
// acknowledgements.
func produceKeyed(t testing.TB, addr, topic string, recs ...keyed) {
	t.Helper()
	cl := testClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(16<<20))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	rs := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		rs[i] = &kgo.Record{Topic: topic, Partition: r.partition, Key: []byte(r.key), Value: []byte(r.value)}
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}

// metricSum scrapes GET /metrics of the admin listener at admin and returns the sum of the
// series of the counter or gauge name whose labels have the values of labelValues (name,
// value, name, value...); an error when the listener does not answer (not up yet).
func metricSum(admin, name string, labelValues ...string) (float64, error) {
	resp, err := http.Get("http://" + admin + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("GET /metrics: %w", err)
	}
	var sum float64
	for _, m := range fams[name].GetMetric() {
		ok := true
		for i := 0; i+1 < len(labelValues); i += 2 {
			found := false
			for _, l := range m.GetLabel() {
				found = found || l.GetName() == labelValues[i] && l.GetValue() == labelValues[i+1]
			}
			ok = ok && found
		}
		if ok {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum, nil
}
