package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/twmb/franz-go/pkg/kgo"
)

// runNative is the hand-written pipeline the benchmark holds statehost against: the same
// keyed count with the same durability, in plain Go. A franz-go group consumer reads the
// words; each partition keeps its counts in a Pebble database of its own; every new count is
// written to the database (a batch per commit), to the changelog topic (the same partition)
// and to the output topic. Every commit interval it waits for every produced record to be
// acknowledged, commits the batches with their input offsets, synced, and then commits the
// offsets to the group: at-least-once, as statehost's at_least_once.
func runNative(ctx context.Context, s spec) error {
	changelog := s.App + "-counts-changelog"
	adm, acl, err := adminClient(s.Brokers)
	if err != nil {
		return err
	}
	err = createTopics(ctx, adm, map[string]*string{"cleanup.policy": ptr("compact")}, changelog)
	acl.Close()
	if err != nil {
		return err
	}
	n := &native{dir: s.Dir, parts: map[int32]*nativePart{}, cache: pebble.NewCache(nativeCacheBytes)}
	defer n.cache.Unref()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(s.Brokers...),
		kgo.ConsumerGroup(s.App),
		kgo.ConsumeTopics(s.Input),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(1<<20),
		kgo.OnPartitionsAssigned(n.assigned),
		kgo.OnPartitionsRevoked(n.revoked),
		kgo.OnPartitionsLost(n.revoked),
	)
	if err != nil {
		return fmt.Errorf("native: client: %w", err)
	}
	n.cl = cl
	defer func() {
		n.closing.Store(true) // the final commit is done: the revocation at Close has nothing to commit
		cl.AllowRebalance()   // a poll may have blocked the group's revocation: Close waits for it
		cl.Close()
		n.closeAll()
	}()
	next := time.Now().Add(s.CommitInterval)
	for ctx.Err() == nil {
		if err := n.failed(); err != nil {
			return err
		}
		pctx, cancel := context.WithDeadline(ctx, next)
		fs := cl.PollRecords(pctx, 10000)
		cancel()
		if ctx.Err() != nil {
			break
		}
		var ferr error
		fs.EachError(func(t string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
				ferr = fmt.Errorf("native: fetch %s[%d]: %w", t, p, err)
			}
		})
		if ferr != nil {
			return ferr
		}
		var perr error
		fs.EachRecord(func(r *kgo.Record) {
			if perr == nil {
				perr = n.process(ctx, r, changelog, s.Output)
			}
		})
		if perr != nil {
			return perr
		}
		if !time.Now().Before(next) {
			if err := n.commit(ctx); err != nil {
				return err
			}
			next = time.Now().Add(s.CommitInterval)
		}
		cl.AllowRebalance()
	}
	return n.commit(context.Background())
}

// nativeCacheBytes is the size of the block cache of statehost's store under its default
// memory bound (256 MiB): half of it, less the read cache's and the key filters' shares.
const nativeCacheBytes = 256<<20/2 - 256<<20/8 - 256<<20/32

type native struct {
	dir     string
	cache   *pebble.Cache // the block cache every partition's database shares
	cl      *kgo.Client
	mu      sync.Mutex // guards parts against the rebalance callbacks
	parts   map[int32]*nativePart
	errPtr  atomic.Pointer[error]
	closing atomic.Bool
}

// nativePart is one input partition's state: its database, the batch of the writes since the
// last commit, and those writes' values for reads.
type nativePart struct {
	db     *pebble.DB
	batch  *pebble.Batch
	dirty  map[string]uint64
	offset int64 // the next input offset to process
}

var checkpointKey = []byte("\x00checkpoint")

func (n *native) failed() error {
	if p := n.errPtr.Load(); p != nil {
		return *p
	}
	return nil
}

func (n *native) assigned(_ context.Context, _ *kgo.Client, m map[string][]int32) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, ps := range m {
		for _, p := range ps {
			db, err := pebble.Open(filepath.Join(n.dir, strconv.Itoa(int(p))), n.pebbleOptions())
			if err != nil {
				err = fmt.Errorf("native: open partition %d: %w", p, err)
				n.errPtr.CompareAndSwap(nil, &err)
				return
			}
			n.parts[p] = &nativePart{db: db, batch: db.NewBatch(), dirty: map[string]uint64{}, offset: -1}
		}
	}
}

// pebbleOptions are statehost's store settings (package store) applied to the pipeline's
// databases, so that the comparison is of the pipelines and not of Pebble's tuning: Bloom
// filters on L0 to L5 (Pebble keeps none by default, and without them every first read of a
// new key searches each L0 table), one block cache shared by the partitions, as large as
// statehost's under its default memory bound, and statehost's memtable (32 MiB) split
// among the 8 partitions.
func (n *native) pebbleOptions() *pebble.Options {
	opts := &pebble.Options{Cache: n.cache, MemTableSize: 4 << 20, MemTableStopWritesThreshold: 4}
	for i := range 6 {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	opts.Levels[6].FilterPolicy = pebble.NoFilterPolicy
	return opts
}

func (n *native) revoked(ctx context.Context, _ *kgo.Client, _ map[string][]int32) {
	if n.closing.Load() {
		return
	}
	if err := n.commit(ctx); err != nil {
		n.errPtr.CompareAndSwap(nil, &err)
	}
	n.closeAll()
}

func (n *native) closeAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for p, st := range n.parts {
		st.batch.Close()
		st.db.Close()
		delete(n.parts, p)
	}
}

// process counts one record: read (the batch's value, or the database's), increment, write
// to the batch, the changelog and the output.
func (n *native) process(ctx context.Context, r *kgo.Record, changelog, output string) error {
	st := n.parts[r.Partition]
	if st == nil {
		return fmt.Errorf("native: record of unassigned partition %d", r.Partition)
	}
	c, ok := st.dirty[string(r.Key)]
	if !ok {
		v, closer, err := st.db.Get(r.Key)
		switch {
		case errors.Is(err, pebble.ErrNotFound):
		case err != nil:
			return fmt.Errorf("native: get partition %d: %w", r.Partition, err)
		default:
			c, err = strconv.ParseUint(string(v), 10, 64)
			closer.Close()
			if err != nil {
				return fmt.Errorf("native: partition %d key %q: %w", r.Partition, r.Key, err)
			}
		}
	}
	c++
	st.dirty[string(r.Key)] = c
	val := strconv.AppendUint(nil, c, 10)
	if err := st.batch.Set(r.Key, val, nil); err != nil {
		return err
	}
	st.offset = r.Offset + 1
	n.produce(ctx, &kgo.Record{Topic: changelog, Partition: r.Partition, Key: r.Key, Value: val})
	n.produce(ctx, &kgo.Record{Topic: output, Partition: r.Partition, Key: r.Key, Value: val, Timestamp: r.Timestamp})
	return nil
}

func (n *native) produce(ctx context.Context, r *kgo.Record) {
	n.cl.Produce(ctx, r, func(r *kgo.Record, err error) {
		if err != nil {
			err = fmt.Errorf("native: produce %s[%d]: %w", r.Topic, r.Partition, err)
			n.errPtr.CompareAndSwap(nil, &err)
		}
	})
}

// commit waits for every produced record, commits each partition's batch with its offset
// (synced), and then the consumed offsets.
func (n *native) commit(ctx context.Context) error {
	if err := n.cl.Flush(ctx); err != nil {
		return fmt.Errorf("native: flush: %w", err)
	}
	if err := n.failed(); err != nil {
		return err
	}
	n.mu.Lock()
	for p, st := range n.parts {
		if len(st.dirty) == 0 {
			continue
		}
		if err := st.batch.Set(checkpointKey, binary.BigEndian.AppendUint64(nil, uint64(st.offset)), nil); err != nil {
			n.mu.Unlock()
			return err
		}
		if err := st.batch.Commit(pebble.Sync); err != nil {
			n.mu.Unlock()
			return fmt.Errorf("native: commit partition %d: %w", p, err)
		}
		st.batch.Close()
		st.batch = st.db.NewBatch()
		clear(st.dirty)
	}
	n.mu.Unlock()
	if err := n.cl.CommitUncommittedOffsets(ctx); err != nil {
		return fmt.Errorf("native: commit offsets: %w", err)
	}
	return nil
}

func ptr[T any](v T) *T { return &v }
