package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// The layout record of a key-value Pebble partition whose values carry write times (a TTL):
// kind(1) = KeyValue, form(1) = kvStamped, clock(1), TTL in milliseconds(8). A key-value
// partition without a TTL has no layout record, as before TTLs existed. Interactive queries
// read it to strip and judge the values without the store's options (ttl_query.go).
const (
	kvLayoutLen = 11
	kvStamped   = 1
)

// layoutRecord returns the layout record of a key-value partition with TTL t.
func (t TTL) layoutRecord() []byte {
	return binary.BigEndian.AppendUint64([]byte{byte(KeyValue), kvStamped, byte(t.Clock)}, uint64(t.Millis))
}

// parseKeyValueLayout returns the TTL a key-value partition's layout record states; ok is
// false when rec is not one.
func parseKeyValueLayout(rec []byte) (t TTL, ok bool) {
	if len(rec) != kvLayoutLen || rec[0] != byte(KeyValue) || rec[1] != kvStamped {
		return TTL{}, false
	}
	t = TTL{Millis: int64(binary.BigEndian.Uint64(rec[3:])), Clock: TTLClock(rec[2])}
	return t, t.validate() == nil && t.Enabled()
}

// checkKeyValueLayout compares the form of a key-value partition's values (with write times or
// without) with the one it is opened in, and records the TTL it is opened with.
//
// A TTL or clock that changed only changes the record: the values keep their write times,
// judged by the new TTL from now on. A TTL added to or removed from a store that holds data
// changes the form of every value:
//   - a logged partition drops its local data and checkpoint (with the stream time and version
//     stored with them): its restore rebuilds it from the changelog in the new form, each
//     record's timestamp becoming its entry's write time (for records written before the TTL,
//     when they were produced);
//   - an unlogged one, which nothing could restore, rewrites its values in place, in one
//     batch: with the time of its clock now as their write time, or without one.
func (p *Partition) checkKeyValueLayout() error {
	m := p.t.m
	var have []byte
	v, c, err := m.db.Get(layoutKey(p.id))
	switch {
	case err == nil:
		have = append([]byte(nil), v...)
		c.Close()
	case !errors.Is(err, pebble.ErrNotFound):
		return fmt.Errorf("store: task %s store %q: read layout: %w", p.t.id, p.name, err)
	}
	stamped := have != nil
	if stamped {
		if len(have) > 0 && have[0] != byte(KeyValue) {
			return p.typeChanged(Kind(have[0]))
		}
		if _, ok := parseKeyValueLayout(have); !ok {
			return fmt.Errorf("store: task %s store %q: corrupt layout record of %d bytes", p.t.id, p.name, len(have))
		}
	}
	var want []byte
	if p.ttl != nil {
		want = p.ttl.spec.layoutRecord()
	}
	switch {
	case bytes.Equal(have, want):
		return nil
	case m.set.ReadOnly:
		if stamped != (p.ttl != nil) {
			return fmt.Errorf("store: task %s store %q: its values were written %s, and it is opened %s: open it to write",
				p.t.id, p.name, ttlForm(stamped), ttlForm(p.ttl != nil))
		}
		return nil
	case stamped == (p.ttl != nil) || !p.used():
		return p.writeLayout(want, nil)
	}
	b := m.db.NewBatch()
	defer b.Close()
	if p.logged {
		wipeKeys(b, p.id)
		p.t.log.Warn("the store's values change form: its local state is dropped and restored from its changelog",
			"store", p.name, "was", ttlForm(stamped), "is", ttlForm(p.ttl != nil))
	} else if err := p.rewriteValues(b, stamped); err != nil {
		return err
	}
	return p.writeLayout(want, b)
}

// ttlForm names the form of a key-value partition's values, for messages.
func ttlForm(stamped bool) string {
	if stamped {
		return "with write times (a ttl)"
	}
	return "without write times (no ttl)"
}

// writeLayout sets the layout record to rec (deletes it when rec is nil), with the writes of
// b if not nil, durably.
func (p *Partition) writeLayout(rec []byte, b *pebble.Batch) error {
	m := p.t.m
	if b == nil {
		b = m.db.NewBatch()
		defer b.Close()
	}
	if rec == nil {
		_ = b.Delete(layoutKey(p.id), nil)
	} else {
		_ = b.Set(layoutKey(p.id), rec, nil)
	}
	if err := m.commit(b, pebble.Sync); err != nil {
		return fmt.Errorf("store: task %s store %q: write layout in %s: %w", p.t.id, p.name, m.dbDir(), err)
	}
	return nil
}

// rewriteValues adds to b the rewrite of every value of the partition: without its write time
// when stamped, else with the time of the partition's clock now (its stored stream time, 0
// when it has none, or the wall clock's).
func (p *Partition) rewriteValues(b *pebble.Batch, stamped bool) error {
	at := int64(0)
	switch {
	case stamped:
	case p.ttl.spec.Clock == TTLWallClock:
		at = p.t.m.wallNow()
	default:
		if err := p.loadTime(); err != nil {
			return err
		}
		at = max(p.savedTime, 0)
	}
	it, err := p.t.m.db.NewIter(&pebble.IterOptions{LowerBound: p.prefix, UpperBound: p.upper})
	if err != nil {
		return fmt.Errorf("store: task %s store %q: rewrite values: %w", p.t.id, p.name, err)
	}
	var buf []byte
	for valid := it.First(); valid && err == nil; valid = it.Next() {
		var v []byte
		if v, err = it.ValueAndErr(); err != nil {
			break
		}
		if !stamped {
			buf = appendStamped(buf[:0], at, v)
		} else if _, user, ok := splitStamped(v); ok {
			buf = append(buf[:0], user...)
		} else {
			err = p.noStamp(it.Key()[len(p.prefix):])
			break
		}
		err = b.Set(it.Key(), buf, nil)
	}
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("store: task %s store %q: rewrite values: %w", p.t.id, p.name, err)
	}
	return nil
}
