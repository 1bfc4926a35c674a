package testdriver

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/statehost/statehost/host/engine"
	"github.com/statehost/statehost/host/runtime"
	"github.com/statehost/statehost/store"
)

// delivery is a record on its way to the processors that read its topic: an input record,
// or one a processor emitted; pos is the input line it came of.
type delivery struct {
	pos string
	rec engine.Record
}

// Pipe runs one input: it produces the record to its topic and has every processor that
// reads the topic process it, then the processors that read what they emitted, and so on,
// until nothing is left to process; or it moves the wall clock and runs the punctuations
// that became due, in the same way. Then it commits the tasks' stores.
//
// A failure that stops a real run (a plugin error under on_error "fail", a failed
// punctuation or init) is returned, naming in.Pos, and the driver should not be used
// further. A record dropped under on_error "skip" or "dead_letter" is not an error
// (Poisoned).
func (d *Driver) Pipe(ctx context.Context, in Input) error {
	if in.Record == nil {
		d.now = d.now.Add(in.AdvanceWallClock)
		for _, p := range d.procs {
			for _, t := range p.tasks {
				if !t.state.PunctuationDue() {
					continue
				}
				if err := d.punctuate(ctx, t, in.Pos); err != nil {
					return err
				}
			}
		}
	} else if err := d.input(*in.Record, in.Pos); err != nil {
		return err
	}
	if err := d.drain(ctx); err != nil {
		return err
	}
	for _, p := range d.procs {
		for _, t := range p.tasks {
			if err := t.st.Apply(nil); err != nil {
				return fmt.Errorf("%s: commit processor %q partition %d: %w", in.Pos, p.cfg.Name, t.part, err)
			}
		}
	}
	return nil
}

// input produces the input record rec to its topic.
func (d *Driver) input(rec Record, pos string) error {
	if rec.Topic == "" {
		if len(d.sources) != 1 {
			return fmt.Errorf("%s: topic is required: the processors read %s", pos, strings.Join(slices.Sorted(maps.Keys(d.readers)), ", "))
		}
		rec.Topic = d.sources[0]
	}
	for _, rp := range d.cfg.Repartitions {
		if rp.Name == rec.Topic && len(d.readers[rec.Topic]) == 0 {
			rec.Topic = rp.Topic // a repartition by its short name, as inputs and outputs name it
		}
	}
	if len(d.readers[rec.Topic]) == 0 {
		return fmt.Errorf("%s: no processor reads topic %q: they read %s", pos, rec.Topic, strings.Join(slices.Sorted(maps.Keys(d.readers)), ", "))
	}
	n := d.parts[rec.Topic]
	if rec.Partition >= n {
		return fmt.Errorf("%s: partition %d of topic %q: it has %d partitions", pos, rec.Partition, rec.Topic, n)
	}
	if rec.Partition < 0 {
		rec.Partition = runtime.KeyPartition(rec.Key, n, 0)
	}
	ts := d.now.UnixMilli()
	if rec.HasTimestamp {
		ts = rec.Timestamp
	}
	d.deliver(pos, engine.Record{Topic: rec.Topic, Partition: rec.Partition, Timestamp: time.UnixMilli(ts),
		Key: rec.Key, Value: rec.Value, Headers: rec.Headers})
	return nil
}

// deliver gives rec the next offset of its topic partition and queues it for the processors
// that read its topic.
func (d *Driver) deliver(pos string, rec engine.Record) {
	tp := rec.Topic + "\x00" + strconv.Itoa(int(rec.Partition))
	rec.Offset = d.offsets[tp]
	d.offsets[tp]++
	d.queue = append(d.queue, delivery{pos: pos, rec: rec})
}

// drain processes the queued records, in order, until none is left: each by the processors
// that read its topic, in the configuration's order.
func (d *Driver) drain(ctx context.Context) error {
	for len(d.queue) > 0 {
		dl := d.queue[0]
		d.queue = d.queue[1:]
		for _, p := range d.readers[dl.rec.Topic] {
			if err := d.process(ctx, p.tasks[dl.rec.Partition], dl); err != nil {
				d.queue = nil
				return err
			}
		}
	}
	return nil
}

// release produces what the task's call emitted: each record to the partition of its key
// among its topic's, or, without a key, to the task's partition (runtime.KeyPartition).
func (d *Driver) release(t *task, pos string) {
	for _, o := range t.emitted {
		o.Partition = runtime.KeyPartition(o.Key, d.parts[o.Topic], t.part)
		d.produce(o, pos)
	}
	t.emitted = nil
}

// produce adds o to the outputs and, when a processor of the run reads its topic, delivers
// it.
func (d *Driver) produce(o Output, pos string) {
	d.outputs = append(d.outputs, o)
	if len(d.readers[o.Topic]) > 0 {
		d.deliver(pos, engine.Record{Topic: o.Topic, Partition: o.Partition, Timestamp: time.UnixMilli(o.Timestamp),
			Key: o.Key, Value: o.Value, Headers: o.Headers})
	}
}

// Outputs returns every record the processors produced so far, in the order they produced
// them: to their output topics (also those another processor of the run reads) and to
// dead-letter topics.
func (d *Driver) Outputs() []Output { return d.outputs }

// Poisoned returns the records dropped so far under on_error "skip" or "dead_letter".
func (d *Driver) Poisoned() []Poisoned { return d.poisoned }

// WallClock returns the wall clock's time.
func (d *Driver) WallClock() time.Time { return d.now }

// Stores returns the entries of every store partition, committed by the last Pipe, in the
// order of SortStoreEntries.
func (d *Driver) Stores() ([]StoreEntry, error) {
	var all []StoreEntry
	for _, p := range d.procs {
		for _, sd := range p.stores {
			for _, t := range p.tasks {
				entries, err := t.dump(sd)
				if err != nil {
					return nil, fmt.Errorf("testdriver: read store %q partition %d: %w", sd.name, t.part, err)
				}
				all = append(all, entries...)
			}
		}
	}
	d.SortStoreEntries(all)
	return all, nil
}

// SortStoreEntries sorts store entries as Stores returns them: by store, in the order of the
// configuration (stores the run does not have last, by name), then partition, key, start
// and end.
func (d *Driver) SortStoreEntries(entries []StoreEntry) {
	order := map[string]int{}
	for _, p := range d.procs {
		for _, sd := range p.stores {
			order[sd.name] = len(order)
		}
	}
	rank := func(name string) int {
		if i, ok := order[name]; ok {
			return i
		}
		return len(order)
	}
	slices.SortStableFunc(entries, func(a, b StoreEntry) int {
		return cmp.Or(cmp.Compare(rank(a.Store), rank(b.Store)), strings.Compare(a.Store, b.Store),
			cmp.Compare(a.Partition, b.Partition), bytes.Compare(a.Key, b.Key), cmp.Compare(a.Start, b.Start), cmp.Compare(a.End, b.End))
	})
}

// dump returns the entries of the task's store sd.
func (t *task) dump(sd storeDef) ([]StoreEntry, error) {
	var entries []StoreEntry
	add := func(k, v []byte, windowed bool, start, end int64) {
		entries = append(entries, StoreEntry{Store: sd.name, Partition: t.part, Key: append([]byte{}, k...),
			Value: append([]byte{}, v...), Windowed: windowed, Start: start, End: end})
	}
	var (
		wit store.WindowIterator
		err error
	)
	switch sd.opts.Kind {
	case store.Window:
		wit, err = t.st.WindowStore(sd.name).FetchAll(math.MinInt64, math.MaxInt64)
	case store.Session:
		wit, err = t.st.SessionStore(sd.name).FindAll(math.MinInt64, math.MaxInt64)
	default:
		it, err := t.st.Store(sd.name).Range(nil, nil)
		if err != nil {
			return nil, err
		}
		for it.Next() {
			add(it.Key(), it.Value(), false, 0, 0)
		}
		return entries, closeIter(it.Err(), it.Close())
	}
	if err != nil {
		return nil, err
	}
	for wit.Next() {
		add(wit.Key(), wit.Value(), true, wit.Start(), wit.End())
	}
	return entries, closeIter(wit.Err(), wit.Close())
}

func closeIter(err, cerr error) error {
	if err != nil {
		return err
	}
	return cerr
}
