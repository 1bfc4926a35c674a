package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/statehost/statehost/changelog"
	"github.com/statehost/statehost/host/engine"
	"github.com/statehost/statehost/internal/topictest"
)

// slowHCL is count over the topic words, skipping poison records.
const slowHCL = `
application_id  = "slow"
commit_interval = "200ms"
admin { listen = "" }
topic "words" {
  partitions = 1
}
processor "count" {
  module   = "{{count}}"
  inputs   = ["words"]
  outputs  = ["counts"]
  on_error = "skip"
  store "counts" {}
}
`

// TestSlowBrokerNotChargedToBatches is the acceptance test of the waits for room in the
// producer: they are not charged to the plugin's batch time limit. A runtime whose producer
// may have 10 records in flight (kgo.MaxBufferedRecords 11) and whose batches have 300ms runs
// count with on_error = "skip", while the broker (kfake, in process) holds the produce
// requests of the changelog and the output for 1.5s, as a slow or unreachable broker does:
// the plugin's writes and emits wait for room far longer than the limit. No record may be
// skipped, or retried as if it had timed out, the runtime must go on, and the counts in the
// output and the changelog must be exact.
func TestSlowBrokerNotChargedToBatches(t *testing.T) {
	const (
		batchTimeout = 300 * time.Millisecond
		stall        = 1500 * time.Millisecond
	)
	c, brokers := kfakeCluster(t)
	cfg := loadConfig(t, t.TempDir(), slowHCL)
	logs := &syncBuffer{}
	in := start(t, cfg, brokers, func(o *Options) {
		o.NoWatch = true
		o.batchTimeout = batchTimeout
		// With the count plugin and on_error = "skip" (emits held until the next record), the
		// 11th record a batch reserves is an emit, the one after it a store write.
		o.producerOpts = []kgo.Opt{kgo.MaxBufferedRecords(11)}
		o.Logger = hclog.New(&hclog.LoggerOptions{Name: "test", Level: hclog.Warn,
			Output: io.MultiWriter(testWriter{t}, logs)})
	})
	cl, adm := client(t, brokers)
	produceKeyed(t, cl, "words", []string{"warm"})
	topictest.WaitLatest(t, brokers, "counts", map[string]string{"warm": "1"}, 30*time.Second)

	// From now on the broker holds the runtime's produce requests until the stall ends.
	held := holdProduces(t, c, adm, "words", time.Now().Add(stall))

	var keys []string
	ref := map[string]int{"warm": 1}
	for i := range 60 { // 120 records to produce: 12 times the room
		k := fmt.Sprintf("w%d", i%7)
		keys = append(keys, k)
		ref[k]++
	}
	produceKeyed(t, cl, "words", keys)
	want := map[string]string{}
	for k, n := range ref {
		want[k] = fmt.Sprint(n)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		select {
		case err := <-in.done:
			in.done <- err // for in.stop
			t.Fatalf("the runtime stopped: %v", err)
		default:
		}
		got, _ := latest(t, brokers, "counts")
		if maps.Equal(got, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("counts: %v, want %v", got, want)
		}
	}
	if got, _ := latest(t, brokers, "slow-counts-changelog"); !maps.Equal(got, want) {
		t.Errorf("changelog: %v, want %v", got, want)
	}
	if held.Load() == 0 {
		t.Fatal("the broker held no produce: the test shows nothing")
	}
	m := in.rt.metrics
	if n := skippedTotal(t, m.skips); n != 0 {
		t.Errorf("statehost_records_skipped_total = %v, want 0: records were skipped because the broker was slow", n)
	}
	if s := logs.String(); strings.Contains(s, "trying it again alone") || strings.Contains(s, "poison record") {
		t.Errorf("records were taken for poison because the broker was slow:\n%s", s)
	}
	// A batch lasted far longer than its limit, and succeeded (only those are observed).
	var hm dto.Metric
	if err := m.proc("count").batch.(prometheus.Histogram).Write(&hm); err != nil {
		t.Fatal(err)
	}
	h := hm.GetHistogram()
	slow := h.GetSampleCount() // observations above the last bucket at most 3 limits
	for _, b := range h.GetBucket() {
		if b.GetUpperBound() <= 3*batchTimeout.Seconds() {
			slow = h.GetSampleCount() - b.GetCumulativeCount()
		}
	}
	if slow == 0 {
		t.Errorf("no batch took longer than %v: the producer did not make the plugin wait", 3*batchTimeout)
	}
}

// TestNoRoomStopsRuntime checks the bound of a wait for room: a plugin call whose emit or
// store write finds no room among the producer's records in flight for the producer's wait
// limit (here 500ms, 5 minutes by default) fails with an error that names the topic, the
// partition and the limit of records in flight; that is not a poison record (on_error =
// "skip" skips nothing): the runtime stops with it.
func TestNoRoomStopsRuntime(t *testing.T) {
	if changelog.DefaultWaitLimit != brokerRetryLimit {
		t.Errorf("changelog.DefaultWaitLimit (exactly-once's producer) is %v, brokerRetryLimit %v", changelog.DefaultWaitLimit, brokerRetryLimit)
	}
	const waitLimit = 500 * time.Millisecond
	c, brokers := kfakeCluster(t)
	cfg := loadConfig(t, t.TempDir(), slowHCL)
	logs := &syncBuffer{}
	in := start(t, cfg, brokers, func(o *Options) {
		o.NoWatch = true
		o.batchTimeout = 300 * time.Millisecond
		o.producerOpts = []kgo.Opt{kgo.MaxBufferedRecords(11)}
		o.producerWaitLimit = waitLimit
		o.Logger = hclog.New(&hclog.LoggerOptions{Name: "test", Level: hclog.Warn,
			Output: io.MultiWriter(testWriter{t}, logs)})
	})
	cl, adm := client(t, brokers)
	produceKeyed(t, cl, "words", []string{"warm"})
	topictest.WaitLatest(t, brokers, "counts", map[string]string{"warm": "1"}, 30*time.Second)

	// The broker holds the runtime's produces for longer than the wait limit; the runtime's
	// shutdown waits for them.
	holdProduces(t, c, adm, "words", time.Now().Add(5*waitLimit))
	began := time.Now()
	produceKeyed(t, cl, "words", strings.Fields(strings.Repeat("a b c ", 10)))
	var err error
	select {
	case err = <-in.done:
		in.done <- err // for in.stop
	case <-time.After(20 * time.Second):
		t.Fatal("the runtime did not stop after its producer had no room for longer than the wait limit")
	}
	t.Logf("Run: %v", err)
	if took := time.Since(began); took < waitLimit {
		t.Errorf("the runtime stopped after %v, before the wait limit (%v)", took, waitLimit)
	}
	if !errors.Is(err, changelog.ErrNoRoom) || !(errors.Is(err, engine.ErrEmit) || errors.Is(err, engine.ErrStore)) ||
		errors.Is(err, engine.ErrTimeout) || !strings.Contains(err.Error(), "partition 0: waiting for room among the producer's 10 records in flight") ||
		!(strings.Contains(err.Error(), "output to counts ") || strings.Contains(err.Error(), "write to slow-counts-changelog ")) {
		t.Fatalf("Run: %v; want ErrNoRoom as an emit or store failure naming the topic, partition 0 and the limit of 10 records", err)
	}
	if n := skippedTotal(t, in.rt.metrics.skips); n != 0 {
		t.Errorf("statehost_records_skipped_total = %v, want 0", n)
	}
	if s := logs.String(); strings.Contains(s, "trying it again alone") || strings.Contains(s, "poison record") {
		t.Errorf("a record was taken for poison because the producer had no room:\n%s", s)
	}
}

// holdProduces makes the broker c hold every produce request but those to the topic pass (the
// test's own input) until until, and returns the count of the requests it held.
func holdProduces(t *testing.T, c *kfake.Cluster, adm *kadm.Client, pass string, until time.Time) *atomic.Int32 {
	t.Helper()
	// Requests of version 13 name their topics by id.
	topics, err := adm.ListTopics(context.Background(), pass)
	if err != nil || topics[pass].Err != nil {
		t.Fatalf("topic %s: %v %v", pass, err, topics[pass].Err)
	}
	passID := [16]byte(topics[pass].ID)
	held := &atomic.Int32{}
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		for _, tp := range req.(*kmsg.ProduceRequest).Topics {
			if tp.Topic == pass || tp.TopicID == passID {
				return nil, nil, false
			}
		}
		if d := time.Until(until); d > 0 {
			held.Add(1)
			c.SleepControl(func() { time.Sleep(d) })
		}
		return nil, nil, false
	})
	return held
}

// skippedTotal sums statehost_records_skipped_total over its series.
func skippedTotal(t *testing.T, vec *prometheus.CounterVec) float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 64)
	vec.Collect(ch)
	close(ch)
	total := 0.0
	for metric := range ch {
		var m dto.Metric
		if err := metric.Write(&m); err != nil {
			t.Fatal(err)
		}
		total += m.GetCounter().GetValue()
	}
	return total
}

// TestPoisonReasonNoRoom: a failure with changelog.ErrNoRoom in its chain (a write or an emit
// that found no room for the producer's wait limit) is never poison, whatever the guest did
// after it; the same failure without it is.
func TestPoisonReasonNoRoom(t *testing.T) {
	noRoom := fmt.Errorf("%w: store %q: put: %w", engine.ErrStore, "counts", fmt.Errorf("changelog: write to x partition 0: %w", changelog.ErrNoRoom))
	for _, kind := range []error{engine.ErrPanic, engine.ErrTrap, engine.ErrGuestFailed, engine.ErrTimeout, engine.ErrStore} {
		ge := &engine.GuestError{Kind: kind, Offset: 7, Err: errors.Join(errors.New("wasm error: unreachable"), noRoom)}
		if _, reason, ok := PoisonReason(ge); ok {
			t.Errorf("%v after a write that found no room: poison (%s)", kind, reason)
		}
	}
	if _, reason, ok := PoisonReason(&engine.GuestError{Kind: engine.ErrPanic, Offset: 7, Err: errors.New("panic")}); !ok || reason != "panic" {
		t.Errorf("a panic alone: reason %q, poison %v; want panic, poison", reason, ok)
	}
}
