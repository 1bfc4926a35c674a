package runtime

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/changelog"
	"github.com/statehost/statehost/config"
	"github.com/statehost/statehost/internal/broker"
	"github.com/statehost/statehost/store"
)

// The broker-outage tests of the program (cmd/statehost, -outage) take the broker away for
// 10 s; these check the pieces quickly: which errors are worth a retry, the backoff and its
// limit, and a restore that meets a broker that refuses connections.

// deadBroker returns the address of a port that refuses connections.
func deadBroker(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// openRestoreTask opens task count_0 with the logged store "counts" in a new state directory,
// producing to brokers, and a restorer of brokers configured as the runtime's.
func openRestoreTask(t *testing.T, brokers []string) (*changelog.Task, *Runtime) {
	t.Helper()
	m, err := store.Open(store.Settings{Dir: t.TempDir(), MemoryBytes: store.MinMemoryBytes})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	cl, err := kgo.NewClient(append(producerOpts(config.DefaultKafka("app")), kgo.SeedBrokers(brokers...))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	p, err := changelog.NewProducer(cl)
	if err != nil {
		t.Fatal(err)
	}
	task, err := changelog.OpenTask(m, p, changelog.TaskConfig{AppID: "app", Processor: "count", Partition: 0,
		Stores: []changelog.StoreSpec{{Name: "counts"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { task.Close(context.Background()) })
	r := &Runtime{opts: Options{Brokers: brokers, Logger: hclog.NewNullLogger()}, log: hclog.NewNullLogger()}
	return task, r
}

// TestRestoreRetriedWhileBrokerAway: a restore against a broker that refuses connections fails
// with an error that the runtime retries, after 250ms, then 500ms, ... at most 2s, for
// brokerRetryLimit; then it gives up. An error of the store is not retried.
func TestRestoreRetriedWhileBrokerAway(t *testing.T) {
	brokers := []string{deadBroker(t)}
	task, r := openRestoreTask(t, brokers)
	restorerCfg := loadConfig(t, t.TempDir(), `
application_id = "app"
admin { listen = "" }
processor "count" {
  module = "{{count}}"
  inputs = ["words"]
  store "counts" {}
}
`)
	r.cfg = restorerCfg
	rcl, restorer, err := r.newRestorer("restore", nil, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer rcl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rerr := restorer.Restore(ctx, task)
	if rerr == nil || ctx.Err() != nil {
		t.Fatalf("restore against a dead broker: %v (context: %v)", rerr, ctx.Err())
	}
	t.Logf("restore: %v", rerr)
	var waits []time.Duration
	for range 6 {
		before := time.Now()
		if !r.retryRestoreLater(rerr) {
			t.Fatalf("the restore's error %v is not retried", rerr)
		}
		waits = append(waits, r.restoreRetryAt.Sub(before).Round(50*time.Millisecond))
	}
	want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 2 * time.Second, 2 * time.Second}
	for i := range want {
		if waits[i] != want[i] {
			t.Fatalf("waits %v, want %v", waits, want)
		}
	}
	r.restoreRetry.since = time.Now().Add(-brokerRetryLimit)
	if r.retryRestoreLater(rerr) {
		t.Errorf("the restore is retried after failing for %v", brokerRetryLimit)
	}

	// A broker that answers, and a store that fails: not retried.
	brokers = cluster(t)
	_, adm := client(t, brokers)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, changelog.TopicName("app", "counts")); err != nil {
		t.Fatal(err)
	}
	task, r = openRestoreTask(t, brokers)
	r.cfg = restorerCfg
	rcl, restorer, err = r.newRestorer("restore", nil, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer rcl.Close()
	if err := task.StoreTask().Close(); err != nil {
		t.Fatal(err)
	}
	serr := restorer.Restore(ctx, task)
	if serr == nil || !errors.Is(serr, store.ErrClosed) || r.retryRestoreLater(serr) {
		t.Errorf("a restore that failed on its store (%v) is retried, or did not fail on it", serr)
	}
}

// TestUnavailable: what the runtime retries while the broker is away, and what it does not.
func TestUnavailable(t *testing.T) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(deadBroker(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, dialErr := kadm.NewClient(cl).ListEndOffsets(ctx, "words")
	if dialErr == nil || !strings.Contains(dialErr.Error(), "refused") {
		t.Fatalf("offsets from a dead broker: %v, want a refused connection", dialErr)
	}
	for _, c := range []struct {
		err  error
		want bool
	}{
		{dialErr, true},
		{errors.Join(errors.New("runtime: rejoin"), dialErr), true},
		{kerr.CoordinatorNotAvailable, true},
		{kerr.NotLeaderForPartition, true},
		{kerr.CoordinatorLoadInProgress, true},
		{context.DeadlineExceeded, true}, // an attempt's own deadline
		{kerr.ProducerFenced, false},
		{kerr.TopicAuthorizationFailed, false},
		{kerr.InvalidTxnState, false},
		{context.Canceled, false},
		{kgo.ErrClientClosed, false},
		{store.ErrClosed, false},
		{nil, false},
	} {
		if got := unavailable(c.err); got != c.want {
			t.Errorf("unavailable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	var b brokerRetry
	if _, ok := b.next(kerr.ProducerFenced); ok || b.attempts != 0 {
		t.Errorf("a fenced producer is retried (attempts %d)", b.attempts)
	}
}

// TestRejoinRetriesWhileBrokerAway: under exactly-once, a reset creates a new transactional
// session, whose producer id needs the broker. While the broker (the statehost broker, in
// process) is away, the runtime tries again with a backoff and logs each attempt; once the
// broker is back on the same address it goes on. A stop request ends the retries.
func TestRejoinRetriesWhileBrokerAway(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "broker")
	addr := deadBroker(t)
	b, err := broker.Start(broker.Options{Listen: addr, DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	cfg := loadConfig(t, dir, `
application_id       = "rejoin"
processing_guarantee = "exactly_once"
admin { listen = "" }
topic "words" {
  partitions = 1
}
processor "count" {
  module  = "{{count}}"
  inputs  = ["words"]
  outputs = ["counts"]
  store "counts" {}
}
`)
	logs := &syncBuffer{}
	logger := hclog.New(&hclog.LoggerOptions{Name: "test", Level: hclog.Info, Output: logs})
	r, err := New(context.Background(), Options{Config: cfg, Brokers: []string{addr}, Logger: logger, NoWatch: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	const away = 1500 * time.Millisecond
	restarted := make(chan *broker.Broker, 1)
	go func() {
		time.Sleep(away)
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			b, err := broker.Start(broker.Options{Listen: addr, DataDir: data})
			if err == nil || time.Now().After(deadline) {
				restarted <- b
				return
			}
		}
	}()
	began := time.Now()
	r.tasks.mu.Lock()
	err = r.eos.rejoinLocked()
	r.tasks.mu.Unlock()
	b = <-restarted
	if b == nil {
		t.Fatal("the broker did not start again")
	}
	defer b.Close()
	if err != nil {
		t.Fatalf("rejoin while the broker was away for %v: %v", away, err)
	}
	if took := time.Since(began); took < away {
		t.Errorf("rejoined after %v, before the broker was back (%v)", took, away)
	}
	if n := strings.Count(logs.String(), "cannot rejoin the group: the broker is out of reach or busy; retrying"); n < 2 {
		t.Errorf("%d retries logged, want one per attempt while the broker was away:\n%s", n, logs)
	}
	if !strings.Contains(logs.String(), "rejoined the group with a new transactional producer") {
		t.Error("the rejoin was not logged")
	}
	r.kafka.consumer.Close()

	// A stop request ends the retries.
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	r.stop = stop
	time.AfterFunc(300*time.Millisecond, func() { close(stop) })
	began = time.Now()
	r.tasks.mu.Lock()
	err = r.eos.rejoinLocked()
	r.tasks.mu.Unlock()
	if err == nil || !unavailable(err) || time.Since(began) > 2*time.Second {
		t.Errorf("rejoin after a stop request: %v after %v; want the broker's error at once", err, time.Since(began))
	}
	r.kafka.consumer = nil // closed by the failed rejoin
}
