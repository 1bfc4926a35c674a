package sdktest

import (
	"encoding/binary"
	"time"

	"github.com/statehost/statehost/abi"
	"github.com/statehost/statehost/pluginsdk/internal/hostcall"
)

// memHost implements hostcall.Host in memory, with the host's semantics.
type memHost struct {
	d *Driver

	opened  []string // store handles
	iters   [abi.MaxOpenIterators]*memIter
	iterGen [abi.MaxOpenIterators]int32 // generation of each slot's latest handle
	batch   []Record
	cursor  int // index of the current record; len(batch) after the end
	last    int // last record handed out, -1 before any
	inBatch bool
	needed  int32
	message string

	inPunct   bool  // a punctuation is running
	punctTime int64 // its time, the timestamp of what it emits
	schedules []*schedule
}

// memIter is an open iterator: what it has left to return, copied when it was opened.
type memIter struct {
	entries []iterEntry
	window  bool // window entries (window and session iterators), else entries
}

// iterEntry is an entry of an iterator; start and end only for window entries.
type iterEntry struct {
	key, value []byte
	start, end int64
}

func (h *memHost) current() *Record {
	if h.inBatch && h.cursor >= 0 && h.cursor < len(h.batch) {
		return &h.batch[h.cursor]
	}
	return nil
}

func (h *memHost) StoreOpen(name []byte) int32 {
	if len(name) < 1 || len(name) > abi.MaxNameLen {
		return abi.CodeBadArgument
	}
	for i, n := range h.opened {
		if n == string(name) {
			return int32(i)
		}
	}
	if _, ok := h.d.stores[string(name)]; !ok && h.d.timed[string(name)] == nil {
		return abi.CodeUnknownStore
	}
	h.opened = append(h.opened, string(name))
	return int32(len(h.opened) - 1)
}

func (h *memHost) OutputOpen(name []byte) int32 {
	if len(name) < 1 || len(name) > abi.MaxNameLen {
		return abi.CodeBadArgument
	}
	for i, o := range h.d.cfg.Outputs {
		if o == string(name) {
			return int32(i)
		}
	}
	return abi.CodeUnknownOutput
}

// store returns the key-value store with that handle, or nil and CodeBadHandle or
// CodeWrongStoreType.
func (h *memHost) store(handle int32) (*MemStore, int32) {
	if handle < 0 || int(handle) >= len(h.opened) {
		return nil, abi.CodeBadHandle
	}
	if s := h.d.stores[h.opened[handle]]; s != nil {
		return s, abi.CodeOK
	}
	return nil, abi.CodeWrongStoreType
}

// timed returns the window (typ abi.StoreWindow) or session store with that handle, or nil
// and CodeBadHandle or CodeWrongStoreType.
func (h *memHost) timed(handle int32, typ int32) (*memTimed, int32) {
	if handle < 0 || int(handle) >= len(h.opened) {
		return nil, abi.CodeBadHandle
	}
	if s := h.d.timed[h.opened[handle]]; s != nil && s.info.Type == typ {
		return s, abi.CodeOK
	}
	return nil, abi.CodeWrongStoreType
}

func (h *memHost) StateGet(store int32, key, buf []byte) int32 {
	s, code := h.store(store)
	if s == nil {
		return code
	}
	v, ok := s.Get(string(key))
	switch {
	case !ok:
		return abi.CodeNotFound
	case len(v) > len(buf):
		h.needed = int32(len(v))
		return abi.CodeBufferTooSmall
	default:
		return int32(copy(buf, v))
	}
}

func (h *memHost) StatePut(store int32, key, value []byte) int32 {
	s, code := h.store(store)
	if s == nil {
		return code
	}
	if string(key) == abi.ReservedKey {
		return abi.CodeBadArgument
	}
	if value == nil {
		s.Delete(string(key))
	} else {
		s.Put(string(key), value)
	}
	return abi.CodeOK
}

func (h *memHost) StateDelete(store int32, key []byte) int32 {
	s, code := h.store(store)
	if s == nil {
		return code
	}
	if string(key) == abi.ReservedKey {
		return abi.CodeBadArgument
	}
	s.Delete(string(key))
	return abi.CodeOK
}

// Iterator handles are slot | generation<<8, as the real host makes them: the handle of a
// closed iterator stays invalid when its slot is reused.
const (
	iterSlotBits = 8
	iterSlotMask = 1<<iterSlotBits - 1
	iterGenMask  = 1<<(31-iterSlotBits) - 1
)

func (h *memHost) openIter(entries []iterEntry, window bool) int32 {
	for i, it := range h.iters {
		if it == nil {
			h.iters[i] = &memIter{entries: entries, window: window}
			h.iterGen[i] = (h.iterGen[i] + 1) & iterGenMask
			return int32(i) | h.iterGen[i]<<iterSlotBits
		}
	}
	return abi.CodeLimit
}

// iter returns the slot of the open iterator with handle iter, or -1.
func (h *memHost) iter(iter int32) int {
	slot := int(iter & iterSlotMask)
	if iter < 0 || slot >= len(h.iters) || h.iters[slot] == nil || h.iterGen[slot] != iter>>iterSlotBits {
		return -1
	}
	return slot
}

func (h *memHost) StateRange(store int32, start, end []byte) int32 {
	s, code := h.store(store)
	if s == nil {
		return code
	}
	return h.openIter(s.entries(start, end, nil, false), false)
}

func (h *memHost) StatePrefix(store int32, prefix []byte) int32 {
	s, code := h.store(store)
	if s == nil {
		return code
	}
	return h.openIter(s.entries(nil, nil, prefix, true), false)
}

func (h *memHost) IterNext(iter int32, buf []byte) int32 {
	slot := h.iter(iter)
	if slot < 0 {
		return abi.CodeBadHandle
	}
	it := h.iters[slot]
	n := 0
	for len(it.entries) > 0 {
		e := it.entries[0]
		size := abi.EntrySize(len(e.key), len(e.value))
		if it.window {
			size = abi.WindowEntrySize(len(e.key), len(e.value))
		}
		if n+size > len(buf) {
			if n == 0 {
				h.needed = int32(size)
				return abi.CodeBufferTooSmall
			}
			break
		}
		if it.window {
			n += abi.PutWindowEntry(buf[n:], e.start, e.end, e.key, e.value)
		} else {
			n += abi.PutEntry(buf[n:], e.key, e.value)
		}
		it.entries = it.entries[1:]
	}
	return int32(n)
}

func (h *memHost) IterClose(iter int32) int32 {
	slot := h.iter(iter)
	if slot < 0 {
		return abi.CodeBadHandle
	}
	h.iters[slot] = nil
	return abi.CodeOK
}

func (h *memHost) RecordNext(buf []byte) int32 {
	if !h.inBatch {
		return abi.CodeNoRecord
	}
	next := h.cursor + 1
	if next >= len(h.batch) {
		h.cursor = len(h.batch)
		return 0
	}
	r := &h.batch[next]
	hdr := abi.RecordHeader{
		Offset:      r.Offset,
		Timestamp:   r.Timestamp.UnixMilli(),
		Partition:   r.Partition,
		TopicLen:    int32(len(r.Topic)),
		KeyLen:      abi.LenOrNull(r.Key),
		ValueLen:    abi.LenOrNull(r.Value),
		HeaderCount: int32(len(r.Headers)),
		HeadersSize: int32(len(encodeHeaders(r.Headers))),
	}
	if hdr.Size() > len(buf) {
		h.needed = int32(hdr.Size())
		return abi.CodeBufferTooSmall
	}
	n := abi.PutRecord(buf, hdr, r.Topic, r.Key, r.Value)
	h.cursor, h.last = next, next
	h.d.observe(hdr.Timestamp)
	return int32(n)
}

func (h *memHost) RecordHeaders(buf []byte) int32 {
	r := h.current()
	if r == nil {
		return abi.CodeNoRecord
	}
	enc := encodeHeaders(r.Headers)
	if len(enc) > len(buf) {
		h.needed = int32(len(enc))
		return abi.CodeBufferTooSmall
	}
	return int32(copy(buf, enc))
}

func (h *memHost) Emit(output int32, key, value, hdrs []byte) int32 {
	var ts time.Time
	switch r := h.current(); {
	case r != nil:
		ts = r.Timestamp
	case h.inPunct:
		ts = time.UnixMilli(h.punctTime)
	default:
		return abi.CodeNoRecord
	}
	if output < 0 || int(output) >= len(h.d.cfg.Outputs) {
		return abi.CodeBadHandle
	}
	if len(key)+len(value)+len(hdrs) > abi.MaxEmitBytes {
		return abi.CodeLimit
	}
	e := Emitted{Topic: h.d.cfg.Outputs[output], Key: clone(key), Value: clone(value), Timestamp: ts}
	for rest := hdrs; len(rest) > 0; {
		k, v, next, ok := abi.NextEntry(rest)
		if !ok {
			return abi.CodeBadArgument
		}
		if len(e.Headers) == abi.MaxEmitHeaders {
			return abi.CodeLimit
		}
		e.Headers = append(e.Headers, Header{Key: string(k), Value: clone(v)})
		rest = next
	}
	h.d.emitted = append(h.d.emitted, e)
	return abi.CodeOK
}

func (h *memHost) Log(level int32, msg string) int32 {
	if level < abi.LevelTrace || level > abi.LevelError {
		return abi.CodeBadArgument
	}
	e := LogEntry{Level: level, Message: msg, Offset: -1}
	if r := h.current(); r != nil {
		e.Offset = r.Offset
	}
	h.d.logs = append(h.d.logs, e)
	return abi.CodeOK
}

func (h *memHost) SetError(msg string) int32 {
	if len(msg) > abi.MaxErrorLen {
		msg = msg[:abi.MaxErrorLen]
	}
	h.message = msg
	return abi.CodeOK
}

func (h *memHost) BufferNeeded() int32 { return h.needed }

func (h *memHost) StoreInfo(store int32, buf []byte) int32 {
	if store < 0 || int(store) >= len(h.opened) {
		return abi.CodeBadHandle
	}
	if len(buf) < abi.StoreInfoSize {
		h.needed = abi.StoreInfoSize
		return abi.CodeBufferTooSmall
	}
	info := abi.StoreInfo{Type: abi.StoreKeyValue}
	if s := h.d.timed[h.opened[store]]; s != nil {
		info = s.info
	}
	abi.PutStoreInfo(buf, info)
	return abi.StoreInfoSize
}

func (h *memHost) WindowPut(store int32, key []byte, start int64, value []byte) int32 {
	s, code := h.timed(store, abi.StoreWindow)
	if s == nil {
		return code
	}
	if key == nil {
		return abi.CodeBadArgument
	}
	return s.put(s.id(string(key), start, 0), value)
}

func (h *memHost) WindowGet(store int32, key []byte, start int64, buf []byte) int32 {
	s, code := h.timed(store, abi.StoreWindow)
	if s == nil {
		return code
	}
	if key == nil {
		return abi.CodeBadArgument
	}
	v, ok := s.get(s.id(string(key), start, 0))
	return h.value(v, ok, buf)
}

// value answers a get: v's length, CodeNotFound or CodeBufferTooSmall.
func (h *memHost) value(v []byte, ok bool, buf []byte) int32 {
	switch {
	case !ok:
		return abi.CodeNotFound
	case len(v) > len(buf):
		h.needed = int32(len(v))
		return abi.CodeBufferTooSmall
	default:
		return int32(copy(buf, v))
	}
}

func (h *memHost) WindowFetch(store int32, key []byte, from, to int64) int32 {
	s, code := h.timed(store, abi.StoreWindow)
	if s == nil {
		return code
	}
	if key == nil {
		return abi.CodeBadArgument
	}
	return h.openIter(s.selectEntries(func(id timedID) bool {
		return id.key == string(key) && from <= id.start && id.start <= to
	}, byStart), true)
}

func (h *memHost) WindowFetchAll(store int32, from, to int64) int32 {
	s, code := h.timed(store, abi.StoreWindow)
	if s == nil {
		return code
	}
	return h.openIter(s.selectEntries(func(id timedID) bool {
		return from <= id.start && id.start <= to
	}, byKeyStart), true)
}

func (h *memHost) SessionPut(store int32, key []byte, start, end int64, value []byte) int32 {
	s, code := h.timed(store, abi.StoreSession)
	if s == nil {
		return code
	}
	if key == nil || start > end {
		return abi.CodeBadArgument
	}
	return s.put(s.id(string(key), start, end), value)
}

func (h *memHost) SessionGet(store int32, key []byte, start, end int64, buf []byte) int32 {
	s, code := h.timed(store, abi.StoreSession)
	if s == nil {
		return code
	}
	if key == nil {
		return abi.CodeBadArgument
	}
	v, ok := s.get(s.id(string(key), start, end))
	return h.value(v, ok, buf)
}

func (h *memHost) SessionFind(store int32, key []byte, earliestEnd, latestStart int64) int32 {
	s, code := h.timed(store, abi.StoreSession)
	if s == nil {
		return code
	}
	if key == nil {
		return abi.CodeBadArgument
	}
	return h.openIter(s.selectEntries(func(id timedID) bool {
		return id.key == string(key) && id.end >= earliestEnd && id.start <= latestStart
	}, byEnd), true)
}

func (h *memHost) SessionFindAll(store int32, earliestEnd, latestEnd int64) int32 {
	s, code := h.timed(store, abi.StoreSession)
	if s == nil {
		return code
	}
	return h.openIter(s.selectEntries(func(id timedID) bool {
		return earliestEnd <= id.end && id.end <= latestEnd
	}, byKeyEnd), true)
}

func (h *memHost) StreamTime(out []byte) int32 {
	if len(out) < 8 {
		return abi.CodeOutOfBounds
	}
	binary.LittleEndian.PutUint64(out, uint64(h.d.StreamTime()))
	return abi.CodeOK
}

// schedule is a punctuation schedule of the instance.
type schedule struct {
	id       int32
	kind     int32
	interval int64 // ms
	since    int64 // wall clock when scheduled, ms
	fired    bool
	last     int64 // time of the last punctuation, if fired
}

func (h *memHost) Schedule(kind int32, intervalMs int64) int32 {
	if (kind != abi.ScheduleStreamTime && kind != abi.ScheduleWallClock) || intervalMs < 1 || hostcall.Entry.Punctuate == nil {
		return abi.CodeBadArgument
	}
	if len(h.schedules) >= abi.MaxSchedules {
		return abi.CodeLimit
	}
	id := int32(len(h.schedules))
	h.schedules = append(h.schedules, &schedule{id: id, kind: kind, interval: intervalMs, since: h.d.clock.UnixMilli()})
	return id
}

// closeIters closes the iterators left open at the end of a guest call.
func (h *memHost) closeIters() { h.iters = [abi.MaxOpenIterators]*memIter{} }

func encodeHeaders(hs []Header) []byte {
	var b []byte
	for _, x := range hs {
		b = abi.AppendEntry(b, []byte(x.Key), x.Value)
	}
	return b
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}
