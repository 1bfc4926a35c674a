package changelog

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Producer produces the changelog and output records of the tasks of an instance through one franz-go client.
//
// The client must be built with kgo.RecordPartitioner(kgo.ManualPartitioner()):
// store partition N writes changelog partition N, and output records carry
// the partition the runtime chose. It must keep the client's default of
// acks=all (a checkpoint must never name a record that a leader failover can
// lose); keep idempotence on too. A Producer is safe for concurrent use.
//
// The Producer also keeps the instance's bookkeeping of tasks: which
// processor owns each store name (a changelog topic has one writer per
// partition), and the records still in flight of tasks that were closed
// before their records were acknowledged.
//
// Backpressure: franz-go blocks a Produce while the client buffers its
// kgo.MaxBufferedRecords (50,000 by default), and watches no context of ours
// meanwhile (a context given to Produce would also cancel the record once
// buffered). So every record first reserves a place among the records the
// Producer lets be in flight (one fewer than that limit, so that franz-go
// itself never blocks), and room for its bytes among the bytes in flight
// (WithMaxBytesInFlight, DefaultMaxBytesInFlight: what the records in flight
// hold, whatever their number), waiting for both when there is not (the slow
// path): until there is room, until a context ends (Task.Output's; for a store
// write, which takes none, the context its task's WaitHook gives, the plugin
// call's), or for the Producer's wait limit (WithWaitLimit, DefaultWaitLimit),
// after which the write or output fails with an error matching ErrNoRoom. The
// task's WaitHook is told when such a wait begins and ends: the runtime takes
// it off the plugin call's time limit.
type Producer struct {
	cl        *kgo.Client
	waitLimit time.Duration // the longest wait for room (WithWaitLimit)

	limit     int64        // records in flight at most: the client's kgo.MaxBufferedRecords - 1
	byteLimit int64        // bytes in flight at most, give or take a record per producer (WithMaxBytesInFlight)
	buffered  atomic.Int64 // records in flight (reserved, and not yet acknowledged or failed), of every task
	bytes     atomic.Int64 // their bytes (recordBytes)
	waiting   atomic.Int32 // producers waiting for room
	roomMu    sync.Mutex
	room      chan struct{} // closed when a record leaves while producers wait (guarded by roomMu)

	// handOvers is held shared by every flush of a task's queue to the client, and
	// exclusively by HoldHandOvers: under exactly-once, no record reaches the client while a
	// transaction ends (franz-go forbids Produce concurrently with End and Begin).
	handOvers sync.RWMutex
	handed    atomic.Int64 // records handed to the client so far, of every task (HandedOver)

	mu       sync.Mutex
	owners   map[string]string    // store name -> processor
	trackers map[taskKey]*tracker // open tasks, and closed ones with records in flight
}

type taskKey struct {
	processor string
	partition int32
}

// DefaultWaitLimit is the default of WithWaitLimit: as long as the runtime retries a broker
// call it cannot go on without while the broker is out of reach (Kafka Streams'
// task.timeout.ms).
const DefaultWaitLimit = 5 * time.Minute

// ErrNoRoom is matched by the error of a store write or an output that waited the Producer's
// wait limit for room among its records in flight: the broker acknowledged too few records
// meanwhile (it is away, or too slow). The write or output is not made.
var ErrNoRoom = errors.New("changelog: no room in the producer")

// DefaultMaxBytesInFlight is the default of WithMaxBytesInFlight: 64 MiB, as many bytes as
// 64 of the largest records a broker takes by default (message.max.bytes, 1 MiB), and a
// small part of a host's memory.
const DefaultMaxBytesInFlight = 64 << 20

// ProducerOption configures a Producer.
type ProducerOption func(*Producer)

// WithMaxBytesInFlight bounds the bytes (keys, values and headers: recordBytes) of the
// records in flight, of every task: a record waits for room as for a place among the records
// in flight. A record is let in while the records in flight hold less than n, so the bound is
// passed by at most one record per producing task (a record larger than n still goes, alone).
// Default DefaultMaxBytesInFlight; n <= 0 keeps it.
func WithMaxBytesInFlight(n int64) ProducerOption {
	return func(p *Producer) {
		if n > 0 {
			p.byteLimit = n
		}
	}
}

// WithWaitLimit bounds how long one record waits for room among the producer's records in
// flight before its write or output fails (ErrNoRoom). Default DefaultWaitLimit; d <= 0
// keeps it.
func WithWaitLimit(d time.Duration) ProducerOption {
	return func(p *Producer) {
		if d > 0 {
			p.waitLimit = d
		}
	}
}

// NewProducer returns a Producer over cl, after checking that cl honours record partitions.
func NewProducer(cl *kgo.Client, opts ...ProducerOption) (*Producer, error) {
	if cl == nil {
		return nil, errors.New("changelog: nil kgo client")
	}
	p, _ := cl.OptValue(kgo.RecordPartitioner).(kgo.Partitioner)
	if p == nil || !honoursPartition(p) {
		return nil, errors.New("changelog: the producer client must use kgo.RecordPartitioner(kgo.ManualPartitioner())")
	}
	if acks, _ := cl.OptValue(kgo.RequiredAcks).(kgo.Acks); acks != kgo.AllISRAcks() {
		return nil, errors.New("changelog: the producer client must use kgo.RequiredAcks(kgo.AllISRAcks()) (the default)")
	}
	limit, _ := cl.OptValue(kgo.MaxBufferedRecords).(int64)
	// One fewer: franz-go counts a record out only after its promise, which counts it out
	// here first.
	limit = max(limit-1, 1)
	prod := &Producer{cl: cl, waitLimit: DefaultWaitLimit, limit: limit, byteLimit: DefaultMaxBytesInFlight,
		owners: map[string]string{}, trackers: map[taskKey]*tracker{}}
	for _, o := range opts {
		o(prod)
	}
	return prod, nil
}

// HoldHandOvers keeps every task's queued records from reaching the client until release is
// called: a flush that begins meanwhile waits. The runtime holds it while a transaction ends
// and the next one begins, and reads Task.HandedOver of the tasks it leaves out of the
// transaction while it holds it.
func (p *Producer) HoldHandOvers() (release func()) {
	p.handOvers.Lock()
	return p.handOvers.Unlock
}

// HandedOver returns how many records every task has handed to the client so far: under
// exactly-once, a transaction whose count did not change since it began has produced nothing.
func (p *Producer) HandedOver() int64 { return p.handed.Load() }

// WaitLimit returns the longest a record waits for room (WithWaitLimit).
func (p *Producer) WaitLimit() time.Duration { return p.waitLimit }

// MaxBytesInFlight returns the bound on the bytes of the records in flight
// (WithMaxBytesInFlight).
func (p *Producer) MaxBytesInFlight() int64 { return p.byteLimit }

// recordBytes is what a record counts among the bytes in flight: its key, value, and header
// keys and values, the bytes it holds beyond its fixed size (which the bound on records
// bounds). franz-go's own count of buffered bytes (kgo.MaxBufferedBytes) is the same.
func recordBytes(r *kgo.Record) int64 {
	n := len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return int64(n)
}

// take takes a place for one record of n bytes among the records in flight, and reports
// whether there was room for both: a place, and bytes in flight below the bound before it.
// When there was not, it takes nothing, and returns the counts after giving them back, for
// the caller to tell whether room came meanwhile.
func (p *Producer) take(n int64) (ok bool, recs, bytes int64) {
	recs = p.buffered.Add(1)
	bytes = p.bytes.Add(n)
	if recs <= p.limit && bytes-n < p.byteLimit {
		return true, 0, 0
	}
	return false, p.buffered.Add(-1), p.bytes.Add(-n)
}

// reserve takes a place for one record of n bytes among the records in flight. It returns
// false when there is no room: then the caller may flush its queue (its records have their
// places) and await one.
func (p *Producer) reserve(n int64) bool {
	if ok, _, _ := p.take(n); ok {
		return true
	}
	p.wake() // what it took for a moment may have kept another from room
	return false
}

// await takes a place for one record of n bytes, waiting for room while there is none, until
// ctx ends (then it returns ctx's error) or for the wait limit (then an error matching
// ErrNoRoom), taking nothing then.
func (p *Producer) await(ctx context.Context, n int64) error {
	p.waiting.Add(1)
	defer p.waiting.Add(-1)
	var bound <-chan time.Time // made at the first wait: room is often there already
	for {
		p.roomMu.Lock()
		ok, recs, bytes := p.take(n)
		if ok {
			p.roomMu.Unlock()
			return nil
		}
		if recs < p.limit && bytes < p.byteLimit { // room came meanwhile, maybe without waking anyone
			p.roomMu.Unlock()
			continue
		}
		if p.room == nil {
			p.room = make(chan struct{})
		}
		room := p.room
		p.roomMu.Unlock()
		if bound == nil {
			t := time.NewTimer(p.waitLimit)
			defer t.Stop()
			bound = t.C
		}
		select {
		case <-room:
		case <-ctx.Done():
			return ctx.Err()
		case <-bound:
			return fmt.Errorf("%w for %v: the broker acknowledged too few of its records meanwhile (is it away?)", ErrNoRoom, p.waitLimit)
		}
	}
}

// left gives back the place of a record of n bytes, waking the producers that wait for room.
func (p *Producer) left(n int64) {
	p.buffered.Add(-1)
	p.bytes.Add(-n)
	p.wake()
}

// wake wakes the producers that wait for room, if any: they try again (await).
func (p *Producer) wake() {
	if p.waiting.Load() > 0 {
		p.roomMu.Lock()
		if p.room != nil {
			close(p.room)
			p.room = nil
		}
		p.roomMu.Unlock()
	}
}

// bound describes the Producer's bounds on the records in flight, for errors: "the
// producer's " + bound().
func (p *Producer) bound() string {
	return fmt.Sprintf("%d records in flight and %d bytes in flight", p.limit, p.byteLimit)
}

// claim registers processor as the owner of the logged stores named stores,
// and a new tracker for the task (processor, partition). It refuses a store
// that another processor owns, and a task whose previous incarnation still
// has records in flight.
func (p *Producer) claim(processor string, partition int32, stores []string) (*tracker, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range stores {
		if o, ok := p.owners[s]; ok && o != processor {
			return nil, fmt.Errorf("changelog: store %q of processor %q is already the store of processor %q: a store name (and its changelog topic) belongs to one processor", s, processor, o)
		}
	}
	k := taskKey{processor, partition}
	if old := p.trackers[k]; old != nil {
		if !old.closed {
			return nil, fmt.Errorf("changelog: task %s_%d is already open", processor, partition)
		}
		if n := old.inFlight(); n > 0 {
			return nil, &InFlightError{Processor: processor, Partition: partition, Records: n}
		}
	}
	for _, s := range stores {
		p.owners[s] = processor
	}
	t := newTracker(p)
	p.trackers[k] = t
	return t, nil
}

// release marks the tracker of a task closed, and forgets it once it has nothing in flight.
func (p *Producer) release(processor string, partition int32, t *tracker) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t.closed = true
	k := taskKey{processor, partition}
	if p.trackers[k] == t && t.inFlight() == 0 {
		delete(p.trackers, k)
	}
}

// honoursPartition probes a partitioner with records that name their partition.
// Sticky partitioners (the default) choose per batch and may panic when asked
// directly: they do not honour the field.
func honoursPartition(p kgo.Partitioner) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	tp := p.ForTopic("statehost-probe")
	if _, sticky := tp.(kgo.TopicBackupPartitioner); sticky {
		return false
	}
	for _, want := range []int32{3, 5} {
		if got := tp.Partition(&kgo.Record{Topic: "statehost-probe", Key: []byte("k"), Partition: want}, 8); got != int(want) {
			return false
		}
	}
	return true
}

// Header is a record header.
type Header struct {
	Key   string
	Value []byte
}

// OutputRecord is a record a task emits to an output topic.
type OutputRecord struct {
	Topic     string
	Partition int32
	Key       []byte // nil for a null key
	Value     []byte // nil for a null value
	Headers   []Header
	Timestamp time.Time // zero: the client sets the produce time
	// Input is the input record the output belongs to, named by a *ProduceError if the
	// broker refuses it. Default zero: the one the task's Source names (Task.SetSource).
	Input Input
}
