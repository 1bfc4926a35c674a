package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/config"
	"github.com/statehost/statehost/internal/topictest"
	"github.com/statehost/statehost/internal/wordgen"
	"github.com/statehost/statehost/pluginsdk/wasmbuild"
	"github.com/statehost/statehost/restore"
)

// modules are the plugins the tests run, built once by TestMain: name -> .wasm path.
var modules = map[string]string{}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "statehost-runtime-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	pkgs := map[string]string{
		"tokenize":    "../../plugins/tokenize",
		"count":       "../../plugins/count",
		"leaderboard": "../../plugins/leaderboard",
		"probe":       "../engine/testdata/goprobe", // each record's value is a command: "panic", ...
		"windowcount": "../../plugins/windowcount",
		"sessionize":  "../../plugins/sessionize",
		"countv2":     "testdata/countv2",                            // count that also keeps "seen:<word>" and marks its output version=2
		"pertask":     "../engine/testdata/gopertask",                // asks for an instance per task; emits the records its instance saw
		"countjson":   "../../plugins/countjson",                     // count over a store of version 2 (JSON), migrated from count's
		"migratefail": "testdata/migratefail",                        // declares version 2 of counts; its migration fails on "poison"
		"reversible":  "../../plugins/countjson/testdata/reversible", // countjson whose migration a rollback can undo
		"slowcount":   "testdata/slowcount",                          // count in "tallies", slow on the value "slow"
	}
	for name, pkg := range pkgs {
		out := filepath.Join(dir, name+".wasm")
		modules[name] = out
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := wasmbuild.Go(ctx, pkg, out); err != nil {
				errs <- fmt.Errorf("build %s: %w", name, err)
			}
		}()
	}
	wg.Wait()
	cancel()
	close(errs)
	for err := range errs {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// cluster starts an in-process kfake broker.
func cluster(t testing.TB) []string {
	t.Helper()
	_, brokers := kfakeCluster(t)
	return brokers
}

// kfakeCluster starts an in-process kfake broker and returns it, for tests that control its
// answers, with its addresses.
func kfakeCluster(t testing.TB) (*kfake.Cluster, []string) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, c.ListenAddrs()
}

// loadConfig parses src as a config file in dir, with {{name}} replaced by module paths.
func loadConfig(t testing.TB, dir, src string) *config.Config {
	t.Helper()
	cfg, diags := config.Load(writeConfig(t, dir, src), config.Options{})
	if diags.HasErrors() {
		var b strings.Builder
		_ = config.WriteDiagnostics(&b, cfg.Files, diags)
		t.Fatalf("config: %s", b.String())
	}
	return cfg
}

// writeConfig writes src, its {{name}} replaced by module paths, as dir's app.hcl, without
// loading it, and returns its path.
func writeConfig(t testing.TB, dir, src string) string {
	t.Helper()
	for name, path := range modules {
		src = strings.ReplaceAll(src, "{{"+name+"}}", path)
	}
	path := filepath.Join(dir, "app.hcl")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// newDiagnostics runs New on cfg, which must fail with a *DiagnosticsError; it returns the
// diagnostics and their text as WriteDiagnostics prints them.
func newDiagnostics(t testing.TB, cfg *config.Config, brokers []string) (hcl.Diagnostics, string) {
	t.Helper()
	_, err := New(context.Background(), Options{Config: cfg, Brokers: brokers})
	de, ok := errors.AsType[*DiagnosticsError](err)
	if !ok {
		t.Fatalf("New: %v, want a *DiagnosticsError", err)
	}
	var b strings.Builder
	if err := config.WriteDiagnostics(&b, cfg.Files, de.Diags); err != nil {
		t.Fatal(err)
	}
	return de.Diags, b.String()
}

// instance is a running Runtime.
type instance struct {
	rt     *Runtime
	cancel context.CancelFunc
	done   chan error
	events *eventLog
}

// start creates a Runtime for cfg and runs it until stop.
func start(t testing.TB, cfg *config.Config, brokers []string, mods ...func(*Options)) *instance {
	t.Helper()
	ev := &eventLog{}
	opts := Options{
		Config:          cfg,
		Brokers:         brokers,
		Logger:          hclog.New(&hclog.LoggerOptions{Name: "test", Level: hclog.Warn, Output: testWriter{t}}),
		RestoreListener: ev,
		SessionTimeout:  6 * time.Second,
	}
	for _, m := range mods {
		m(&opts)
	}
	rt, err := New(context.Background(), opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	in := &instance{rt: rt, cancel: cancel, done: make(chan error, 1), events: ev}
	go func() { in.done <- rt.Run(ctx) }()
	t.Cleanup(func() { in.stop(t) })
	return in
}

// stop cancels the Runtime, waits for Run and closes it; it returns Run's error.
func (in *instance) stop(t testing.TB) error {
	t.Helper()
	if in.rt == nil {
		return nil
	}
	in.cancel()
	var err error
	select {
	case err = <-in.done:
	case <-time.After(90 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	in.rt.Close()
	in.rt = nil
	return err
}

// eventLog records restore end events.
type eventLog struct {
	mu   sync.Mutex
	ends []restore.EndEvent
}

func (e *eventLog) OnRestoreStart(restore.StartEvent)  {}
func (e *eventLog) OnBatchRestored(restore.BatchEvent) {}
func (e *eventLog) OnRestoreEnd(ev restore.EndEvent) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ends = append(e.ends, ev)
}

// restored returns the records restored per store, summed over partitions.
func (e *eventLog) restored() map[string]int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := map[string]int64{}
	for _, ev := range e.ends {
		m[ev.Store] += ev.Records
	}
	return m
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// client returns a producing and admin client of brokers, with opts; closed by t's cleanup.
func client(t testing.TB, brokers []string, opts ...kgo.Opt) (*kgo.Client, *kadm.Client) {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl, kadm.NewClient(cl)
}

// produce writes the values to topic with null keys, spread over the partitions.
func produce(t testing.TB, cl *kgo.Client, topic string, values ...string) {
	t.Helper()
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		recs[i] = &kgo.Record{Topic: topic, Value: []byte(v)}
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}

// feed produces n sentences of wordgen's seed to the topic sentences and adds their words to
// the reference counts ref.
func feed(t testing.TB, cl *kgo.Client, ref map[string]int, n, seed int) {
	t.Helper()
	lines, more := wordgen.Sentences(n, seed)
	produce(t, cl, "sentences", lines...)
	for k, v := range more {
		ref[k] += v
	}
}

// produceKeyed writes each key with the value "1", partitioned by key.
func produceKeyed(t testing.TB, cl *kgo.Client, topic string, keys []string) {
	t.Helper()
	recs := make([]*kgo.Record, len(keys))
	for i, k := range keys {
		recs[i] = &kgo.Record{Topic: topic, Key: []byte(k), Value: []byte("1")}
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}

// latest reads topic to its current end: see topictest.Latest.
func latest(t testing.TB, brokers []string, topic string) (map[string]string, int) {
	t.Helper()
	return topictest.Latest(t, brokers, topic)
}

// waitFor polls cond until it is true or the deadline passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// committed returns the group's committed offsets of topic, by partition.
func committed(t testing.TB, brokers []string, group, topic string) map[int32]int64 {
	t.Helper()
	_, adm := client(t, brokers)
	resp, err := adm.FetchOffsets(context.Background(), group)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	resp.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil {
			out[o.Partition] = o.At
		}
	})
	return out
}

// produceContinuously produces n sentences of wordgen to the topic sentences every interval,
// from a goroutine, until the returned stop is called; stop returns the reference counts of
// everything produced. A failed produce is reported with Errorf (Fatal is for the test's own
// goroutine) and ends the production. The test's cleanup stops it too.
func produceContinuously(t testing.TB, cl *kgo.Client, n int, every time.Duration) (stop func() map[string]int) {
	return produceKeyedContinuously(t, cl, n, every, nil)
}

// produceKeyedContinuously is produceContinuously with the key key(i) for the i-th sentence
// produced (none when key is nil).
func produceKeyedContinuously(t testing.TB, cl *kgo.Client, n int, every time.Duration, key func(int) []byte) (stop func() map[string]int) {
	ref := map[string]int{}
	produced := 0
	done := make(chan struct{})
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		for seed := 1; ; seed++ {
			select {
			case <-done:
				return
			case <-time.After(every):
			}
			lines, more := wordgen.Sentences(n, seed)
			recs := make([]*kgo.Record, len(lines))
			for i, l := range lines {
				recs[i] = &kgo.Record{Topic: "sentences", Value: []byte(l)}
				if key != nil {
					recs[i].Key = key(produced)
				}
				produced++
			}
			if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				t.Errorf("produce: %v", err)
				return
			}
			for k, v := range more {
				ref[k] += v
			}
		}
	}()
	var once sync.Once
	stop = func() map[string]int {
		once.Do(func() { close(done) })
		<-fed
		return ref
	}
	t.Cleanup(func() { stop() }) // a test that fails first still stops the goroutine
	return stop
}
