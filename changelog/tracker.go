package changelog

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/store"
)

// tracker follows the records of one task from produce to acknowledgement.
//
// A record is reserved (a place among the Producer's records in flight) and queued when the
// task writes or emits it, and handed to the client by flush, which the runtime calls when
// a plugin call returns (Task.Flush), and wait calls too: the task's records then reach
// franz-go in a tight loop, in the order they were queued, rather than one at a time
// between the plugin's and the store's work: each Produce takes the client's locks and
// walks its topic and partition buffers, which the plugin's work pushes out of the caches
// in between (in CPU profiles of the bench's word count, franz-go's Produce took 0.34-0.56
// µs per record called between them, 0.20-0.28 µs called in a loop). A queued record counts
// as pending, like a record in flight.
//
// The task's goroutine queues and flushes; franz-go calls the promises (done, storeLog.done)
// one at a time on its promise goroutine. pending and the Producer's count of records in
// flight are the only state both touch for every record (atomics, no lock); the rest is
// touched once per failure, or once per wait.
type tracker struct {
	p      *Producer
	closed bool // the task is closed (guarded by p.mu)

	hook    WaitHook                 // told of the waits for room (Task.SetWaitHook); nil: none
	source  Source                   // tells the input record a record belongs to (Task.SetSource); nil: none
	promise func(*kgo.Record, error) // done, made once: a method value allocates at every use
	mem     slab                     // the records and their bytes (the task's goroutine only)
	queue   []queued                 // records not handed to the client yet (the task's goroutine only)
	dirty   bool                     // records were produced since the last wait (the task's goroutine only)

	pending   atomic.Int64  // records queued or in flight: not yet acknowledged or failed
	handOvers atomic.Uint64 // flushes that handed records to the client, ever

	mu   sync.Mutex
	idle chan struct{} // made by a waiting wait; closed by the promise that brings pending to 0
	err  error         // first failure
}

// queued is a record waiting for flush, with its promise.
type queued struct {
	r       *kgo.Record
	promise func(*kgo.Record, error)
}

func newTracker(p *Producer) *tracker {
	t := &tracker{p: p}
	t.promise = t.done
	return t
}

// reserve takes the place of a record of n bytes that Task.Output produces among the
// Producer's records in flight, waiting for room (awaitRoom) until ctx ends when there is
// none.
func (t *tracker) reserve(ctx context.Context, n int64) error {
	if t.p.reserve(n) {
		return nil
	}
	return t.awaitRoom(ctx, false, n)
}

// reserveWrite takes the place of a store write's changelog record of n bytes, waiting for
// room (awaitRoom) until the context the task's hook gives ends when there is none.
func (t *tracker) reserveWrite(n int64) error {
	if t.p.reserve(n) {
		return nil
	}
	return t.awaitRoom(context.Background(), true, n)
}

// awaitRoom is the slow path of reserve: there is no room. It hands the queue to the client
// first (its records have their places, and would otherwise never free them), then waits
// for a place (Producer.await: until ctx ends, or the wait limit), with the task's hook told
// when the wait begins (before the hand-over, which may wait for HoldHandOvers) and ends. For
// a write, the hook's context (the plugin call's) ends the wait too.
func (t *tracker) awaitRoom(ctx context.Context, write bool, n int64) error {
	if h := t.hook; h != nil {
		hctx := h.BeginWait() // the flush too may wait (HoldHandOvers)
		defer h.EndWait()
		if write && hctx != nil {
			ctx = hctx
		}
	}
	t.flush()
	return t.p.await(ctx, n)
}

// unlogged records that a store write could not be logged: the write is in the store but
// not in the changelog, so the task's next commit must fail (wait returns err).
func (t *tracker) unlogged(err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err == nil {
		t.err = err
	}
}

// produce queues r, a record of the tracker's slab whose place is reserved; promise is
// t.promise, or a store log's. r belongs to the input record in when in.Topic is set, else to
// the one the task's Source names, if any (see inputMark).
func (t *tracker) produce(r *kgo.Record, promise func(*kgo.Record, error), in Input) {
	if in.Topic == "" && t.source != nil {
		in, _ = t.source.InputRecord()
	}
	if in.Topic != "" {
		r.Context = t.mem.mark(in)
	}
	t.dirty = true
	t.pending.Add(1)
	t.queue = append(t.queue, queued{r, promise})
}

// maxIdleQueue is the capacity of the queue always kept between flushes; a larger one is
// kept while the flushes use a quarter of it.
const maxIdleQueue = 4096

// flush hands the queued records to the client, in order. It never waits for the client
// (their places are reserved), only while the Producer's HoldHandOvers is held.
func (t *tracker) flush() {
	n := len(t.queue)
	if n == 0 {
		if cap(t.queue) > maxIdleQueue {
			t.queue = nil
		}
		return
	}
	t.p.handOvers.RLock()
	t.handOvers.Add(1)
	for i, q := range t.queue {
		t.p.cl.Produce(context.Background(), q.r, q.promise)
		t.queue[i] = queued{}
	}
	t.p.handed.Add(int64(n))
	t.p.handOvers.RUnlock()
	t.queue = t.queue[:0]
	if c := cap(t.queue); c > maxIdleQueue && n < c/4 {
		t.queue = nil
	}
}

// discard drops the queued records, which are never produced.
func (t *tracker) discard() {
	for i, q := range t.queue {
		t.queue[i] = queued{}
		t.p.left(recordBytes(q.r))
		t.pending.Add(-1)
	}
	t.queue = nil
}

// done is the promise of every record: it counts the record out, after a store log's
// promise has noted its offset.
func (t *tracker) done(r *kgo.Record, err error) {
	if err != nil {
		t.mu.Lock()
		if t.err == nil {
			pe := &ProduceError{Topic: r.Topic, Partition: r.Partition, Err: err}
			if m, ok := r.Context.(*inputMark); ok {
				pe.Input = m.in
			}
			t.err = pe
		}
		t.mu.Unlock()
	}
	t.p.left(recordBytes(r))
	if t.pending.Add(-1) == 0 {
		t.mu.Lock()
		if t.idle != nil {
			close(t.idle)
			t.idle = nil
		}
		t.mu.Unlock()
	}
}

// failure returns the first failure, or nil.
func (t *tracker) failure() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// producedSinceWait reports whether records were produced since the last wait.
func (t *tracker) producedSinceWait() bool {
	return t.dirty || t.pending.Load() > 0 || t.failure() != nil
}

// inFlight returns the number of records produced and not yet acknowledged or failed.
func (t *tracker) inFlight() int { return int(t.pending.Load()) }

// wait flushes the queue, then blocks until every record produced so far is acknowledged or
// failed, and returns the first failure, if any. Once it has returned nil, each store log's
// acked holds the highest acknowledged offset of its partition since the previous wait
// (until the store log takes it). It waits for the records in flight even after a failure,
// so that a task reopened after a failed commit finds every record of its previous
// incarnation in the log (or knows it never will be); when ctx ends first, the error says so
// and the records stay tracked.
func (t *tracker) wait(ctx context.Context) error {
	t.flush()
	for {
		// pending, an atomic, orders the promises' writes (the store logs' offsets, err)
		// before what follows once it reads 0.
		if t.pending.Load() == 0 {
			t.dirty = false
			t.mem = slab{} // the chunks of the records since the last wait go with them
			return t.failure()
		}
		t.mu.Lock()
		if t.pending.Load() == 0 {
			t.mu.Unlock()
			continue
		}
		if t.idle == nil {
			t.idle = make(chan struct{})
		}
		idle, failed := t.idle, t.err
		t.mu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			err := fmt.Errorf("changelog: waiting for the acknowledgement of %d records: %w", t.pending.Load(), ctx.Err())
			return errors.Join(failed, err)
		}
	}
}

// storeLog is the ChangeLogger of one logged store partition: it produces to changelog partition = task partition.
type storeLog struct {
	tr        *tracker
	topic     string
	partition int32
	// clock, when set (window and session stores), stamps each record with the task's
	// stream time, which a restore raises the stream time to. Key-value records get the
	// produce time.
	clock interface{ StreamTime() int64 }

	promise func(*kgo.Record, error) // done, made once
	// acked is the highest acknowledged offset since the last take, -1 for none: written by
	// the promises, read by the task's goroutine after a wait.
	acked int64
}

var _ store.TimedChangeLogger = (*storeLog)(nil)

func newStoreLog(tr *tracker, topic string, partition int32) *storeLog {
	l := &storeLog{tr: tr, topic: topic, partition: partition, acked: -1}
	l.promise = l.done
	return l
}

func (l *storeLog) done(r *kgo.Record, err error) {
	if err == nil && r.Offset > l.acked {
		l.acked = r.Offset
	}
	l.tr.done(r, err)
}

// take returns the highest offset acknowledged since the last take, if any. Call it after a
// wait that returned nil.
func (l *storeLog) take() (int64, bool) {
	o := l.acked
	l.acked = -1
	return o, o >= 0
}

// LogPut queues the changelog record of a put. When the producer has no room for it, it
// waits (tracker.awaitRoom); a wait that ends without room (the plugin call's context ended,
// or the wait limit passed: ErrNoRoom) fails the write, and the task's next commit.
func (l *storeLog) LogPut(key, value []byte) error { return l.LogPutAt(key, value, noStamp) }

// LogDelete queues the changelog record of a delete (a tombstone), as LogPut does.
func (l *storeLog) LogDelete(key []byte) error { return l.LogDeleteAt(key, noStamp) }

// LogPutAt is LogPut with the record's timestamp ts in milliseconds (noStamp: stamp's); a
// store with a TTL gives its entries' write times (store.TimedChangeLogger).
func (l *storeLog) LogPutAt(key, value []byte, ts int64) error {
	if err := l.tr.reserveWrite(int64(len(key) + len(value))); err != nil {
		return l.noRoom(err)
	}
	r := l.tr.mem.record()
	r.Topic, r.Partition = l.topic, l.partition
	// Neither is nil: compacted topics need a key, and a nil value is a tombstone.
	r.Key, r.Value = l.tr.mem.copy(key), l.tr.mem.copy(value)
	l.tr.produce(l.stamp(r, ts), l.promise, Input{})
	return nil
}

// LogDeleteAt is LogDelete with the record's timestamp ts, as LogPutAt.
func (l *storeLog) LogDeleteAt(key []byte, ts int64) error {
	if err := l.tr.reserveWrite(int64(len(key))); err != nil {
		return l.noRoom(err)
	}
	r := l.tr.mem.record()
	r.Topic, r.Partition = l.topic, l.partition
	r.Key = l.tr.mem.copy(key)
	l.tr.produce(l.stamp(r, ts), l.promise, Input{})
	return nil
}

// noStamp is the timestamp of LogPutAt and LogDeleteAt that leaves the record's to stamp.
const noStamp = math.MinInt64

// noRoom returns the error of a write whose changelog record found no room, after failing
// the task's next commit with it.
func (l *storeLog) noRoom(err error) error {
	err = fmt.Errorf("changelog: write to %s partition %d: waiting for room among the producer's %s: %w",
		l.topic, l.partition, l.tr.p.bound(), err)
	l.tr.unlogged(err)
	return err
}

// stamp sets r's timestamp to ts, unless it is noStamp; else to the stream time when the
// store is windowed. Before the task's first record (a write from a plugin's init) the stream
// time is unknown: the timestamp is then 0, which a restore cannot mistake for a stream time.
// Otherwise the record gets the time it is produced at.
func (l *storeLog) stamp(r *kgo.Record, ts int64) *kgo.Record {
	if ts != noStamp {
		r.Timestamp = time.UnixMilli(ts)
	} else if l.clock != nil {
		r.Timestamp = time.UnixMilli(max(l.clock.StreamTime(), 0))
	}
	return r
}
