package sdktest

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/statehost/statehost/abi"
)

// TumblingWindows returns the description of a window store of tumbling windows of size,
// with grace, for Config.WindowStores. Retention is left 0 (the default: the larger of a day and size + grace);
// set it on the result for another.
func TumblingWindows(size, grace time.Duration) abi.StoreInfo {
	return HoppingWindows(size, size, grace)
}

// HoppingWindows returns the description of a window store of windows of size that start
// every advance, with grace, for Config.WindowStores (Retention as for TumblingWindows).
func HoppingWindows(size, advance, grace time.Duration) abi.StoreInfo {
	return abi.StoreInfo{Type: abi.StoreWindow, WindowSize: size.Milliseconds(), Advance: advance.Milliseconds(),
		Grace: grace.Milliseconds()}
}

// Sessions returns the description of a session store with that inactivity gap and grace,
// for Config.SessionStores. Retention is left 0 (the default: the larger of a day and gap + grace); set it on the
// result for another.
func Sessions(gap, grace time.Duration) abi.StoreInfo {
	return abi.StoreInfo{Type: abi.StoreSession, InactivityGap: gap.Milliseconds(), Grace: grace.Milliseconds()}
}

// normalizeInfo checks the description of the window (typ abi.StoreWindow) or session store
// name and fills in its defaults as the statehost config does: Type, Advance (window_size)
// and Retention (window_size or inactivity_gap, plus grace).
func normalizeInfo(name string, typ int32, in abi.StoreInfo) (abi.StoreInfo, error) {
	bad := func(format string, args ...any) (abi.StoreInfo, error) {
		return in, fmt.Errorf("sdktest: store %q: %s", name, fmt.Sprintf(format, args...))
	}
	if in.Type != typ && in.Type != abi.StoreKeyValue {
		return bad("type %d in the description of a %s store", in.Type, typeName(typ))
	}
	in.Type = typ
	if in.Grace < 0 || in.Retention < 0 {
		return bad("negative grace or retention: %+v", in)
	}
	var base int64
	if typ == abi.StoreWindow {
		if in.Advance == 0 {
			in.Advance = in.WindowSize
		}
		if in.WindowSize <= 0 || in.Advance <= 0 || in.Advance > in.WindowSize || in.InactivityGap != 0 {
			return bad("a window store needs 0 < advance <= window_size and no inactivity_gap: %+v", in)
		}
		base = in.WindowSize
	} else {
		if in.InactivityGap <= 0 || in.WindowSize != 0 || in.Advance != 0 {
			return bad("a session store needs inactivity_gap > 0 and no window_size or advance: %+v", in)
		}
		base = in.InactivityGap
	}
	if in.Retention == 0 {
		in.Retention = max(base+in.Grace, 24*60*60*1000) // the config default: a day at least
	}
	if in.Retention < base+in.Grace {
		return bad("retention %d is shorter than %d + grace %d", in.Retention, base, in.Grace)
	}
	return in, nil
}

func typeName(typ int32) string {
	switch typ {
	case abi.StoreWindow:
		return "window"
	case abi.StoreSession:
		return "session"
	}
	return "key-value"
}

// DropCounts counts the writes a window or session store dropped (abi.CodeDropped).
type DropCounts struct {
	// Late counts puts with a value into a closed window or of a closed session.
	Late int
	// Expired counts writes (puts and deletes) to an expired window or session.
	Expired int
}

// timedID identifies a window (end = start + window size) or a session.
type timedID struct {
	key        string
	start, end int64
}

// memTimed is the host side of a window or session store.
type memTimed struct {
	d       *Driver
	info    abi.StoreInfo
	entries map[timedID][]byte
	drops   DropCounts
}

func newMemTimed(d *Driver, info abi.StoreInfo) *memTimed {
	return &memTimed{d: d, info: info, entries: map[timedID][]byte{}}
}

func (s *memTimed) window() bool { return s.info.Type == abi.StoreWindow }

// id returns the identity of key's window at start (end is ignored) or session [start, end].
func (s *memTimed) id(key string, start, end int64) timedID {
	if s.window() {
		end = start + s.info.WindowSize
	}
	return timedID{key: key, start: start, end: end}
}

// expired reports whether the window or session is expired at the stream time: windows by
// start, sessions by end.
func (s *memTimed) expired(id timedID) bool {
	t := id.end
	if s.window() {
		t = id.start
	}
	return s.info.Expired(t, s.d.StreamTime())
}

func (s *memTimed) closed(id timedID) bool {
	if s.window() {
		return s.info.WindowClosed(id.start, s.d.StreamTime())
	}
	return s.info.SessionClosed(id.end, s.d.StreamTime())
}

// put is window_put and session_put: a nil value deletes.
func (s *memTimed) put(id timedID, value []byte) int32 {
	switch {
	case s.expired(id):
		s.drops.Expired++
		return abi.CodeDropped
	case value != nil && s.closed(id):
		s.drops.Late++
		return abi.CodeDropped
	case value == nil:
		delete(s.entries, id)
	default:
		s.entries[id] = append([]byte{}, value...)
	}
	return abi.CodeOK
}

// get returns the value of a window or session that is not expired.
func (s *memTimed) get(id timedID) ([]byte, bool) {
	v, ok := s.entries[id]
	if !ok || s.expired(id) {
		return nil, false
	}
	return v, true
}

// selectEntries returns the visible entries for which keep holds, copied, sorted by cmp.
func (s *memTimed) selectEntries(keep func(timedID) bool, order func(a, b timedID) int) []iterEntry {
	var ids []timedID
	for id := range s.entries {
		if keep(id) && !s.expired(id) {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, order)
	out := make([]iterEntry, len(ids))
	for i, id := range ids {
		out[i] = iterEntry{key: []byte(id.key), value: append([]byte{}, s.entries[id]...), start: id.start, end: id.end}
	}
	return out
}

// Orders of the iterators: window_fetch ascending by start; session_find ascending by end,
// then start; the *_all functions, whose order the ABI leaves open, by key, then as those.
func byStart(a, b timedID) int { return cmp.Compare(a.start, b.start) }
func byEnd(a, b timedID) int {
	return cmp.Or(cmp.Compare(a.end, b.end), cmp.Compare(a.start, b.start))
}
func byKeyStart(a, b timedID) int { return cmp.Or(cmp.Compare(a.key, b.key), byStart(a, b)) }
func byKeyEnd(a, b timedID) int   { return cmp.Or(cmp.Compare(a.key, b.key), byEnd(a, b)) }

// visible returns the entries that are not expired, by key, then start, then end.
func (s *memTimed) visible() []iterEntry {
	return s.selectEntries(func(timedID) bool { return true }, func(a, b timedID) int {
		return cmp.Or(byKeyStart(a, b), cmp.Compare(a.end, b.end))
	})
}

// MemWindowStore is the host side of a window store, to inspect or seed. Its reads see what
// a processor sees: expired windows are absent.
type MemWindowStore struct{ s *memTimed }

// WindowValue is a window's value, as MemWindowStore.All lists it.
type WindowValue struct {
	Key        string
	Start, End int64 // End = Start + window size
	Value      string
}

// Info returns the store's description, with its defaults filled in.
func (w *MemWindowStore) Info() abi.StoreInfo { return w.s.info }

// Get returns the value of key's window at start, unless it is absent or expired.
func (w *MemWindowStore) Get(key string, start int64) ([]byte, bool) {
	return w.s.get(w.s.id(key, start, 0))
}

// Put stores a copy of value in key's window at start (a nil value as empty), whatever the
// stream time: it seeds the store, bypassing the closed and expired checks.
func (w *MemWindowStore) Put(key string, start int64, value []byte) {
	w.s.entries[w.s.id(key, start, 0)] = append([]byte{}, value...)
}

// Delete removes key's window at start.
func (w *MemWindowStore) Delete(key string, start int64) { delete(w.s.entries, w.s.id(key, start, 0)) }

// Len returns the number of windows that are not expired.
func (w *MemWindowStore) Len() int { return len(w.s.visible()) }

// All returns the windows that are not expired, by key, then start.
func (w *MemWindowStore) All() []WindowValue {
	var out []WindowValue
	for _, e := range w.s.visible() {
		out = append(out, WindowValue{Key: string(e.key), Start: e.start, End: e.end, Value: string(e.value)})
	}
	return out
}

// Dropped returns the counts of the writes the store dropped so far.
func (w *MemWindowStore) Dropped() DropCounts { return w.s.drops }

// MemSessionStore is the host side of a session store, to inspect or seed. Its reads see
// what a processor sees: expired sessions are absent.
type MemSessionStore struct{ s *memTimed }

// SessionValue is a session's value, as MemSessionStore.All lists it.
type SessionValue struct {
	Key        string
	Start, End int64 // both inclusive
	Value      string
}

// Info returns the store's description, with its defaults filled in.
func (m *MemSessionStore) Info() abi.StoreInfo { return m.s.info }

// Get returns the value of key's session [start, end], unless it is absent or expired.
func (m *MemSessionStore) Get(key string, start, end int64) ([]byte, bool) {
	return m.s.get(m.s.id(key, start, end))
}

// Put stores a copy of value for key's session [start, end] (a nil value as empty),
// whatever the stream time: it seeds the store, bypassing the closed and expired checks.
func (m *MemSessionStore) Put(key string, start, end int64, value []byte) {
	m.s.entries[m.s.id(key, start, end)] = append([]byte{}, value...)
}

// Delete removes key's session [start, end].
func (m *MemSessionStore) Delete(key string, start, end int64) {
	delete(m.s.entries, m.s.id(key, start, end))
}

// Len returns the number of sessions that are not expired.
func (m *MemSessionStore) Len() int { return len(m.s.visible()) }

// All returns the sessions that are not expired, by key, then start, then end.
func (m *MemSessionStore) All() []SessionValue {
	var out []SessionValue
	for _, e := range m.s.visible() {
		out = append(out, SessionValue{Key: string(e.key), Start: e.start, End: e.end, Value: string(e.value)})
	}
	return out
}

// Dropped returns the counts of the writes the store dropped so far.
func (m *MemSessionStore) Dropped() DropCounts { return m.s.drops }
