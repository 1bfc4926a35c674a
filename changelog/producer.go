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
// the partition the runtime chose. Keep the client's defaults of acks=all and
// idempotence: a commit relies on them. A Producer is safe for concurrent use.
type Producer struct {
	cl *kgo.Client
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
	return &Producer{cl: cl}, nil
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
	p *Producer

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

// wait blocks until every record produced so far is acknowledged or failed,
// then returns the highest acknowledged offset per partition since the last
// wait, or the first failure.
func (t *tracker) wait(ctx context.Context) (map[topicPartition]int64, error) {
	for {
		t.mu.Lock()
		if t.err != nil {
			err := t.err
			t.mu.Unlock()
			return nil, err
		}
		if t.pending == 0 {
			acked := t.acked
			t.acked = make(map[topicPartition]int64)
			t.mu.Unlock()
			return acked, nil
		}
		idle := t.idle
		t.mu.Unlock()
		select {
		case <-idle:
		case <-ctx.Done():
			return nil, fmt.Errorf("changelog: waiting for acknowledgements: %w", ctx.Err())
		}
	}
}

// storeLog is the ChangeLogger of one logged store partition: it produces to changelog partition = task partition.
type storeLog struct {
	tr        *tracker
	topic     string
	partition int32
}

func (l *storeLog) LogPut(key, value []byte) error {
	l.tr.produce(&kgo.Record{
		Topic:     l.topic,
		Partition: l.partition,
		Key:       append(make([]byte, 0, len(key)), key...),     // never nil: compacted topics need a key
		Value:     append(make([]byte, 0, len(value)), value...), // never nil: nil is a tombstone
	})
	return nil
}

func (l *storeLog) LogDelete(key []byte) error {
	l.tr.produce(&kgo.Record{
		Topic:     l.topic,
		Partition: l.partition,
		Key:       append(make([]byte, 0, len(key)), key...),
	})
	return nil
}
