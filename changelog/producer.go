package changelog

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
type Producer struct {
	cl *kgo.Client

	mu       sync.Mutex
	owners   map[string]string    // store name -> processor
	trackers map[taskKey]*tracker // open tasks, and closed ones with records in flight
}

type taskKey struct {
	processor string
	partition int32
}

// NewProducer returns a Producer over cl, after checking that cl honours record partitions.
func NewProducer(cl *kgo.Client) (*Producer, error) {
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
	return &Producer{cl: cl, owners: map[string]string{}, trackers: map[taskKey]*tracker{}}, nil
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
}

type topicPartition struct {
	topic     string
	partition int32
}

// tracker follows the records of one task from produce to acknowledgement.
type tracker struct {
	p      *Producer
	closed bool // the task is closed (guarded by p.mu)

	mu      sync.Mutex
	pending int
	idle    chan struct{} // closed when pending drops to 0
	err     error         // first failure
	acked   map[topicPartition]int64
}

func newTracker(p *Producer) *tracker {
	return &tracker{p: p, acked: make(map[topicPartition]int64)}
}

func (t *tracker) produce(r *kgo.Record) {
	t.mu.Lock()
	if t.pending == 0 {
		t.idle = make(chan struct{})
	}
	t.pending++
	t.mu.Unlock()
	t.p.cl.Produce(context.Background(), r, t.done)
}

func (t *tracker) done(r *kgo.Record, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		if t.err == nil {
			t.err = &ProduceError{Topic: r.Topic, Partition: r.Partition, Err: err}
		}
	} else {
		tp := topicPartition{r.Topic, r.Partition}
		if o, ok := t.acked[tp]; !ok || r.Offset > o {
			t.acked[tp] = r.Offset
		}
	}
	t.pending--
	if t.pending == 0 {
		close(t.idle)
	}
}

// producedSinceWait reports whether records were produced since the last wait.
func (t *tracker) producedSinceWait() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pending > 0 || len(t.acked) > 0 || t.err != nil
}

// inFlight returns the number of records produced and not yet acknowledged or failed.
func (t *tracker) inFlight() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pending
}

// wait blocks until every record produced so far is acknowledged or failed,
// then returns the highest acknowledged offset per partition since the last
// wait, or the first failure. It waits for the records in flight even after
// a failure, so that a task reopened after a failed commit finds every record
// of its previous incarnation in the log (or knows it never will be); when
// ctx ends first, the error says so and the records stay tracked.
func (t *tracker) wait(ctx context.Context) (map[topicPartition]int64, error) {
	for {
		t.mu.Lock()
		if t.pending == 0 {
			err := t.err
			acked := t.acked
			t.acked = make(map[topicPartition]int64)
			t.mu.Unlock()
			if err != nil {
				return nil, err
			}
			return acked, nil
		}
		idle, pending, failed := t.idle, t.pending, t.err
		t.mu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			err := fmt.Errorf("changelog: waiting for the acknowledgement of %d records: %w", pending, ctx.Err())
			return nil, errors.Join(failed, err)
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
}

func (l *storeLog) LogPut(key, value []byte) error {
	l.tr.produce(l.stamp(&kgo.Record{
		Topic:     l.topic,
		Partition: l.partition,
		Key:       append(make([]byte, 0, len(key)), key...),     // never nil: compacted topics need a key
		Value:     append(make([]byte, 0, len(value)), value...), // never nil: nil is a tombstone
	}))
	return nil
}

func (l *storeLog) LogDelete(key []byte) error {
	l.tr.produce(l.stamp(&kgo.Record{
		Topic:     l.topic,
		Partition: l.partition,
		Key:       append(make([]byte, 0, len(key)), key...),
	}))
	return nil
}

// stamp sets r's timestamp to the stream time when the store is windowed. Before the task's
// first record (a write from a plugin's init) the stream time is unknown: the timestamp is
// then 0, which a restore cannot mistake for a stream time.
func (l *storeLog) stamp(r *kgo.Record) *kgo.Record {
	if l.clock != nil {
		r.Timestamp = time.UnixMilli(max(l.clock.StreamTime(), 0))
	}
	return r
}
