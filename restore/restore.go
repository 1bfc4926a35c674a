package restore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/changelog"
	"github.com/statehost/statehost/store"
)

// DefaultProbeInterval is the default of Settings.ProbeInterval: 500ms.
const DefaultProbeInterval = 500 * time.Millisecond

// MaxFetchMaxWait is the longest kgo.FetchMaxWait a restore client may have: 1s.
// A probe is a fetch, and Kafka answers the requests of a connection in
// order, so a probe waits behind the consumer's long poll.
const MaxFetchMaxWait = time.Second

// Settings configure a Restorer.
type Settings struct {
	// ReadCommitted reads changelogs read_committed (for exactly-once): aborted records are skipped, and the restore ends at the last stable offset once the transactions open on the changelog at its start have ended (a previous owner's transaction may still commit). The client must then be built with kgo.FetchIsolationLevel(kgo.ReadCommitted()). Default false: read_uncommitted, the end offset is the high watermark.
	ReadCommitted bool
	// Listener receives start, batch and end events (and CheckpointListener events if it implements it). Default none; events are logged either way.
	Listener Listener
	// Logger is the parent logger; the restorer logs under "restore". Default hclog.NewNullLogger().
	Logger hclog.Logger
	// ProbeInterval is how long a partition may go without progress before the restorer checks, with one direct fetch, whether only transaction markers or emptied batches remain before the end offset (a trailing marker is never returned by the consumer, so waiting to see it would hang). Default DefaultProbeInterval (500ms).
	ProbeInterval time.Duration
	// ColdLoadMin is the least changelog, in offsets, that a store without a checkpoint (a
	// cold restore) restores through a store.Loader, whose sorted runs are ingested as
	// sstables; a shorter one goes in batches through Pebble's memtable. Default
	// DefaultColdLoadMin.
	ColdLoadMin int64
}

// DefaultColdLoadMin is the default of Settings.ColdLoadMin. A Loader's run costs an ingest
// whatever its size: its sstables written and synced, and an edit of Pebble's manifest, a few
// milliseconds that the batches of a short changelog do not take. At thousands of tasks with
// short changelogs (a new instance taking half of 4,096 tasks of about 40 records each), the
// ingests were most of the time a move took.
const DefaultColdLoadMin = 4096

// Restorer restores the logged stores of tasks from their changelogs.
//
// It consumes with a dedicated franz-go client that it assigns partitions
// directly (no group). New checks that the client was built with:
//   - kgo.ConsumeResetOffset(kgo.NoResetOffset()), so that a changelog
//     truncated during a restore surfaces as an error instead of silently
//     skipping records;
//   - kgo.FetchMaxWait of at most MaxFetchMaxWait (500ms is a good value), so
//     that end-of-log probes are answered promptly;
//   - kgo.FetchIsolationLevel(kgo.ReadCommitted()) exactly when
//     Settings.ReadCommitted is set.
//
// kgo.KeepControlRecords() is optional: with it, a trailing transaction
// marker ends a restore at once instead of after a probe.
//
// A store that restores through a store.Loader (cold, or a long tail) is read
// with fetch requests of the Restorer's own, sent through the client's broker
// connections (its TLS and SASL), and bounded by its kgo.FetchMaxBytes and
// kgo.FetchMaxPartitionBytes: their record batches are decoded straight into
// the loader, never into kgo.Records.
//
// One Restore runs at a time per Restorer; Restore calls are serialized.
type Restorer struct {
	cl  *kgo.Client
	adm *kadm.Client
	set Settings
	log hclog.Logger
	lis multiListener
	dec kgo.Decompressor // of the batches a load fetches
	mu  sync.Mutex

	loadPartBytes, loadMaxBytes int32 // loadLimits of cl
}

// New returns a Restorer that consumes with cl and lists offsets with adm.
func New(cl *kgo.Client, adm *kadm.Client, s Settings) (*Restorer, error) {
	if cl == nil || adm == nil {
		return nil, errors.New("restore: nil client")
	}
	if off, _ := cl.OptValue(kgo.ConsumeResetOffset).(kgo.Offset); off != kgo.NoResetOffset() {
		return nil, errors.New("restore: the restore client must be built with kgo.ConsumeResetOffset(kgo.NoResetOffset())")
	}
	if g, _ := cl.OptValue(kgo.ConsumerGroup).(string); g != "" {
		return nil, fmt.Errorf("restore: the restore client must not be in a consumer group (it is in %q)", g)
	}
	if w, _ := cl.OptValue(kgo.FetchMaxWait).(time.Duration); w > MaxFetchMaxWait {
		return nil, fmt.Errorf("restore: the restore client's kgo.FetchMaxWait is %v, it must be at most %v", w, MaxFetchMaxWait)
	}
	iso, _ := cl.OptValue(kgo.FetchIsolationLevel).(int8)
	if (iso == 1) != s.ReadCommitted {
		return nil, fmt.Errorf("restore: Settings.ReadCommitted is %v but the client's isolation level is %d", s.ReadCommitted, iso)
	}
	if s.Logger == nil {
		s.Logger = hclog.NewNullLogger()
	}
	if s.ProbeInterval <= 0 {
		s.ProbeInterval = DefaultProbeInterval
	}
	if s.ColdLoadMin <= 0 {
		s.ColdLoadMin = DefaultColdLoadMin
	}
	r := &Restorer{cl: cl, adm: adm, set: s, log: s.Logger.Named("restore"), dec: kgo.DefaultDecompressor()}
	r.loadPartBytes, r.loadMaxBytes = loadLimits(cl)
	r.lis = multiListener{logListener{r.log}}
	if s.Listener != nil {
		r.lis = append(r.lis, s.Listener)
	}
	return r, nil
}

// target is the restore of one store partition.
type target struct {
	proc string
	task int // the index of its task in the restore's
	ls   changelog.LoggedStore
	id   [16]byte
	// leader is the broker that leads the changelog partition, for the fetches of a load.
	leader int32
	start  int64 // first offset to read
	end    int64 // the restore is done when pos >= end; math.MaxInt64 for a standby
	pos    int64 // next offset expected

	// loader, when not nil, takes the records of a cold restore (or a long tail) up to
	// loadEnd, the changelog's end when the restore began (store.Loader); loading is the
	// restore loop's view of it, which the applier owns.
	loader  *store.Loader
	loadEnd int64
	loading bool
	// batchBytes is the size of the largest batch a load's fetch of its changelog brought
	// (of any partition: raiseBatchBytes), when larger than the partition limit: the
	// partition's limit in the next fetches.
	batchBytes int32
	runs       int // the runs its loaders ingested

	total         int64 // the applier's
	began         time.Time
	lastMoved     time.Time
	probeFailures int // consecutive
	done          bool
}

// maxProbeFailures is how many probes in a row may fail before a stalled restore gives up.
const maxProbeFailures = 10

type tpKey struct {
	topic     string
	partition int32
}

// Restore brings every logged store of tasks up to the end of its changelog,
// as captured when the restore begins, and exports the tasks' checkpoint
// files. Each fetch is applied as one batch with the store's checkpoint, so
// an interrupted restore resumes where it stopped.
//
// Stores resume at checkpoint + 1; a checkpoint that does not fit the
// changelog (beyond its end, before its start, or written for a previous topic
// of the same name) is discarded with a warning: the store is wiped and
// restored from the start. A memory store has a checkpoint only for what it
// applied since its task opened (a standby task promoted in place keeps it);
// a freshly opened one restores from the start.
//
// When ctx is cancelled (a rebalance) Restore returns ctx's error promptly;
// every store's checkpoint is at its last applied batch. The tasks must not
// have uncommitted writes.
func (r *Restorer) Restore(ctx context.Context, tasks ...*changelog.Task) error {
	return r.restore(ctx, tasks, false)
}

func (r *Restorer) restore(ctx context.Context, tasks []*changelog.Task, follow bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var targets []*target
	for i, t := range tasks {
		for _, ls := range t.LoggedStores() {
			targets = append(targets, &target{proc: t.Processor(), ls: ls, task: i})
		}
	}
	var err error
	if len(targets) > 0 {
		err = r.run(ctx, targets, follow)
	}
	// Export even after a failure: a wipe or the batches applied so far
	// moved the checkpoints, and the file must not show the old ones. The
	// batches were applied without fsync: sync them first, so that the file
	// never names a checkpoint that a crash can still take back. One sync
	// makes every task's durable (it syncs the write-ahead log the tasks
	// share): the tasks after the first that synced need none of their own.
	// The files are written together, with one sync of the file system for them all.
	for i, t := range tasks {
		if xerr := t.StoreTask().Sync(); xerr != nil {
			r.log.Warn("could not sync the restored batches; the checkpoint file keeps its previous checkpoints", "processor", t.Processor(), "partition", t.Partition(), "error", xerr)
			continue
		}
		if xerr := changelog.ExportAll(tasks[i:]); xerr != nil {
			r.log.Warn("could not export the checkpoint files", "tasks", len(tasks)-i, "error", xerr)
		}
		break
	}
	return err
}

// Follow keeps the logged stores of tasks (standby copies) applying their
// changelogs as they grow, with the same batches and checkpoints as Restore,
// until ctx ends or a fetch fails. It then exports the tasks' checkpoint files
// and returns the error that stopped it: ctx's (wrapped) after a cancel.
//
// It resumes from the checkpoints as Restore does (a checkpoint that does not
// fit the changelog wipes the store), and reads read_committed changelogs up to
// their last stable offset only, so it never applies a record of a transaction
// that may still abort. Call Follow again after an error: an
// *OutOfRangeError (the changelog was truncated under the standby) resolves
// itself at the next start.
func (r *Restorer) Follow(ctx context.Context, tasks ...*changelog.Task) error {
	return r.restore(ctx, tasks, true)
}

// run is the restore loop. With follow set (a standby) it has no end offset
// and runs until ctx is cancelled; it applies the same batches with the same
// checkpoints.
func (r *Restorer) run(ctx context.Context, targets []*target, follow bool) error {
	byTP := make(map[tpKey]*target, len(targets))
	var topics []string
	seen := map[string]bool{}
	for _, tg := range targets {
		k := tpKey{tg.ls.Topic, tg.ls.Partition}
		if byTP[k] != nil {
			return fmt.Errorf("restore: %s partition %d is listed twice", k.topic, k.partition)
		}
		byTP[k] = tg
		if !seen[k.topic] {
			seen[k.topic] = true
			topics = append(topics, k.topic)
		}
	}
	// Forget these topics when done, so that a later restore starts from
	// fresh metadata (a topic may be recreated in between).
	defer r.cl.PurgeTopicsFromConsuming(topics...)

	if err := r.plan(ctx, targets, topics, follow); err != nil {
		return err
	}
	if !slices.ContainsFunc(targets, func(tg *target) bool { return !tg.done }) {
		return nil
	}
	if err := r.openLoaders(targets); err != nil {
		return err
	}

	actx, stopLoop := context.WithCancelCause(ctx)
	defer stopLoop(nil)
	a := newAppliers(r, targets, stopLoop)
	// The loads first, with fetches of their own; then the consumer reads the rest: the
	// tails of stores with a checkpoint, and a standby's changelogs from where it loaded.
	err := r.loadLoop(ctx, actx, a, targets, byTP, topics, follow)
	if err == nil {
		assign := map[string]map[int32]kgo.Offset{}
		active := 0
		for _, tg := range targets {
			if tg.done {
				continue
			}
			if assign[tg.ls.Topic] == nil {
				assign[tg.ls.Topic] = map[int32]kgo.Offset{}
			}
			assign[tg.ls.Topic][tg.ls.Partition] = kgo.NewOffset().At(tg.pos)
			active++
		}
		if active > 0 {
			r.cl.AddConsumePartitions(assign)
			err = r.loop(ctx, actx, a, targets, byTP, active, follow)
		}
	}
	a.stop()
	if err == nil && actx.Err() != nil {
		err = applyFailure(ctx, actx) // the last jobs failed
	}
	return err
}

// openLoaders gives a store.Loader to the Pebble stores of targets that restore at least
// Settings.ColdLoadMin offsets without a checkpoint, or a tail of at least loadMinTail after it.
func (r *Restorer) openLoaders(targets []*target) error {
	for _, tg := range targets {
		part := tg.ls.Part
		if tg.done || !part.Persistent() || tg.loadEnd <= tg.start {
			continue
		}
		_, has, err := part.Checkpoint()
		if err != nil {
			return err
		}
		minLoad := r.set.ColdLoadMin
		if has {
			minLoad = loadMinTail
		}
		if tg.loadEnd-tg.start < minLoad {
			continue
		}
		if tg.loader, err = part.NewLoader(); err != nil {
			for _, o := range targets {
				if o.loader != nil {
					o.loader.Abort()
					o.loader = nil
				}
			}
			return fmt.Errorf("restore: processor %s store %s: %w", tg.proc, tg.ls.Store, err)
		}
		tg.loader.SetEnd(tg.loadEnd)
		tg.loading = true
	}
	return nil
}

// loop reads the changelogs of the targets that do not load (or no longer: a standby that
// loaded) with the client's consumer and hands what it reads to a, until every target is done
// (never, with follow) or actx ends: ctx's end, or a failure of a.
func (r *Restorer) loop(ctx, actx context.Context, a appliers, targets []*target, byTP map[tpKey]*target, active int, follow bool) error {
	for active > 0 {
		pctx, cancel := context.WithTimeout(actx, r.set.ProbeInterval)
		fs := r.cl.PollFetches(pctx)
		cancel()
		if actx.Err() != nil {
			return applyFailure(ctx, actx)
		}
		var ferr error
		fs.EachError(func(topic string, p int32, err error) {
			if ferr != nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				return
			}
			tg := byTP[tpKey{topic, p}]
			switch {
			case tg == nil:
				ferr = fmt.Errorf("restore: consume: %w", err)
			case errors.Is(err, kerr.OffsetOutOfRange):
				ferr = &OutOfRangeError{Topic: topic, Partition: p, Offset: tg.pos, Err: err}
			default:
				ferr = fmt.Errorf("restore: processor %s store %s: consume %s partition %d at offset %d: %w", tg.proc, tg.ls.Store, topic, p, tg.pos, err)
			}
		})
		if ferr != nil {
			return ferr
		}
		stopped := false
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			tg := byTP[tpKey{p.Topic, p.Partition}]
			if stopped || tg == nil || tg.done || len(p.Records) == 0 {
				return
			}
			ws := a.of(tg).buffer()
			if cap(ws) < len(p.Records) {
				ws = make([]store.Write, 0, len(p.Records))
			}
			ws, last := appendRecords(ws, p.Records, tg.pos, tg.end)
			// The position is after the last record read, a control record too.
			for i := len(p.Records) - 1; i >= 0; i-- {
				if o := p.Records[i].Offset; o < tg.end {
					if o >= tg.pos {
						tg.pos = o + 1
						tg.lastMoved = time.Now()
					}
					break
				}
			}
			if len(ws) > 0 && !a.send(actx, applyJob{tg: tg, ws: ws, last: last, hw: p.HighWatermark}) {
				stopped = true
				return
			}
			if tg.pos >= tg.end {
				if !r.finish(actx, a, tg) {
					stopped = true
					return
				}
				active--
			}
		})
		if stopped {
			return applyFailure(ctx, actx)
		}
		if follow {
			continue
		}
		for _, tg := range targets {
			if tg.done || time.Since(tg.lastMoved) < r.set.ProbeInterval {
				continue
			}
			done, err := r.probeStalled(ctx, tg, tg.end)
			if err != nil {
				return err
			}
			if done {
				tg.pos = tg.end
				if !r.finish(actx, a, tg) {
					return applyFailure(ctx, actx)
				}
				active--
			}
		}
	}
	return nil
}

// newTopicWait bounds how long changelogOffsets reads again while a changelog is unknown.
const newTopicWait = 10 * time.Second

// changelogOffsets reads the changelogs' metadata, start offsets and high watermarks. A
// changelog created a moment ago (by this start, or recreated) may be unknown still to the
// broker asked, which learns of it from the controller a moment later on Apache Kafka: while
// one of topics is unknown, or a partition of it has no leader yet, they are read again, with
// backoff, for up to newTopicWait; after that the caller meets the error.
func (r *Restorer) changelogOffsets(ctx context.Context, topics []string) (md kadm.Metadata, starts, hws kadm.ListedOffsets, err error) {
	deadline := time.Now().Add(newTopicWait)
	for backoff := 50 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		// WithAuthorizedOps makes kadm bypass its metadata cache: the topic ID
		// must be the current one.
		if md, err = r.adm.Metadata(kadm.WithAuthorizedOps(ctx), topics...); err != nil {
			return md, nil, nil, fmt.Errorf("restore: describe changelogs: %w", err)
		}
		if starts, err = r.adm.ListStartOffsets(ctx, topics...); err != nil {
			return md, nil, nil, fmt.Errorf("restore: list start offsets: %w", err)
		}
		if hws, err = r.adm.ListEndOffsets(ctx, topics...); err != nil {
			return md, nil, nil, fmt.Errorf("restore: list end offsets: %w", err)
		}
		if !notYetKnown(md, topics, starts, hws) || time.Now().After(deadline) {
			return md, starts, hws, nil
		}
		select {
		case <-ctx.Done():
			return md, nil, nil, ctx.Err()
		case <-time.After(backoff):
		}
	}
}

// notYetKnown reports whether one of topics is missing from md or unknown, or an offset of
// it could not be listed because the broker does not know the partition or its leader yet.
func notYetKnown(md kadm.Metadata, topics []string, listed ...kadm.ListedOffsets) bool {
	early := func(err error) bool {
		return errors.Is(err, kerr.UnknownTopicOrPartition) || errors.Is(err, kerr.LeaderNotAvailable) ||
			errors.Is(err, kerr.NotLeaderForPartition)
	}
	for _, t := range topics {
		if d, ok := md.Topics[t]; !ok || early(d.Err) {
			return true
		}
	}
	for _, l := range listed {
		for _, ps := range l {
			for _, o := range ps {
				if early(o.Err) {
					return true
				}
			}
		}
	}
	return false
}

// plan reads checkpoints and the changelogs' offsets, discards checkpoints
// that do not fit, and sets each target's start and end.
func (r *Restorer) plan(ctx context.Context, targets []*target, topics []string, follow bool) error {
	md, starts, hws, err := r.changelogOffsets(ctx, topics)
	if err != nil {
		return err
	}
	// The high watermarks judge checkpoints; the restore ends at the last
	// stable offset under read_committed, once the transactions open at the
	// start have ended (waitStable). A transaction left open by another
	// producer holds the last stable offset below records that a store may
	// already have applied: that store is up to date, not corrupt.
	ends := hws
	if r.set.ReadCommitted && !follow {
		if ends, err = r.waitStable(ctx, targets, topics, hws); err != nil {
			return err
		}
	}
	for _, tg := range targets {
		topic, p := tg.ls.Topic, tg.ls.Partition
		d, ok := md.Topics[topic]
		if !ok || d.Err != nil {
			cause := errors.New("not found")
			if ok {
				cause = d.Err
			}
			return fmt.Errorf("restore: processor %s store %s: changelog %s: %w", tg.proc, tg.ls.Store, topic, cause)
		}
		if _, ok := d.Partitions[p]; !ok {
			return fmt.Errorf("restore: processor %s store %s: changelog %s has no partition %d", tg.proc, tg.ls.Store, topic, p)
		}
		tg.id, tg.leader = d.ID, d.Partitions[p].Leader
		so, ok1 := starts.Lookup(topic, p)
		eo, ok2 := ends.Lookup(topic, p)
		ho, ok3 := hws.Lookup(topic, p)
		if !ok1 || !ok2 || !ok3 || so.Err != nil || eo.Err != nil || ho.Err != nil {
			return fmt.Errorf("restore: processor %s store %s: list offsets of %s partition %d: %w", tg.proc, tg.ls.Store, topic, p, errors.Join(so.Err, eo.Err, ho.Err, errMissing(ok1 && ok2 && ok3)))
		}
		logStart, logEnd, hw := so.Offset, eo.Offset, ho.Offset
		part := tg.ls.Part
		tg.start = logStart
		// A memory partition's checkpoint covers what it applied since its task opened (a
		// standby promoted in place): it resumes like a persistent one.
		{
			cp, has, err := part.Checkpoint()
			if err != nil {
				return err
			}
			if !has {
				// Data without a checkpoint was never logged (logging was
				// off when it was written): the changelog cannot vouch for
				// it, so it goes before the full restore.
				if dirty, err := part.HasData(); err != nil {
					return err
				} else if dirty {
					r.log.Warn("local data without a checkpoint (was logging disabled?), wiping it and restoring from the start of the changelog",
						"processor", tg.proc, "store", tg.ls.Store, "partition", p, "topic", topic)
					if err := part.Wipe(); err != nil {
						return err
					}
				}
			}
			if has {
				var reason Reason
				switch {
				case cp.Offset >= hw:
					reason = BeyondEnd
				case cp.Offset+1 < logStart:
					reason = BeforeStart
				case cp.LogID != [16]byte{} && d.ID != [16]byte{} && cp.LogID != d.ID:
					reason = Recreated
				}
				if reason != 0 {
					ce := &CheckpointError{Processor: tg.proc, Store: tg.ls.Store, Topic: topic, Partition: p,
						Checkpoint: cp.Offset, LogStart: logStart, LogEnd: hw, Reason: reason}
					r.log.Warn("local state not trusted, wiping it and restoring from the start of the changelog",
						"processor", tg.proc, "store", tg.ls.Store, "partition", p, "offset", cp.Offset,
						"reason", reason.String(), "log_start", logStart, "log_end", hw, "topic", topic)
					r.lis.OnCheckpointDiscarded(ce)
					if err := part.Wipe(); err != nil {
						return err
					}
				} else {
					tg.start = cp.Offset + 1
				}
			}
		}
		part.SetLogID(d.ID)
		tg.end, tg.loadEnd = logEnd, logEnd
		if follow {
			tg.end = math.MaxInt64
		}
		tg.pos = tg.start
		tg.began = time.Now()
		tg.lastMoved = tg.began
		r.lis.OnRestoreStart(StartEvent{Processor: tg.proc, Store: tg.ls.Store, Topic: topic, Partition: p, StartOffset: tg.start, EndOffset: max(logEnd, tg.start)})
		if tg.start >= tg.end {
			tg.done = true
			r.ended(tg)
		}
	}
	return nil
}

// stableLogEvery is how often waitStable logs that it still waits.
const stableLogEvery = 5 * time.Second

// waitStable returns the last stable offsets of topics once, for every target, the
// transactions that were open on its changelog partition when hws were listed have ended:
// the last stable offset has reached that high watermark.
//
// A transaction open on the changelog of a task being restored belongs to its previous
// owner: a zombie (a paused or partitioned instance), or an instance that was killed. If it
// has committed its input offsets already, it will commit, and the restore must include its
// records; if it aborts (its owner is fenced, or the transaction times out), they are
// skipped. Ending the restore at the last stable offset while the transaction is still open
// would lose the records of a transaction that commits later. Transactions that open after
// hws were listed do not hold the restore.
func (r *Restorer) waitStable(ctx context.Context, targets []*target, topics []string, hws kadm.ListedOffsets) (kadm.ListedOffsets, error) {
	began := time.Now()
	lastLog := time.Time{}
	for {
		lsos, err := r.adm.ListCommittedOffsets(ctx, topics...)
		if err != nil {
			return nil, fmt.Errorf("restore: list last stable offsets: %w", err)
		}
		var open []*target
		for _, tg := range targets {
			lso, ok1 := lsos.Lookup(tg.ls.Topic, tg.ls.Partition)
			hw, ok2 := hws.Lookup(tg.ls.Topic, tg.ls.Partition)
			if ok1 && ok2 && lso.Err == nil && hw.Err == nil && lso.Offset < hw.Offset {
				open = append(open, tg)
			}
		}
		if len(open) == 0 {
			if !lastLog.IsZero() {
				r.log.Info("the open transactions on the changelogs have ended", "waited", time.Since(began).Round(time.Millisecond))
			}
			return lsos, nil
		}
		if time.Since(lastLog) >= stableLogEvery {
			for _, tg := range open {
				lso, _ := lsos.Lookup(tg.ls.Topic, tg.ls.Partition)
				hw, _ := hws.Lookup(tg.ls.Topic, tg.ls.Partition)
				r.log.Info("waiting for a transaction open on the changelog to end before restoring (a previous owner's)",
					"processor", tg.proc, "store", tg.ls.Store, "partition", tg.ls.Partition, "topic", tg.ls.Topic,
					"last_stable_offset", lso.Offset, "end_offset", hw.Offset, "waited", time.Since(began).Round(time.Millisecond))
			}
			lastLog = time.Now()
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("restore: stopped while waiting for open transactions on the changelogs: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func errMissing(ok bool) error {
	if ok {
		return nil
	}
	return errors.New("partition missing from the response")
}

// finish stops reading tg's changelog and has the applier end its restore once what was read
// is in the store; false when actx ended first.
func (r *Restorer) finish(actx context.Context, a appliers, tg *target) bool {
	tg.done = true
	r.cl.RemoveConsumePartitions(map[string][]int32{tg.ls.Topic: {tg.ls.Partition}})
	return a.send(actx, applyJob{tg: tg, end: true})
}
