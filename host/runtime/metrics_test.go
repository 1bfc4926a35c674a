package runtime

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/statehost/statehost/internal/topictest"
	"github.com/statehost/statehost/internal/wordgen"
	"github.com/statehost/statehost/store"
)

// contractMetrics are the metric names users and alerts depend on, with their types.
var contractMetrics = map[string]dto.MetricType{
	"statehost_records_processed_total":    dto.MetricType_COUNTER,
	"statehost_state_ops_total":            dto.MetricType_COUNTER,
	"statehost_changelog_records_total":    dto.MetricType_COUNTER,
	"statehost_changelog_bytes_total":      dto.MetricType_COUNTER,
	"statehost_restore_records_total":      dto.MetricType_COUNTER,
	"statehost_restore_remaining_records":  dto.MetricType_GAUGE,
	"statehost_commit_seconds":             dto.MetricType_HISTOGRAM,
	"statehost_plugin_batch_seconds":       dto.MetricType_HISTOGRAM,
	"statehost_tasks":                      dto.MetricType_GAUGE,
	"statehost_plugin_reloads_total":       dto.MetricType_COUNTER,
	"statehost_transactions_aborted_total": dto.MetricType_COUNTER,
}

// TestMetrics runs the word count and reads GET /metrics: every contract metric with its type,
// the records processed, the store operations, the changelog records and bytes against the
// changelog itself (at-least-once, no coalescing: one record per put), the commit and batch
// histograms, the tasks per state and a deploy of the running module. Then a restart with the
// state directory deleted restores the whole changelog, which the restore metrics count.
func TestMetrics(t *testing.T) {
	brokers := cluster(t)
	cfg := loadConfig(t, t.TempDir(), fmt.Sprintf(wordcountHCL, "pebble", true))
	in := start(t, cfg, brokers, func(o *Options) { o.NoWatch = true })
	rt := in.rt
	srv := httptest.NewServer(rt.Handler())
	t.Cleanup(srv.Close)
	cl, adm := client(t, brokers)

	const sentences = 2000
	lines, ref := wordgen.Sentences(sentences, 5)
	produce(t, cl, "sentences", lines...)
	waitCounts(t, brokers, "word-counts", wordgen.Strings(ref))
	waitFor(t, 30*time.Second, "the 7 tasks to run", func() bool { return running(rt) == 7 })
	if res := adminDeploy(t, srv, "count", mustRead(t, modules["count"])); !res.Unchanged {
		t.Errorf("deploy of the running module: %+v, want unchanged", res)
	}

	fams := scrape(t, srv.URL)
	for name, typ := range contractMetrics {
		f := fams[name]
		switch {
		case f == nil:
			t.Errorf("%s is missing", name)
		case f.GetType() != typ:
			t.Errorf("%s is a %s, want a %s", name, f.GetType(), typ)
		}
	}
	for state, want := range map[string]float64{"running": 7, "restoring": 0, "standby": 0} {
		if got := sum(fams, "statehost_tasks", "state", state); got != want {
			t.Errorf("statehost_tasks{state=%q} = %v, want %v", state, got, want)
		}
	}
	if fams["go_goroutines"] == nil || fams["process_start_time_seconds"] == nil {
		t.Error("the Go and process collectors are missing")
	}

	// The final values, once the shutdown has committed everything: the registry outlives Run.
	if err := in.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	fams = scrape(t, srv.URL)
	words := endOffsets(t, adm, "wc-words-repartition")
	if got := sum(fams, "statehost_records_processed_total", "processor", "tokenize"); got != sentences {
		t.Errorf("records processed by tokenize = %v, want %d", got, sentences)
	}
	if got := sum(fams, "statehost_records_processed_total", "processor", "count"); got != float64(words) {
		t.Errorf("records processed by count = %v, want %d (the repartition topic's records)", got, words)
	}
	// count gets and puts its store once per word.
	for _, op := range []string{"get", "put"} {
		if got := sum(fams, "statehost_state_ops_total", "op", op, "store", "counts"); got != float64(words) {
			t.Errorf("statehost_state_ops_total{op=%q,store=\"counts\"} = %v, want %d", op, got, words)
		}
	}
	changelog := topictest.Read(t, brokers, "wc-counts-changelog", false)
	ends := endOffsets(t, adm, "wc-counts-changelog")
	if got := sum(fams, "statehost_changelog_records_total", "store", "counts"); got != float64(ends) {
		t.Errorf("statehost_changelog_records_total{store=\"counts\"} = %v, want %d (the changelog's end offsets)", got, ends)
	}
	var size int
	for _, r := range changelog {
		size += len(r.Key) + len(r.Value)
	}
	if got := sum(fams, "statehost_changelog_bytes_total", "store", "counts"); len(changelog) == int(ends) && got != float64(size) {
		t.Errorf("statehost_changelog_bytes_total{store=\"counts\"} = %v, want %d (the changelog's keys and values)", got, size)
	}
	if n := histogramCount(fams, "statehost_commit_seconds"); n == 0 {
		t.Error("statehost_commit_seconds has no observation")
	}
	for _, proc := range []string{"tokenize", "count"} {
		if n := histogramCount(fams, "statehost_plugin_batch_seconds", "processor", proc); n == 0 {
			t.Errorf("statehost_plugin_batch_seconds{processor=%q} has no observation", proc)
		}
	}
	t.Logf("processed %v, state ops %v, changelog %v records %v bytes, %d commits",
		sum(fams, "statehost_records_processed_total"), sum(fams, "statehost_state_ops_total"),
		sum(fams, "statehost_changelog_records_total"), sum(fams, "statehost_changelog_bytes_total"),
		histogramCount(fams, "statehost_commit_seconds"))
	if got := sum(fams, "statehost_plugin_reloads_total", "processor", "count", "result", "unchanged"); got != 1 {
		t.Errorf("statehost_plugin_reloads_total{processor=\"count\",result=\"unchanged\"} = %v, want 1", got)
	}
	if got := sum(fams, "statehost_plugin_reloads_total", "processor", "count", "result", "deployed"); got != 0 {
		t.Errorf("statehost_plugin_reloads_total{processor=\"count\",result=\"deployed\"} = %v, want 0", got)
	}

	// A restart without local state restores the whole changelog.
	if err := os.RemoveAll(StateDir(cfg)); err != nil {
		t.Fatal(err)
	}
	in = start(t, cfg, brokers, func(o *Options) { o.NoWatch = true })
	waitFor(t, 30*time.Second, "the 7 tasks to run again", func() bool { return running(in.rt) == 7 })
	srv2 := httptest.NewServer(in.rt.Handler())
	t.Cleanup(srv2.Close)
	fams = scrape(t, srv2.URL)
	if got := sum(fams, "statehost_restore_records_total", "store", "counts"); got != float64(len(changelog)) {
		t.Errorf("statehost_restore_records_total{store=\"counts\"} = %v, want %d (the changelog's records)", got, len(changelog))
	}
	parts := 0
	for _, m := range fams["statehost_restore_remaining_records"].GetMetric() {
		if label(m, "store") == "counts" {
			parts++
			if v := m.GetGauge().GetValue(); v != 0 {
				t.Errorf("statehost_restore_remaining_records{store=\"counts\",partition=%q} = %v, want 0", label(m, "partition"), v)
			}
		}
	}
	if parts != 3 {
		t.Errorf("statehost_restore_remaining_records has %d series of counts, want 3 (its partitions)", parts)
	}
	if got := sum(fams, "statehost_records_processed_total"); got != 0 {
		t.Errorf("a new runtime's statehost_records_processed_total = %v, want 0 (a registry per runtime)", got)
	}
}

// TestMetricsExactlyOnce checks the metrics that exactly-once counts on other paths: the
// transaction's commits, and the changelog records produced by the transactional producer
// (its data records: the changelog's offsets also hold the transaction markers).
func TestMetricsExactlyOnce(t *testing.T) {
	brokers := cluster(t)
	cfg := loadConfig(t, t.TempDir(), eosHCL())
	in := start(t, cfg, brokers, func(o *Options) { o.NoWatch = true })
	srv := httptest.NewServer(in.rt.Handler())
	t.Cleanup(srv.Close)
	cl, _ := client(t, brokers)

	const sentences = 500
	lines, ref := wordgen.Sentences(sentences, 6)
	produce(t, cl, "sentences", lines...)
	waitCounts(t, brokers, "word-counts", wordgen.Strings(ref))
	if err := in.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	fams := scrape(t, srv.URL)
	if n := histogramCount(fams, "statehost_commit_seconds"); n == 0 {
		t.Error("statehost_commit_seconds has no observation")
	}
	if got := sum(fams, "statehost_records_processed_total", "processor", "tokenize"); got < sentences {
		t.Errorf("records processed by tokenize = %v, want at least %d", got, sentences)
	}
	// Every data record of the changelog, committed or aborted, was acknowledged once.
	recs := topictest.Read(t, brokers, "wc-counts-changelog", false)
	if got := sum(fams, "statehost_changelog_records_total", "store", "counts"); got != float64(len(recs)) {
		t.Errorf("statehost_changelog_records_total{store=\"counts\"} = %v, want %d (the changelog's data records)", got, len(recs))
	}
}

// TestMetricsStandby checks the metrics of standby tasks: with standby_replicas = 1 and two
// instances, the three count tasks have a standby each, and the standbys' restore metrics
// follow their changelogs to the end.
func TestMetricsStandby(t *testing.T) {
	brokers := cluster(t)
	src := "standby_replicas = 1\n" + fmt.Sprintf(wordcountHCL, "pebble", true)
	noWatch := func(o *Options) { o.NoWatch = true }
	a := start(t, loadConfig(t, t.TempDir(), src), brokers, noWatch)
	b := start(t, loadConfig(t, t.TempDir(), src), brokers, noWatch)
	var urls []string
	for _, in := range []*instance{a, b} {
		srv := httptest.NewServer(in.rt.Handler())
		t.Cleanup(srv.Close)
		urls = append(urls, srv.URL)
	}
	cl, _ := client(t, brokers)
	lines, ref := wordgen.Sentences(1000, 7)
	produce(t, cl, "sentences", lines...)
	waitCounts(t, brokers, "word-counts", wordgen.Strings(ref))
	waitFor(t, 60*time.Second, "the 7 tasks shared and every count task with a caught-up standby", func() bool {
		ra, rb := running(a.rt), running(b.rt)
		return ra > 0 && rb > 0 && ra+rb == 7 && standbysCaughtUp(a.rt, b.rt) == 3
	})
	changelog := topictest.Read(t, brokers, "wc-counts-changelog", false)
	var last string
	defer func() {
		if t.Failed() {
			t.Log("last scrape:", last)
		}
	}()
	waitFor(t, 30*time.Second, "the metrics of 3 standbys at the changelogs' ends", func() bool {
		var running, standby, remaining, restored float64
		series := 0
		for _, url := range urls {
			fams := scrape(t, url)
			running += sum(fams, "statehost_tasks", "state", "running")
			standby += sum(fams, "statehost_tasks", "state", "standby")
			remaining += sum(fams, "statehost_restore_remaining_records", "store", "counts")
			restored += sum(fams, "statehost_restore_records_total", "store", "counts")
			series += len(matching(fams, "statehost_restore_remaining_records", "store", "counts"))
		}
		last = fmt.Sprintf("running %v, standby %v, %d remaining series (sum %v), restored %v of a changelog of %d",
			running, standby, series, remaining, restored, len(changelog))
		return running == 7 && standby == 3 && remaining == 0 && series >= 3 && restored > 0
	})
	t.Log(last)
}

// scrape GETs url/metrics and parses the text format.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	if f := expfmt.ResponseFormat(resp.Header); f.FormatType() != expfmt.TypeTextPlain {
		t.Errorf("GET /metrics: Content-Type %q, want the text format", resp.Header.Get("Content-Type"))
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	return fams
}

// label returns the value of m's label name, or "".
func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// matching returns the series of the family name whose labels have the values of
// labelValues (name, value, name, value...).
func matching(fams map[string]*dto.MetricFamily, name string, labelValues ...string) []*dto.Metric {
	var out []*dto.Metric
	for _, m := range fams[name].GetMetric() {
		ok := true
		for i := 0; i+1 < len(labelValues); i += 2 {
			ok = ok && label(m, labelValues[i]) == labelValues[i+1]
		}
		if ok {
			out = append(out, m)
		}
	}
	return out
}

// sum adds the values of the matching counter or gauge series.
func sum(fams map[string]*dto.MetricFamily, name string, labelValues ...string) float64 {
	var v float64
	for _, m := range matching(fams, name, labelValues...) {
		v += m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	return v
}

// histogramCount adds the observation counts of the matching histogram series.
func histogramCount(fams map[string]*dto.MetricFamily, name string, labelValues ...string) uint64 {
	var n uint64
	for _, m := range matching(fams, name, labelValues...) {
		n += m.GetHistogram().GetSampleCount()
	}
	return n
}

// endOffsets returns the sum of topic's end offsets.
func endOffsets(t *testing.T, adm *kadm.Client, topic string) int64 {
	t.Helper()
	ends, err := adm.ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("end offset of %s partition %d: %v", topic, o.Partition, o.Err)
		}
		n += o.Offset
	})
	return n
}

// BenchmarkStateOpsHook measures what the metered store layer with the runtime's hook adds to
// a store operation: a Get of a present key and a Put, on the memory and Pebble backends,
// without and with the hook; and with the hook shared by parallel tasks (one counter per
// operation and store, incremented by every task of the store's processor).
//
//	go test ./host/runtime -run '^$' -bench StateOpsHook
func BenchmarkStateOpsHook(b *testing.B) {
	m := newMetrics(newStatusBoard())
	hook := m.storeHook("counts")
	key, value := []byte("statehost"), []byte("42")
	for _, backend := range []store.Backend{store.Memory, store.Pebble} {
		for _, metered := range []bool{false, true} {
			o := store.Options{Backend: backend}
			if metered {
				o.Metrics = hook
			}
			b.Run(fmt.Sprintf("backend=%s/metered=%t", backend, metered), func(b *testing.B) {
				mgr, err := store.Open(store.Settings{Dir: b.TempDir(), MemoryBytes: store.MinMemoryBytes})
				if err != nil {
					b.Fatal(err)
				}
				defer mgr.Close()
				var parts atomic.Int32
				open := func(b *testing.B) (*store.Task, store.Store) { // a task per goroutine
					st, err := mgr.OpenTask("count", parts.Add(1))
					if err != nil {
						b.Error(err)
						return nil, nil
					}
					s, err := st.Open("counts", o)
					if err == nil {
						err = s.Put(key, value)
					}
					if err != nil {
						_ = st.Close()
						b.Error(err)
						return nil, nil
					}
					return st, s
				}
				b.Run("get", func(b *testing.B) {
					st, s := open(b)
					if st == nil {
						return
					}
					defer st.Close()
					for b.Loop() {
						if _, _, err := s.Get(key); err != nil {
							b.Fatal(err)
						}
					}
				})
				b.Run("put", func(b *testing.B) {
					st, s := open(b)
					if st == nil {
						return
					}
					defer st.Close()
					for b.Loop() {
						if err := s.Put(key, value); err != nil {
							b.Fatal(err)
						}
					}
				})
				b.Run("get-parallel", func(b *testing.B) {
					b.RunParallel(func(pb *testing.PB) {
						st, s := open(b)
						if st == nil {
							return
						}
						defer st.Close()
						for pb.Next() {
							if _, _, err := s.Get(key); err != nil {
								b.Error(err)
								return
							}
						}
					})
				})
			})
		}
	}
}
