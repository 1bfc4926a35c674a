package store

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// ttlView is how an interactive query sees the values of a key-value partition with a TTL:
// without their write times, and without the entries expired at now. A nil *ttlView is a
// partition without a TTL: values as they are.
type ttlView struct {
	ttl TTL
	now int64
}

// committedTTL returns the ttlView of the committed state of Pebble partition part (nil when
// it has no TTL), from its layout record (ttl_layout.go): the time it judges at is the stream
// time stored with the partition's last commit or restore (NoTime, nothing expired, when
// none), or the wall clock's. The caller holds a read (beginRead).
func (m *Manager) committedTTL(part uint32) (*ttlView, error) {
	rec, ok, err := m.getMeta(layoutKey(part))
	if err != nil || !ok {
		return nil, err
	}
	ttl, ok := parseKeyValueLayout(rec)
	if !ok {
		return nil, nil // a window or session partition's
	}
	if ttl.Clock == TTLWallClock {
		return &ttlView{ttl: ttl, now: m.wallNow()}, nil
	}
	view := &ttlView{ttl: ttl, now: NoTime}
	if tv, ok, err := m.getMeta(timeKey(part)); err != nil {
		return nil, err
	} else if ok && len(tv) == 8 {
		view.now = int64(binary.BigEndian.Uint64(tv))
	}
	return view, nil
}

// getMeta returns a copy of the value of key, and whether it exists.
func (m *Manager) getMeta(key []byte) ([]byte, bool, error) {
	v, c, err := m.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer c.Close()
	return clone(v), true, nil
}

// memoryTTLView returns the ttlView of memory partition p, judged at its clock's time now; nil
// when it has no TTL.
func (p *Partition) memoryTTLView() *ttlView {
	if p.ttl == nil {
		return nil
	}
	return &ttlView{ttl: p.ttl.spec, now: p.ttlNow()}
}

// read returns a copy of the user's bytes of stored value v, and whether its entry is live.
func (tv *ttlView) read(v []byte) ([]byte, bool, error) {
	if tv == nil {
		return clone(v), true, nil
	}
	at, user, ok := splitStamped(v)
	if !ok {
		return nil, false, errNoStamp
	}
	if tv.ttl.expired(at, tv.now) {
		return nil, false, nil
	}
	return clone(user), true, nil
}

// scan returns fn for the stored entries: it is called with the live ones, without their
// write times. A value too short for its write time stops the scan, with *failed set.
func (tv *ttlView) scan(fn func(key, value []byte) bool, failed *error) func(key, value []byte) bool {
	if tv == nil {
		return fn
	}
	return func(key, v []byte) bool {
		at, user, ok := splitStamped(v)
		if !ok {
			*failed = fmt.Errorf("key %q: %w", key, errNoStamp)
			return false
		}
		return tv.ttl.expired(at, tv.now) || fn(key, user)
	}
}
