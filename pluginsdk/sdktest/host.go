package sdktest

import (
	"github.com/statehost/statehost/abi"
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
}

type memIter struct {
	entries [][2][]byte
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
	if _, ok := h.d.stores[string(name)]; !ok {
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

func (h *memHost) store(handle int32) *MemStore {
	if handle < 0 || int(handle) >= len(h.opened) {
		return nil
	}
	return h.d.stores[h.opened[handle]]
}

func (h *memHost) StateGet(store int32, key, buf []byte) int32 {
	s := h.store(store)
	if s == nil {
		return abi.CodeBadHandle
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
	s := h.store(store)
	if s == nil {
		return abi.CodeBadHandle
	}
	if value == nil {
		s.Delete(string(key))
	} else {
		s.Put(string(key), value)
	}
	return abi.CodeOK
}

func (h *memHost) StateDelete(store int32, key []byte) int32 {
	s := h.store(store)
	if s == nil {
		return abi.CodeBadHandle
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

func (h *memHost) openIter(entries [][2][]byte) int32 {
	for i, it := range h.iters {
		if it == nil {
			h.iters[i] = &memIter{entries: entries}
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
	s := h.store(store)
	if s == nil {
		return abi.CodeBadHandle
	}
	return h.openIter(s.entries(start, end, nil, false))
}

func (h *memHost) StatePrefix(store int32, prefix []byte) int32 {
	s := h.store(store)
	if s == nil {
		return abi.CodeBadHandle
	}
	return h.openIter(s.entries(nil, nil, prefix, true))
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
		size := abi.EntrySize(len(e[0]), len(e[1]))
		if n+size > len(buf) {
			if n == 0 {
				h.needed = int32(size)
				return abi.CodeBufferTooSmall
			}
			break
		}
		n += abi.PutEntry(buf[n:], e[0], e[1])
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
	r := h.current()
	if r == nil {
		return abi.CodeNoRecord
	}
	if output < 0 || int(output) >= len(h.d.cfg.Outputs) {
		return abi.CodeBadHandle
	}
	if len(key)+len(value)+len(hdrs) > abi.MaxEmitBytes {
		return abi.CodeLimit
	}
	e := Emitted{Topic: h.d.cfg.Outputs[output], Key: clone(key), Value: clone(value), Timestamp: r.Timestamp}
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
