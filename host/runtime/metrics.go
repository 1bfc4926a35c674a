package runtime

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/restore"
	"github.com/statehost/statehost/store"
)

// Prometheus metrics, served on the admin listener at GET /metrics.
//
// The names below are a contract (dashboards and alerts depend on them): rename nothing, and
// add labels only with care. Each Runtime has a registry of its own, not the default one:
// several runtimes may run in one process (tests do), and the default registry refuses a
// second collector of the same name.
//
//	statehost_records_processed_total{processor}            counter    input records a plugin processed (task.process)
//	statehost_state_ops_total{op,store}                     counter    store operations of the plugins (the metered store layer)
//	statehost_changelog_records_total{store}                counter    records the broker acknowledged on the store's changelog
//	statehost_changelog_bytes_total{store}                  counter    their key and value bytes
//	statehost_restore_records_total{store,partition}        counter    changelog records applied by restores and standbys
//	statehost_restore_remaining_records{store,partition}    gauge      changelog end offset minus the restore's position
//	                                                                   (both: partition="other" past Options.PartitionSeries)
//	statehost_commit_seconds                                histogram  one commit of the tasks (both guarantees)
//	statehost_plugin_batch_seconds{processor}               histogram  one task's ProcessBatch call
//	statehost_tasks{state}                                  gauge      tasks per state: restoring, running, standby
//	statehost_plugin_reloads_total{processor,result}        counter    deploys: deployed, unchanged, refused, failed
//	statehost_punctuations_total{processor}                 counter    punctuations run
//	statehost_dropped_window_writes_total{processor,reason} counter    window writes dropped: late, expired, restore_skipped
//	statehost_records_skipped_total{processor,reason}       counter    poison records skipped (on_error = "skip"), by the
//	                                                                   guest's failure: error, trap, panic, exit, out_of_memory, timeout,
//	                                                                   emit_budget
//	statehost_records_dead_lettered_total{processor}        counter    poison records sent to the dead-letter topic (on_error = "dead_letter")
//	statehost_guest_log_lines_dropped_total{processor}      counter    guest log lines (log, stdout, stderr) over the per-task rate limit
//	statehost_group_members_removed_total                   counter    dead instances this instance removed from the group (remove_dead_members)
//	statehost_store_expired_total{processor,store}          counter    expired entries the sweep deleted from stores with a ttl (ttl.go)
//
// plus the Go runtime's (go_*) and the process's (process_*) collectors.
//
// The hot paths (a store operation, a batch, a produced record) use counters resolved when the
// runtime is built: no label lookup per call. The gauges of tasks and restores are computed at
// scrape time from the status board, so they never go stale when a task leaves.

// Results of statehost_plugin_reloads_total.
const (
	reloadDeployed  = "deployed"  // a new module became the processor's (its tasks switch at their next commit)
	reloadUnchanged = "unchanged" // the module is the one running
	reloadRefused   = "refused"   // nothing changed: invalid module, not running, or a switch pending
	reloadFailed    = "failed"    // a task could not start the module: every task went back
)

// metrics are a Runtime's Prometheus metrics.
type metrics struct {
	reg *prometheus.Registry

	processed      *prometheus.CounterVec
	batch          *prometheus.HistogramVec
	punctuations   *prometheus.CounterVec
	commit         prometheus.Histogram
	reloads        *prometheus.CounterVec
	dropped        *prometheus.CounterVec
	skips          *prometheus.CounterVec
	deadLetters    *prometheus.CounterVec
	logsDropped    *prometheus.CounterVec
	stateOps       *prometheus.CounterVec
	clRecords      *prometheus.CounterVec
	clBytes        *prometheus.CounterVec
	restored       *prometheus.CounterVec
	txnAborts      *prometheus.CounterVec
	membersRemoved prometheus.Counter
	expired        *prometheus.CounterVec

	// Filled while New builds the runtime, read-only afterwards: read without a lock.
	procs      map[string]*procMetrics      // by processor name
	stores     map[string]*storeOps         // by store name
	changelogs map[string]*changelogMetrics // by changelog topic

	// partitionSeries is Options.PartitionSeries: the most store partitions with series of
	// their own (own counts them); <0: no bound. Set before the runtime runs.
	partitionSeries int

	mu       sync.Mutex
	progress map[restoreKey]*restoreProgress // the last restore of each store partition
	own      int
}

// defaultPartitionSeries is the default of Options.PartitionSeries.
const defaultPartitionSeries = 256

// otherPartition is the partition label of the store partitions past Options.PartitionSeries.
const otherPartition = "other"

// procMetrics are the pre-resolved metrics of one processor.
type procMetrics struct {
	processed    prometheus.Counter
	punctuations prometheus.Counter
	batch        prometheus.Observer
}

// changelogMetrics are the pre-resolved metrics of one store's changelog.
type changelogMetrics struct{ records, bytes prometheus.Counter }

// newMetrics creates the metrics and their registry; board gives the tasks at scrape time.
func newMetrics(board *statusBoard) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		processed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "statehost_records_processed_total",
			Help: "Input records processed by the plugins.",
		}, []string{"processor"}),
		batch: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "statehost_plugin_batch_seconds",
			Help:    "Duration of one task's ProcessBatch call (its records of one poll).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 17), // 100µs to 6.5s
		}, []string{"processor"}),
		punctuations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "statehost_punctuations_total",
			Help: "Punctuations run by the plugins.",
		}, []string{"processor"}),
		commit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "statehost_commit_seconds",
			Help:    "Duration of a commit of the tasks (at-least-once: changelogs acknowledged, stores applied, offsets committed; exactly-once: the transaction).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15), // 1ms to 16s
		}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "statehost_plugin_reloads_total",
			Help: "Module deploys per processor and result: deployed, unchanged, refused (nothing changed), failed (a task could not start it; back to the previous module).",
		}, []string{"processor", "result"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "statehost_dropped_window_writes_total",
			Help: "Writes to window and session stores that were dropped: late (window closed), expired (past retention), restore_skipped (expired changelog records). Reported every 10s per task.",
		}, []string{"processor", "reason"}),
		skips: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "statehost_records_skipped_total",
			Help: "Poison records skipped (on_error = \"skip\"), by the guest's failure: error, trap, panic, exit, out_of_memory, timeout, emit_budget.",
		}, []string{"processor", "reason"}),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "statehost_records_dead_lettered_total",
			Help: "Poison records sent to the processor's dead-letter topic (on_error = \"dead_letter\").",
		}, []string{"processor"}),
		logsDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "statehost_guest_log_lines_dropped_total",
			Help: "Guest log lines (the log host function, stdout and stderr) dropped by the per-task rate limit (engine.Config.GuestLogRate, GuestLogBurst).",
		}, []string{"processor"}),
		stateOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "statehost_state_ops_total",
			Help: "Store operations of the plugins, per operation and store.",
		}, []string{"op", "store"}),
		clRecords: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "statehost_changelog_records_total",
			Help: "Records the broker acknowledged on the store's changelog (under exactly-once, records of aborted transactions included).",
		}, []string{"store"}),
		clBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "statehost_changelog_bytes_total",
			Help: "Key and value bytes of the records counted by statehost_changelog_records_total.",
		}, []string{"store"}),
		restored: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "statehost_restore_records_total",
			Help: "Changelog records applied to the local copy of the store partition, by restores and standbys.",
		}, []string{"store", "partition"}),
		txnAborts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "statehost_transactions_aborted_total",
			Help: "Transactions aborted under exactly-once, by cause: rebalance (partitions revoked or lost), error (the commit failed; the tasks revive from their last commit), reset (the producer was replaced).",
		}, []string{"cause"}),
		membersRemoved: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "statehost_group_members_removed_total",
			Help: "Dead instances this instance removed from the group (remove_dead_members): their admin listener refused connections after their watch broke.",
		}),
		expired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "statehost_store_expired_total",
			Help: "Expired entries deleted from key-value stores with a ttl by their sweep (with tombstones in their changelogs).",
		}, []string{"processor", "store"}),
		procs:      make(map[string]*procMetrics),
		stores:     make(map[string]*storeOps),
		changelogs: make(map[string]*changelogMetrics),
		progress:   make(map[restoreKey]*restoreProgress),
	}
	for _, cause := range []string{"rebalance", "error", "reset"} {
		m.txnAborts.WithLabelValues(cause) // at zero from the start, for rates and alerts
	}
	m.reg.MustRegister(m.processed, m.batch, m.punctuations, m.commit, m.reloads, m.dropped,
		m.skips, m.deadLetters, m.logsDropped, m.stateOps, m.clRecords, m.clBytes, m.restored,
		m.txnAborts, m.membersRemoved, m.expired,
		&boardCollector{m: m, board: board},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

// handler serves the registry in the Prometheus text (or OpenMetrics) format.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// addProcessor creates the series of the processor name, at zero.
func (m *metrics) addProcessor(name string) {
	if m.procs[name] != nil {
		return
	}
	m.procs[name] = &procMetrics{
		processed:    m.processed.WithLabelValues(name),
		punctuations: m.punctuations.WithLabelValues(name),
		batch:        m.batch.WithLabelValues(name),
	}
	for _, res := range []string{reloadDeployed, reloadUnchanged, reloadRefused, reloadFailed} {
		m.reloads.WithLabelValues(name, res)
	}
	m.logsDropped.WithLabelValues(name)
}

// addInstances registers statehost_plugin_instances for the processor name: the plugin
// instances it holds now (idle and lent), read from instances at each scrape.
func (m *metrics) addInstances(name string, instances func() int) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "statehost_plugin_instances",
		Help:        "The plugin instances a processor holds now, idle and lent: its pools' (about one per worker), and one per task for a module that asks for an instance per task.",
		ConstLabels: prometheus.Labels{"processor": name},
	}, func() float64 { return float64(instances()) }))
}

// proc returns the metrics of the processor name (one that addProcessor created).
func (m *metrics) proc(name string) *procMetrics {
	if p := m.procs[name]; p != nil {
		return p
	}
	return &procMetrics{ // not reached: every configured processor is added by compile
		processed:    m.processed.WithLabelValues(name),
		punctuations: m.punctuations.WithLabelValues(name),
		batch:        m.batch.WithLabelValues(name),
	}
}

// processedBatch counts a batch of n records that took took in ProcessBatch.
func (m *metrics) processedBatch(proc string, n int, took time.Duration) {
	p := m.proc(proc)
	p.processed.Add(float64(n))
	p.batch.Observe(took.Seconds())
}

// punctuated counts n punctuations run by a task of proc.
func (m *metrics) punctuated(proc string, n int) {
	if n > 0 {
		m.proc(proc).punctuations.Add(float64(n))
	}
}

// skipped counts a poison record of proc skipped for reason (poison.go).
func (m *metrics) skipped(proc, reason string) { m.skips.WithLabelValues(proc, reason).Inc() }

// deadLettered counts a poison record of proc sent to its dead-letter topic.
func (m *metrics) deadLettered(proc string) { m.deadLetters.WithLabelValues(proc).Inc() }

// guestLogsDropped counts the guest log lines of a task of proc that its rate limit dropped
// (engine.Config.OnGuestLogsDropped).
func (m *metrics) guestLogsDropped(proc string, _ int32, lines int64) {
	m.logsDropped.WithLabelValues(proc).Add(float64(lines))
}

// committed observes a commit that began at start.
func (m *metrics) committed(start time.Time) {
	m.commit.Observe(time.Since(start).Seconds())
}

// deployed counts a deploy of the processor name with Deploy's result, as logDeploy reads it.
// A deploy to an unknown processor is not counted: the label would take any name a client sends.
func (m *metrics) deployed(name string, res DeployResult, err error) {
	if m.procs[name] == nil {
		return
	}
	result := reloadRefused
	switch {
	case err == nil && res.Unchanged:
		result = reloadUnchanged
	case err == nil:
		result = reloadDeployed
	case errors.Is(err, ErrSwitchFailed):
		result = reloadFailed
	case res.Version.Hash != "" && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)):
		// Validated and made the processor's module; the wait ended before every task
		// switched: they switch at their next commit.
		result = reloadDeployed
	}
	m.reloads.WithLabelValues(name, result).Inc()
}

// storeExpired counts n expired entries that the sweep of a task of proc deleted from store.
func (m *metrics) storeExpired(proc, store string, n int) {
	m.expired.WithLabelValues(proc, store).Add(float64(n))
}

// droppedWrites counts window writes a task of proc dropped since its last report.
func (m *metrics) droppedWrites(proc string, late, expired, skipped int64) {
	for _, d := range []struct {
		reason string
		n      int64
	}{{"late", late}, {"expired", expired}, {"restore_skipped", skipped}} {
		if d.n > 0 {
			m.dropped.WithLabelValues(proc, d.reason).Add(float64(d.n))
		}
	}
}

// storeOps is the store.Metrics hook of one store: a counter per operation, resolved once.
type storeOps struct {
	m     *metrics
	name  string
	byOp  [store.OpPrefix + 1]prometheus.Counter
	other sync.Map // store.Op -> prometheus.Counter, for operations added to store later
}

var _ store.UntimedMetrics = (*storeOps)(nil)

// Untimed tells the store's metered layer not to read the clock: only counts are kept.
func (*storeOps) Untimed() {}

// storeHook returns the store.Metrics hook of the store name, creating its series at zero.
func (m *metrics) storeHook(name string) store.Metrics {
	if s := m.stores[name]; s != nil {
		return s
	}
	s := &storeOps{m: m, name: name}
	for op := range s.byOp {
		s.byOp[op] = m.stateOps.WithLabelValues(store.Op(op).String(), name)
	}
	m.stores[name] = s
	return s
}

// Observe counts one operation; its duration and error are not used.
func (s *storeOps) Observe(_ string, op store.Op, _ time.Duration, _ error) {
	if op >= 0 && int(op) < len(s.byOp) {
		s.byOp[op].Inc()
		return
	}
	c, ok := s.other.Load(op)
	if !ok {
		c, _ = s.other.LoadOrStore(op, s.m.stateOps.WithLabelValues(op.String(), s.name))
	}
	c.(prometheus.Counter).Inc()
}

// addChangelog creates the series of the changelog topic of the logged store name, at zero.
func (m *metrics) addChangelog(topic, name string) {
	if m.changelogs[topic] != nil {
		return
	}
	m.changelogs[topic] = &changelogMetrics{records: m.clRecords.WithLabelValues(name), bytes: m.clBytes.WithLabelValues(name)}
}

// producerHook counts the changelog records that the broker acknowledged, on the client that
// produces them (the changelog package reports nothing it sends). Counting acknowledged
// records, not the stores' writes, is exact: coalesced writes that never reach the changelog
// are not counted, and a record retried by the idempotent producer is counted once. Under
// exactly-once the records of an aborted transaction are counted too: they are in the log.
func (m *metrics) producerHook() kgo.Opt { return kgo.WithHooks(producerHook{m}) }

type producerHook struct{ m *metrics }

var _ kgo.HookProduceRecordUnbuffered = producerHook{}

func (h producerHook) OnProduceRecordUnbuffered(r *kgo.Record, err error) {
	if err != nil {
		return
	}
	if c := h.m.changelogs[r.Topic]; c != nil { // output records are not counted
		c.records.Inc()
		c.bytes.Add(float64(len(r.Key) + len(r.Value)))
	}
}

// restoreKey is a store partition.
type restoreKey struct {
	store     string
	partition int32
}

// restoreProgress is the position of the last restore (or the standby) of a store partition.
type restoreProgress struct {
	processor string
	partition string // the label
	records   prometheus.Counter
	end       int64 // active restore: the end offset captured at its start; standby: the highest high watermark seen
	pos       int64 // the next offset to apply
	follow    bool  // a standby: its end follows the high watermark
}

// restoreListener feeds the restore metrics from a restorer's events; follow is set for the
// standbys' follower, whose restores have no end.
type restoreListener struct {
	m      *metrics
	follow bool
}

var _ restore.Listener = restoreListener{}

func (l restoreListener) OnRestoreStart(e restore.StartEvent) {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	k := restoreKey{e.Store, e.Partition}
	p := l.m.progress[k]
	if p == nil {
		part := otherPartition
		if l.m.partitionSeries < 0 || l.m.own < l.m.partitionSeries {
			part = strconv.Itoa(int(e.Partition))
			l.m.own++
		}
		p = &restoreProgress{partition: part, records: l.m.restored.WithLabelValues(e.Store, part)}
		l.m.progress[k] = p
	}
	p.processor, p.end, p.pos, p.follow = e.Processor, e.EndOffset, e.StartOffset, l.follow
}

func (l restoreListener) OnBatchRestored(e restore.BatchEvent) {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	p := l.m.progress[restoreKey{e.Store, e.Partition}]
	if p == nil {
		return // not reached: a start event comes first
	}
	p.records.Add(float64(e.Records))
	p.pos = e.Offset + 1
	if p.follow {
		p.end = max(p.end, e.HighWatermark)
	}
}

func (l restoreListener) OnRestoreEnd(e restore.EndEvent) {
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	if p := l.m.progress[restoreKey{e.Store, e.Partition}]; p != nil {
		p.pos = max(p.pos, p.end) // done: what is left are transaction markers, if anything
	}
}

// taskStates are the states statehost_tasks always reports, at zero when no task is in them.
var taskStates = []string{"restoring", "running", "standby"}

// boardCollector computes, at each scrape, statehost_tasks from the status board, and
// statehost_restore_remaining_records for the store partitions of the tasks on it: a task
// that left the instance takes its series with it.
type boardCollector struct {
	m     *metrics
	board *statusBoard
}

var (
	tasksDesc = prometheus.NewDesc("statehost_tasks",
		"Tasks of this instance per state: restoring, running, standby.", []string{"state"}, nil)
	remainingDesc = prometheus.NewDesc("statehost_restore_remaining_records",
		"Changelog lag of the restore or standby of the store partition: its changelog's end offset minus the position restored to, without the commit marker that ends it under exactly_once (offsets: other transaction markers and compacted gaps count); 0 once an active restore is done.",
		[]string{"store", "partition"}, nil)
)

func (c *boardCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- tasksDesc
	ch <- remainingDesc
}

func (c *boardCollector) Collect(ch chan<- prometheus.Metric) {
	tasks := c.board.snapshot()
	counts := make(map[string]int, len(taskStates))
	for _, s := range taskStates {
		counts[s] = 0
	}
	present := make(map[taskID]bool, len(tasks))
	for _, ts := range tasks {
		if ts.State != "" {
			counts[ts.State]++
		}
		present[taskID{Processor: ts.Processor, Partition: ts.Partition}] = true
	}
	for state, n := range counts {
		ch <- prometheus.MustNewConstMetric(tasksDesc, prometheus.GaugeValue, float64(n), state)
	}
	markers := c.board.markers
	type lag struct {
		store, partition string
		n                int64
	}
	var lags []lag
	c.m.mu.Lock()
	for k, p := range c.m.progress {
		if present[taskID{Processor: p.processor, Partition: k.partition}] {
			lags = append(lags, lag{k.store, strconv.Itoa(int(k.partition)), restore.Lag(0, p.end, p.pos, markers)})
		}
	}
	c.m.mu.Unlock()
	own := len(lags)
	if limit := c.m.partitionSeries; limit >= 0 && own > limit {
		// The partitions furthest behind keep a series of their own; the others are summed.
		slices.SortFunc(lags, func(a, b lag) int { return cmp.Compare(b.n, a.n) })
		own = limit
	}
	other := map[string]int64{}
	for i, l := range lags {
		if i < own {
			ch <- prometheus.MustNewConstMetric(remainingDesc, prometheus.GaugeValue, float64(l.n), l.store, l.partition)
		} else {
			other[l.store] += l.n
		}
	}
	for store, n := range other {
		ch <- prometheus.MustNewConstMetric(remainingDesc, prometheus.GaugeValue, float64(n), store, otherPartition)
	}
}
