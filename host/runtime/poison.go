package runtime

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/statehost/statehost/changelog"
	"github.com/statehost/statehost/config"
	"github.com/statehost/statehost/host/engine"
	"github.com/statehost/statehost/internal/recordbatch"
	"github.com/statehost/statehost/store"
)

// Poison records: a processor's on_error policy.
//
// A poison record is an input record the plugin fails on while it is the current record (the
// *engine.GuestError that ProcessBatch returns is attributed to it, and its cause is the
// guest's: an error result, a trap, a panic, an exit, running out of memory or out of time,
// or emits past the record's emit budget).
// With on_error = "fail" (the default) the error stops the task and the application. With
// "skip" or "dead_letter" the task drops the record and goes on:
//
//   - What the guest did for the record before it failed is withdrawn. Its emits were held
//     back: the guard hands a record's emits to the producer only once the guest works on a
//     later record or the batch ends, so the poison record's are dropped. Its store writes
//     went to the stores (and their changelogs) at once: the guard keeps, for the current
//     record, what each key held before the record first wrote it, and writes that back.
//     The changelog then holds the poison record's writes followed by their undoing, which a
//     restore applies in the same order: the state is as if the record never came (the
//     writes are in the transaction under exactly-once, as everything the task does).
//   - The records before it keep their effects, and the batch goes on after it with a new
//     instance (the failed one is dead), so nothing is processed twice.
//   - A record that ran out of time or memory is withdrawn and tried again alone on a new
//     instance first (the time limit is the whole call's, and the heap grows over a batch):
//     it is poison only if it fails again.
//   - "dead_letter" produces the record to <application_id>-<processor>-dlq through the
//     task's output, so the commit waits for it as for any output (in the transaction under
//     exactly-once), with headers that say why and where it came from.
//
// What is not withdrawn: the record's timestamp has raised the task's stream time (the guest
// took the record), and late or expired window writes it made were counted as dropped. A
// crash while the poison record is handled (between its writes and their undoing) is the
// guarantee's usual crash: under at-least-once its writes may then stay in the changelog
// that the next run restores.
//
// The cost, for processors with skip or dead_letter only: one store read per key a record
// writes (its former value), and a copy of each emitted record until the next record.

// Headers of a dead-lettered record, after its own.
const (
	HeaderError     = "statehost.error"     // the plugin's failure, as the error text of the "fail" policy
	HeaderProcessor = "statehost.processor" // the processor
	HeaderTopic     = "statehost.topic"     // the record's source topic
	HeaderPartition = "statehost.partition" // its partition, decimal
	HeaderOffset    = "statehost.offset"    // its offset, decimal

	// A dead letter that would not fit the dead-letter topic (its record larger than the
	// topic's limit, limits.go: the record the broker took, plus the headers above) is cut to
	// fit, never dropped: its value first, then, if that is not enough, its own headers, its
	// key, and the text of statehost.error, each as little as needed. These headers, after
	// the others, say what was cut:

	HeaderTruncated      = "statehost.truncated"       // the original length of the value, decimal, when it was cut
	HeaderDroppedHeaders = "statehost.dropped_headers" // the number of the record's own headers, dropped
	HeaderKeyTruncated   = "statehost.truncated_key"   // the original length of the key, when it was cut
)

// PoisonReason returns the reason label of statehost_records_skipped_total for a guest
// failure, and whether the failure makes its record a poison record: a failure of the guest
// itself, not of a host function, the ABI call sequence or a stop (statehost test's driver
// judges its guests' failures with it too).
func PoisonReason(err error) (ge *engine.GuestError, reason string, ok bool) {
	if !errors.As(err, &ge) || ge.Offset < 0 {
		return nil, "", false
	}
	if errors.Is(ge, changelog.ErrNoRoom) {
		// A write or emit waited for room in the producer for its whole wait limit (the
		// broker is away): whatever the guest did then, not the record's fault (and a write
		// that could not be logged fails the task's commit anyway).
		return ge, "", false
	}
	switch ge.Kind {
	case engine.ErrGuestFailed:
		return ge, "error", true
	case engine.ErrTrap:
		return ge, "trap", true
	case engine.ErrPanic:
		return ge, "panic", true
	case engine.ErrExit:
		return ge, "exit", true
	case engine.ErrOutOfMemory:
		return ge, "out_of_memory", true
	case engine.ErrEmitBudget:
		return ge, "emit_budget", true
	case engine.ErrTimeout:
		if errors.Is(ge, engine.ErrEmit) {
			// An emit gave up waiting for the producer (a broker away, a full buffer) at the
			// deadline: not the record's fault, and no retry alone would fix it. The task's
			// own waits for room are not charged to the time limit (engine.HostWaits), so
			// this is an Emitter that waits otherwise, or a limit that had run out in guest
			// code as the wait began; stopping is the safe side either way.
			return ge, "", false
		}
		return ge, "timeout", true
	}
	return ge, "", false
}

// poisonGuard keeps what a task needs to withdraw the current record's effects: the former
// values of the keys it wrote, and its emits, held back. It is active only while ProcessBatch
// runs; writes and emits outside (the plugin's init, punctuations) go through at once.
type poisonGuard struct {
	t      *task
	active bool

	undoAt int            // the record whose writes undo can withdraw
	undo   []func() error // writes back the former values, in write order
	seen   map[string]bool

	staged  []stagedEmit
	records []engine.Record // the records of the call (begin), which stagedEmit.at indexes
}

type stagedEmit struct {
	at  int // the record it belongs to
	rec engine.OutputRecord
}

func newPoisonGuard(t *task) *poisonGuard {
	return &poisonGuard{t: t, undoAt: -1, seen: map[string]bool{}}
}

// idle lets go of what the guard kept for the batch that ended: the records (their keys and
// values are the fetch's buffers), the former values of the undo, the held emits. Kept with
// the task until its next batch, they would grow with tasks, not workers.
func (g *poisonGuard) idle() {
	g.records, g.undo, g.staged, g.undoAt = nil, nil, nil, -1
	if len(g.seen) > 0 {
		g.seen = map[string]bool{} // clear keeps a map's buckets
	}
}

// begin starts a ProcessBatch call of records.
func (g *poisonGuard) begin(records []engine.Record) {
	g.active, g.undoAt, g.undo, g.staged = true, -1, g.undo[:0], g.staged[:0]
	g.records = records
	clear(g.seen)
}

// current returns the record the guest works on.
func (g *poisonGuard) current() int {
	if g.t.inst == nil {
		return -1
	}
	return g.t.inst.Current()
}

// succeeded ends a call that succeeded: every held emit goes to the producer.
func (g *poisonGuard) succeeded(ctx context.Context) error {
	g.active = false
	return g.release(ctx, math.MaxInt)
}

// failed ends a call that failed on the record at index poison (see engine.Instance.Current):
// the emits of the records before it go to the producer, and the writes and emits of the
// poison record, if it was the current one, are withdrawn.
func (g *poisonGuard) failed(ctx context.Context, poison int) error {
	g.active = false
	if err := g.release(ctx, poison); err != nil {
		return err
	}
	g.staged = g.staged[:0] // the poison record's
	if g.undoAt != poison {
		return nil // it wrote nothing
	}
	for i := len(g.undo) - 1; i >= 0; i-- {
		if err := g.undo[i](); err != nil {
			return fmt.Errorf("undoing a write of the failed record: %w", err)
		}
	}
	return nil
}

// release hands the held emits of the records before index before to the producer, which
// may wait for room until ctx ends.
func (g *poisonGuard) release(ctx context.Context, before int) error {
	n := 0
	for _, s := range g.staged {
		if s.at >= before {
			break
		}
		if err := g.t.output(ctx, s.rec, g.input(s.at)); err != nil {
			return err
		}
		n++
	}
	g.staged = append(g.staged[:0], g.staged[n:]...)
	return nil
}

// input names the record at index at of the batch in progress: the input record of its held
// emits, which go to the producer while the guest works on a later record, or after the call.
func (g *poisonGuard) input(at int) changelog.Input {
	if at < 0 || at >= len(g.records) {
		return changelog.Input{}
	}
	r := &g.records[at]
	return changelog.Input{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
}

// emit holds rec back until the guest works on a later record, handing over the emits of
// the records before the current one first.
func (g *poisonGuard) emit(ctx context.Context, rec engine.OutputRecord) error {
	at := g.current()
	if err := g.release(ctx, at); err != nil {
		return err
	}
	// The slices are views of guest memory, valid only during the host call.
	rec.Key, rec.Value = cloneOrNil(rec.Key), cloneOrNil(rec.Value)
	if len(rec.Headers) > 0 {
		hs := make([]engine.Header, len(rec.Headers))
		for i, h := range rec.Headers {
			hs[i] = engine.Header{Key: h.Key, Value: cloneOrNil(h.Value)}
		}
		rec.Headers = hs
	}
	g.staged = append(g.staged, stagedEmit{at: at, rec: rec})
	return nil
}

// wrote prepares a write of the current record to the entry id (a store and a key): the first
// time the record writes id, former reads what id holds now and returns the write that puts it
// back, for the undo. Outside a ProcessBatch call it does nothing.
func (g *poisonGuard) wrote(id string, former func() (restore func() error, err error)) error {
	if !g.active {
		return nil
	}
	if at := g.current(); at != g.undoAt {
		g.undoAt, g.undo = at, g.undo[:0] // the previous record is done
		clear(g.seen)
	}
	if g.seen[id] {
		return nil
	}
	restore, err := former()
	if err != nil {
		return err
	}
	g.seen[id] = true
	g.undo = append(g.undo, restore)
	return nil
}

func cloneOrNil(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}

// The guards hold their store in a field rather than embed it, and pass each read on
// explicitly: a method added to a store interface, a write that would need an undo, does not
// compile here until it is handled.
var (
	_ store.Store        = guardedStore{}
	_ store.WindowStore  = guardedWindows{}
	_ store.SessionStore = guardedSessions{}
)

// guardedStore is a key-value store of a task whose processor withdraws poison records: each
// write first notes how to undo it (poisonGuard.wrote).
type guardedStore struct {
	inner store.Store
	g     *poisonGuard
	name  string
}

func (s guardedStore) Get(key []byte) ([]byte, bool, error) { return s.inner.Get(key) }

func (s guardedStore) Range(start, end []byte) (store.Iterator, error) {
	return s.inner.Range(start, end)
}

func (s guardedStore) Prefix(prefix []byte) (store.Iterator, error) { return s.inner.Prefix(prefix) }

func (s guardedStore) before(key []byte) error {
	return s.g.wrote(s.name+"\x00"+string(key), func() (func() error, error) {
		old, found, err := s.inner.Get(key)
		if err != nil {
			return nil, err
		}
		k, v := cloneOrNil(key), cloneOrNil(old)
		if !found {
			return func() error { return s.inner.Delete(k) }, nil
		}
		return func() error { return s.inner.Put(k, v) }, nil
	})
}

func (s guardedStore) Put(key, value []byte) error {
	if err := s.before(key); err != nil {
		return err
	}
	return s.inner.Put(key, value)
}

func (s guardedStore) Delete(key []byte) error {
	if err := s.before(key); err != nil {
		return err
	}
	return s.inner.Delete(key)
}

// guardedWindows is a window store of a task whose processor withdraws poison records.
type guardedWindows struct {
	inner store.WindowStore
	g     *poisonGuard
	name  string
}

func (s guardedWindows) Get(key []byte, start int64) ([]byte, bool, error) {
	return s.inner.Get(key, start)
}

func (s guardedWindows) Fetch(key []byte, from, to int64) (store.WindowIterator, error) {
	return s.inner.Fetch(key, from, to)
}

func (s guardedWindows) FetchAll(from, to int64) (store.WindowIterator, error) {
	return s.inner.FetchAll(from, to)
}

func (s guardedWindows) Spec() store.WindowSpec { return s.inner.Spec() }

func (s guardedWindows) Put(key []byte, start int64, value []byte) (bool, error) {
	id := s.name + "\x00" + string(binary.BigEndian.AppendUint64(nil, uint64(start))) + string(key)
	err := s.g.wrote(id, func() (func() error, error) {
		old, found, err := s.inner.Get(key, start)
		if err != nil {
			return nil, err
		}
		k, v := cloneOrNil(key), cloneOrNil(old)
		switch {
		case !found:
			v = nil // a nil value deletes
		case v == nil:
			v = []byte{} // an empty value, not a delete
		}
		return func() error {
			stored, err := s.inner.Put(k, start, v)
			if err == nil && !stored && v != nil {
				// The record's timestamp closed the window it changed: the old value can no
				// longer be put back, and going on would lose it.
				err = fmt.Errorf("cannot undo the write of window store %q at %d: the window closed", s.name, start)
			}
			return err
		}, nil
	})
	if err != nil {
		return false, err
	}
	return s.inner.Put(key, start, value)
}

// guardedSessions is a session store of a task whose processor withdraws poison records.
type guardedSessions struct {
	inner store.SessionStore
	g     *poisonGuard
	name  string
}

func (s guardedSessions) Get(key []byte, start, end int64) ([]byte, bool, error) {
	return s.inner.Get(key, start, end)
}

func (s guardedSessions) Find(key []byte, earliestEnd, latestStart int64) (store.WindowIterator, error) {
	return s.inner.Find(key, earliestEnd, latestStart)
}

func (s guardedSessions) FindAll(earliestEnd, latestEnd int64) (store.WindowIterator, error) {
	return s.inner.FindAll(earliestEnd, latestEnd)
}

func (s guardedSessions) Spec() store.WindowSpec { return s.inner.Spec() }

func (s guardedSessions) Put(key []byte, start, end int64, value []byte) (bool, error) {
	b := binary.BigEndian.AppendUint64(nil, uint64(start))
	b = binary.BigEndian.AppendUint64(b, uint64(end))
	err := s.g.wrote(s.name+"\x00"+string(b)+string(key), func() (func() error, error) {
		old, found, err := s.inner.Get(key, start, end)
		if err != nil {
			return nil, err
		}
		k, v := cloneOrNil(key), cloneOrNil(old)
		switch {
		case !found:
			v = nil // a nil value removes the session
		case v == nil:
			v = []byte{} // an empty value, not a removal
		}
		return func() error {
			stored, err := s.inner.Put(k, start, end, v)
			if err == nil && !stored && v != nil {
				// As for windows: the session closed, its old value cannot be put back.
				err = fmt.Errorf("cannot undo the write of session store %q at [%d, %d]: the session closed", s.name, start, end)
			}
			return err
		}, nil
	})
	if err != nil {
		return false, err
	}
	return s.inner.Put(key, start, end, value)
}

// processGuarded hands records to the plugin as process does for a processor whose on_error
// is skip or dead_letter: a poison record is withdrawn, skipped or dead-lettered, and the
// records after it go to a new instance. A record that ran out of time or memory may owe it
// to the records before it in the call (the time limit is the whole call's, and the guest's
// heap grows over a batch): it is tried again alone on a new instance first, and is poison
// only if it fails again. It returns how many records the plugin processed.
func (t *task) processGuarded(ctx context.Context, records []engine.Record) (int, error) {
	processed := 0
	alone := false // records[0] is tried again alone
	for len(records) > 0 {
		call := records
		if alone {
			call = records[:1]
		}
		t.guard.begin(call)
		err := t.inst.ProcessBatch(ctx, call)
		if err == nil {
			if err := t.guard.succeeded(ctx); err != nil {
				return processed, fmt.Errorf("runtime: task %s: %w", t.id, err)
			}
			processed += len(call)
			records, alone = records[len(call):], false
			continue
		}
		ge, reason, ok := PoisonReason(err)
		k := -1
		if ok {
			for i := range call {
				if call[i].Offset == ge.Offset && call[i].Topic == ge.Topic {
					k = i
					break
				}
			}
		}
		if k < 0 || k < t.inst.Current() {
			t.guard.active = false
			return processed, err // not the record's fault: the task fails
		}
		if uerr := t.guard.failed(ctx, k); uerr != nil {
			return processed, fmt.Errorf("runtime: task %s: withdrawing poison record %s partition %d offset %d: %w (after: %w)",
				t.id, ge.Topic, ge.Partition, ge.Offset, uerr, err)
		}
		processed += k
		rec := call[k]
		retry := !alone && (errors.Is(ge.Kind, engine.ErrTimeout) || errors.Is(ge.Kind, engine.ErrOutOfMemory))
		if retry {
			t.rt.log.Warn("record failed: trying it again alone on a new instance", "processor", t.id.Processor, "topic", rec.Topic,
				"partition", rec.Partition, "offset", rec.Offset, "reason", reason, "error", ge.Error())
		} else if err := t.dropPoison(ctx, rec, ge, reason); err != nil {
			return processed, err
		}
		if err := t.restartPlugin(ctx, retry); err != nil {
			return processed, err
		}
		records, alone = records[k:], retry
		if !retry {
			records = records[1:]
		}
	}
	return processed, nil
}

// restartPlugin replaces the task's dead instance: the pool closes it, and lends another
// of the module the task ran, not the processor's newest (a deployed module takes over at a
// commit boundary, switchModules, never in the middle of an interval); a new one when fresh,
// for a record tried again alone after it ran out of time or memory, which an idle
// instance's memory, grown by other tasks' calls, must not decide. The task's punctuation
// times are its own (engine.TaskState): they carry over.
func (t *task) restartPlugin(ctx context.Context, fresh bool) error {
	t.giveBack(ctx)
	if !fresh {
		return t.borrow(ctx) // on failure the job fails, and with it the task
	}
	in, err := t.pool.GetFresh(ctx, t.et)
	if err != nil {
		return fmt.Errorf("runtime: task %s: start the plugin: %w", t.id, err)
	}
	t.inst = in
	return nil
}

// dropPoison skips or dead-letters the poison record rec that failed with ge.
func (t *task) dropPoison(ctx context.Context, rec engine.Record, ge *engine.GuestError, reason string) error {
	proc := t.id.Processor
	kv := []any{"processor", proc, "topic", rec.Topic, "partition", rec.Partition, "offset", rec.Offset, "reason", reason, "error", ge.Error()}
	if t.proc.cfg.OnError == config.OnErrorDeadLetter {
		dlq := t.rt.cfg.DeadLetterTopic(proc)
		if err := t.deadLetter(ctx, dlq, rec, ge); err != nil {
			return fmt.Errorf("runtime: task %s: dead-lettering %s partition %d offset %d to %s: %w", t.id, rec.Topic, rec.Partition, rec.Offset, dlq, err)
		}
		t.rt.metrics.deadLettered(proc)
		t.rt.log.Warn("poison record sent to the dead-letter topic", append(kv, "dead_letter_topic", dlq)...)
		return nil
	}
	t.rt.metrics.skipped(proc, reason)
	t.rt.log.Warn("poison record skipped", kv...)
	return nil
}

// deadLetter produces rec to the dead-letter topic dlq, with its key, value, timestamp and
// headers and the headers that say why and where it came from, through the task's output.
func (t *task) deadLetter(ctx context.Context, dlq string, rec engine.Record, ge *engine.GuestError) error {
	n, ok := t.rt.outParts[dlq]
	if !ok || n < 1 {
		return fmt.Errorf("the dead-letter topic %s is unknown", dlq)
	}
	out := changelog.OutputRecord{
		Topic:     dlq,
		Partition: rec.Partition % n,
		Key:       rec.Key,
		Value:     rec.Value,
		Timestamp: rec.Timestamp,
	}
	for _, h := range rec.Headers {
		out.Headers = append(out.Headers, changelog.Header{Key: h.Key, Value: h.Value})
	}
	out.Headers = append(out.Headers,
		changelog.Header{Key: HeaderError, Value: []byte(ge.Error())},
		changelog.Header{Key: HeaderProcessor, Value: []byte(t.id.Processor)},
		changelog.Header{Key: HeaderTopic, Value: []byte(rec.Topic)},
		changelog.Header{Key: HeaderPartition, Value: []byte(strconv.Itoa(int(rec.Partition)))},
		changelog.Header{Key: HeaderOffset, Value: []byte(strconv.FormatInt(rec.Offset, 10))},
	)
	out.Input = changelog.Input{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset}
	fitDeadLetter(&out, len(rec.Headers), t.rt.limits[dlq])
	return t.cl.Output(ctx, out)
}

// fitDeadLetter cuts the dead letter out, whose first own headers are the record's, until its
// record batch takes at most limit bytes (0: no limit), saying what it cut in headers (see
// HeaderTruncated).
func fitDeadLetter(out *changelog.OutputRecord, own, limit int) {
	over := func() int {
		hb := 0
		for _, h := range out.Headers {
			hb += recordbatch.Header(len(h.Key), len(h.Value))
		}
		return recordbatch.Size(len(out.Key), len(out.Value), len(out.Headers), hb) - limit
	}
	if limit <= 0 || over() <= 0 {
		return
	}
	note := func(key string, n int) {
		out.Headers = append(out.Headers, changelog.Header{Key: key, Value: []byte(strconv.Itoa(n))})
	}
	cut := func(b []byte) []byte { return b[:max(len(b)-over(), 0)] } // cutting n bytes saves at least n
	note(HeaderTruncated, len(out.Value))
	if out.Value = cut(out.Value); over() <= 0 {
		return
	}
	if own > 0 {
		note(HeaderDroppedHeaders, own)
		if out.Headers = out.Headers[own:]; over() <= 0 {
			return
		}
	}
	note(HeaderKeyTruncated, len(out.Key))
	if out.Key = cut(out.Key); over() <= 0 {
		return
	}
	for i := range out.Headers {
		if out.Headers[i].Key == HeaderError {
			out.Headers[i].Value = cut(out.Headers[i].Value)
		}
	}
}
