package broker

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func start(t *testing.T, dir string) *Broker {
	t.Helper()
	b, err := Start(Options{Listen: "127.0.0.1:0", DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func client(t *testing.T, b *Broker, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Addr())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// consumeAll reads n records of topic from the beginning.
func consumeAll(t *testing.T, b *Broker, topic string, n int) []*kgo.Record {
	t.Helper()
	ctx := testContext(t)
	cl := client(t, b, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var recs []*kgo.Record
	for len(recs) < n {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consuming %s after %d records: %v", topic, len(recs), err)
		}
		recs = append(recs, fs.Records()...)
	}
	return recs
}

func TestRecordsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	b := start(t, dir)
	ctx := testContext(t)
	adm := kadm.NewClient(client(t, b))
	if _, err := adm.CreateTopic(ctx, 3, 1, nil, "words"); err != nil {
		t.Fatal(err)
	}
	cl := client(t, b)
	const n = 50
	for i := range n {
		rec := &kgo.Record{Topic: "words", Key: fmt.Appendf(nil, "k%d", i%7), Value: fmt.Appendf(nil, "v%d", i)}
		if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}

	b2 := start(t, dir)
	recs := consumeAll(t, b2, "words", n)
	if len(recs) != n {
		t.Fatalf("got %d records after restart, want %d", len(recs), n)
	}
	seen := map[string]bool{}
	for _, r := range recs {
		seen[string(r.Value)] = true
	}
	for i := range n {
		if !seen[fmt.Sprintf("v%d", i)] {
			t.Errorf("record v%d lost across restart", i)
		}
	}
	topics, err := kadm.NewClient(client(t, b2)).ListTopics(ctx, "words")
	if err != nil {
		t.Fatal(err)
	}
	if got := len(topics["words"].Partitions); got != 3 {
		t.Errorf("words has %d partitions after restart, want 3", got)
	}
}

func TestPortZero(t *testing.T) {
	b := start(t, t.TempDir())
	host, port, err := net.SplitHostPort(b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if host != "127.0.0.1" || port == "0" {
		t.Fatalf("Addr() = %s, want 127.0.0.1 and a real port", b.Addr())
	}
	// The address advertised in metadata is the one Addr returns.
	ctx := testContext(t)
	brokers, err := kadm.NewClient(client(t, b)).ListBrokers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(brokers) != 1 {
		t.Fatalf("got %d brokers, want 1", len(brokers))
	}
	if got := net.JoinHostPort(brokers[0].Host, fmt.Sprint(brokers[0].Port)); got != b.Addr() {
		t.Errorf("metadata advertises %s, Addr() is %s", got, b.Addr())
	}
}

func TestNoAutoTopicCreation(t *testing.T) {
	b := start(t, t.TempDir())
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	cl := client(t, b, kgo.AllowAutoTopicCreation())
	err := cl.ProduceSync(ctx, &kgo.Record{Topic: "nope", Value: []byte("x")}).FirstErr()
	if err == nil {
		t.Fatal("producing to a missing topic succeeded: the broker created it")
	}
	topics, err := kadm.NewClient(client(t, b)).ListTopics(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	if topics.Has("nope") {
		t.Error("the topic was auto-created")
	}
}

func TestDataDirLock(t *testing.T) {
	dir := t.TempDir()
	b := start(t, dir)
	_, err := Start(Options{Listen: "127.0.0.1:0", DataDir: dir})
	if err == nil || !strings.Contains(err.Error(), "data dir "+dir+" is used by another broker") {
		t.Fatalf("second broker on one data dir: err = %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	// Closing releases the lock.
	start(t, dir)
}

func TestStartErrors(t *testing.T) {
	dir := t.TempDir()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{DataDir: dir}, "Listen is required"},
		{Options{Listen: "127.0.0.1:0"}, "DataDir is required"},
		{Options{Listen: "127.0.0.1", DataDir: dir}, `listen address "127.0.0.1"`},
		{Options{Listen: busy.Addr().String(), DataDir: dir}, "listening on " + busy.Addr().String()},
	} {
		if _, err := Start(tc.o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Start(%+v) = %v, want an error containing %q", tc.o, err, tc.want)
		}
	}
	// A failed start leaves the data dir unlocked.
	start(t, dir)
}

// A wildcard address is advertised as a host clients can dial (and SyncWrites works).
func TestWildcardListen(t *testing.T) {
	b, err := Start(Options{Listen: "0.0.0.0:0", DataDir: t.TempDir(), SyncWrites: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if host, _, _ := net.SplitHostPort(b.Addr()); host == "0.0.0.0" || host == "" {
		t.Fatalf("Addr() = %s, want a host that clients can dial", b.Addr())
	}
	ctx := testContext(t)
	if _, err := kadm.NewClient(client(t, b)).CreateTopic(ctx, 1, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	if err := client(t, b).ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func TestLogger(t *testing.T) {
	var out strings.Builder
	var mu sync.Mutex
	log := hclog.New(&hclog.LoggerOptions{Level: hclog.Trace, Output: lockedWriter{&mu, &out}})
	b, err := Start(Options{Listen: "127.0.0.1:0", DataDir: t.TempDir(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kadm.NewClient(client(t, b)).ListBrokers(testContext(t)); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(out.String(), "[DEBUG]") && !strings.Contains(out.String(), "[TRACE]") {
		t.Errorf("no kfake logs at debug or trace:\n%s", out.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(p)
}
