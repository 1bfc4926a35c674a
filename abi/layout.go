package abi

import "encoding/binary"

// Byte offsets of the record header written by record_next; all fields are little-endian.
const (
	RecordOffsetAt      = 0  // i64 Kafka offset
	RecordTimestampAt   = 8  // i64 milliseconds since the Unix epoch
	RecordPartitionAt   = 16 // i32
	RecordTopicLenAt    = 20 // i32, >= 0
	RecordKeyLenAt      = 24 // i32, NullLen for a null key
	RecordValueLenAt    = 28 // i32, NullLen for a null value
	RecordHeaderCountAt = 32 // i32
	RecordHeadersSizeAt = 36 // i32, bytes record_headers needs
	// RecordHeaderSize is the size of the fixed header; topic, key and value follow it.
	RecordHeaderSize = 40
)

// Byte offsets of an entry (iter_next, record_headers, emit headers); little-endian.
const (
	EntryKeyLenAt   = 0 // i32, >= 0
	EntryValueLenAt = 4 // i32, NullLen for a null value
	// EntryHeaderSize is the size of an entry's fixed part; key and value bytes follow it.
	EntryHeaderSize = 8
)

// RecordHeader is the decoded fixed part of a record as record_next writes it.
type RecordHeader struct {
	Offset      int64
	Timestamp   int64 // milliseconds since the Unix epoch
	Partition   int32
	TopicLen    int32
	KeyLen      int32 // NullLen for null
	ValueLen    int32 // NullLen for null
	HeaderCount int32
	HeadersSize int32
}

// Size returns the number of bytes of the whole encoded record.
func (h RecordHeader) Size() int {
	return RecordHeaderSize + int(h.TopicLen) + lenOrZero(h.KeyLen) + lenOrZero(h.ValueLen)
}

// PutRecordHeader writes h into b[:RecordHeaderSize]; b must be at least that long.
func PutRecordHeader(b []byte, h RecordHeader) {
	_ = b[RecordHeaderSize-1]
	le := binary.LittleEndian
	le.PutUint64(b[RecordOffsetAt:], uint64(h.Offset))
	le.PutUint64(b[RecordTimestampAt:], uint64(h.Timestamp))
	le.PutUint32(b[RecordPartitionAt:], uint32(h.Partition))
	le.PutUint32(b[RecordTopicLenAt:], uint32(h.TopicLen))
	le.PutUint32(b[RecordKeyLenAt:], uint32(h.KeyLen))
	le.PutUint32(b[RecordValueLenAt:], uint32(h.ValueLen))
	le.PutUint32(b[RecordHeaderCountAt:], uint32(h.HeaderCount))
	le.PutUint32(b[RecordHeadersSizeAt:], uint32(h.HeadersSize))
}

// PutRecord writes a record as record_next does: the header h, then topic, key and value
// (nothing for a null key or value; h says they are null). b must hold h.Size() bytes. It
// returns the number of bytes written.
func PutRecord(b []byte, h RecordHeader, topic string, key, value []byte) int {
	PutRecordHeader(b, h)
	n := RecordHeaderSize + copy(b[RecordHeaderSize:], topic)
	n += copy(b[n:], key)
	return n + copy(b[n:], value)
}

// ReadRecord decodes a record written by record_next. Topic, key and value are views of b;
// key and value are nil when null and non-nil when empty. ok is false if b is malformed.
func ReadRecord(b []byte) (h RecordHeader, topic, key, value []byte, ok bool) {
	if len(b) < RecordHeaderSize {
		return h, nil, nil, nil, false
	}
	le := binary.LittleEndian
	h = RecordHeader{
		Offset:      int64(le.Uint64(b[RecordOffsetAt:])),
		Timestamp:   int64(le.Uint64(b[RecordTimestampAt:])),
		Partition:   int32(le.Uint32(b[RecordPartitionAt:])),
		TopicLen:    int32(le.Uint32(b[RecordTopicLenAt:])),
		KeyLen:      int32(le.Uint32(b[RecordKeyLenAt:])),
		ValueLen:    int32(le.Uint32(b[RecordValueLenAt:])),
		HeaderCount: int32(le.Uint32(b[RecordHeaderCountAt:])),
		HeadersSize: int32(le.Uint32(b[RecordHeadersSizeAt:])),
	}
	if h.TopicLen < 0 || h.KeyLen < NullLen || h.ValueLen < NullLen || h.Size() > len(b) {
		return h, nil, nil, nil, false
	}
	rest := b[RecordHeaderSize:]
	topic, rest = rest[:h.TopicLen], rest[h.TopicLen:]
	key, rest = part(rest, h.KeyLen)
	value, _ = part(rest, h.ValueLen)
	return h, topic, key, value, true
}

// EntrySize returns the encoded size of an entry with the given key and value lengths
// (either may be NullLen).
func EntrySize(keyLen, valueLen int) int {
	return EntryHeaderSize + max(keyLen, 0) + max(valueLen, 0)
}

// PutEntry writes an entry into b and returns the number of bytes written; b must have room
// for EntrySize. A nil value is encoded as null, a nil key as empty (keys are never null).
func PutEntry(b []byte, key, value []byte) int {
	le := binary.LittleEndian
	le.PutUint32(b[EntryKeyLenAt:], uint32(len(key)))
	n := EntryHeaderSize + copy(b[EntryHeaderSize:], key)
	if value == nil {
		le.PutUint32(b[EntryValueLenAt:], nullU32)
		return n
	}
	le.PutUint32(b[EntryValueLenAt:], uint32(len(value)))
	return n + copy(b[n:], value)
}

// AppendEntry appends an entry to dst, encoding a nil value as null.
func AppendEntry(dst []byte, key, value []byte) []byte {
	n := len(dst)
	dst = append(dst, make([]byte, EntrySize(len(key), int(LenOrNull(value))))...)
	PutEntry(dst[n:], key, value)
	return dst
}

// NextEntry decodes the first entry of a sequence. Key and value are views of b; the value
// is nil when null and non-nil when empty. rest is the remainder of the sequence. ok is false
// if b does not begin with a well-formed entry (b empty included).
func NextEntry(b []byte) (key, value, rest []byte, ok bool) {
	if len(b) < EntryHeaderSize {
		return nil, nil, b, false
	}
	le := binary.LittleEndian
	kl, vl := int32(le.Uint32(b[EntryKeyLenAt:])), int32(le.Uint32(b[EntryValueLenAt:]))
	if kl < 0 || vl < NullLen || int64(EntryHeaderSize)+int64(kl)+int64(max(vl, 0)) > int64(len(b)) {
		return nil, nil, b, false
	}
	rest = b[EntryHeaderSize:]
	key, rest = rest[:kl:kl], rest[kl:]
	value, rest = part(rest, vl)
	return key, value, rest, true
}

// nullU32 is NullLen as the unsigned bits written to memory.
const nullU32 uint32 = 1<<32 - 1

// part splits n bytes off b; n == NullLen yields a nil part.
func part(b []byte, n int32) (p, rest []byte) {
	if n == NullLen {
		return nil, b
	}
	return b[:n:n], b[n:]
}

func lenOrZero(n int32) int { return int(max(n, 0)) }

// LenOrNull returns the ABI length of b: NullLen for nil (null), len(b) otherwise.
func LenOrNull(b []byte) int32 {
	if b == nil {
		return NullLen
	}
	return int32(len(b))
}

// Byte offsets of a window entry (iter_next on an iterator of window_fetch, window_fetch_all,
// session_find or session_find_all); little-endian.
const (
	WindowEntryStartAt    = 0  // i64 window or session start, ms
	WindowEntryEndAt      = 8  // i64 window end (start + window_size, exclusive) or session end (inclusive), ms
	WindowEntryKeyLenAt   = 16 // i32, >= 0
	WindowEntryValueLenAt = 20 // i32, >= 0 (never null)
	// WindowEntryHeaderSize is the size of a window entry's fixed part; key and value bytes follow it.
	WindowEntryHeaderSize = 24
)

// WindowEntry is a decoded window entry; Key and Value are views of the buffer.
type WindowEntry struct {
	Start, End int64
	Key, Value []byte
}

// WindowEntrySize returns the encoded size of a window entry.
func WindowEntrySize(keyLen, valueLen int) int {
	return WindowEntryHeaderSize + max(keyLen, 0) + max(valueLen, 0)
}

// PutWindowEntry writes a window entry into b, which must have room for WindowEntrySize, and
// returns the number of bytes written.
func PutWindowEntry(b []byte, start, end int64, key, value []byte) int {
	le := binary.LittleEndian
	le.PutUint64(b[WindowEntryStartAt:], uint64(start))
	le.PutUint64(b[WindowEntryEndAt:], uint64(end))
	le.PutUint32(b[WindowEntryKeyLenAt:], uint32(len(key)))
	le.PutUint32(b[WindowEntryValueLenAt:], uint32(len(value)))
	n := WindowEntryHeaderSize + copy(b[WindowEntryHeaderSize:], key)
	return n + copy(b[n:], value)
}

// NextWindowEntry decodes the first window entry of a sequence. rest is the remainder; ok is
// false if b does not begin with a well-formed window entry (b empty included).
func NextWindowEntry(b []byte) (e WindowEntry, rest []byte, ok bool) {
	if len(b) < WindowEntryHeaderSize {
		return e, b, false
	}
	le := binary.LittleEndian
	kl, vl := int32(le.Uint32(b[WindowEntryKeyLenAt:])), int32(le.Uint32(b[WindowEntryValueLenAt:]))
	if kl < 0 || vl < 0 || int64(WindowEntryHeaderSize)+int64(kl)+int64(vl) > int64(len(b)) {
		return e, b, false
	}
	e.Start = int64(le.Uint64(b[WindowEntryStartAt:]))
	e.End = int64(le.Uint64(b[WindowEntryEndAt:]))
	rest = b[WindowEntryHeaderSize:]
	e.Key, rest = rest[:kl:kl], rest[kl:]
	e.Value, rest = rest[:vl:vl], rest[vl:]
	return e, rest, true
}

// Byte offsets of the store description written by store_info; little-endian. Durations are
// milliseconds; those that do not apply to the store's type are 0.
const (
	StoreInfoTypeAt          = 0  // i32: StoreKeyValue, StoreWindow or StoreSession
	StoreInfoWindowSizeAt    = 8  // i64 window stores: window_size
	StoreInfoAdvanceAt       = 16 // i64 window stores: advance (the hop; window_size when tumbling)
	StoreInfoGraceAt         = 24 // i64 window and session stores: grace
	StoreInfoRetentionAt     = 32 // i64 window and session stores: retention
	StoreInfoInactivityGapAt = 40 // i64 session stores: inactivity_gap
	// StoreInfoSize is the size of the description.
	StoreInfoSize = 48
)

// StoreInfo is the description store_info writes.
type StoreInfo struct {
	Type          int32
	WindowSize    int64
	Advance       int64
	Grace         int64
	Retention     int64
	InactivityGap int64
}

// PutStoreInfo writes s into b[:StoreInfoSize].
func PutStoreInfo(b []byte, s StoreInfo) {
	_ = b[StoreInfoSize-1]
	le := binary.LittleEndian
	le.PutUint32(b[StoreInfoTypeAt:], uint32(s.Type))
	le.PutUint32(b[StoreInfoTypeAt+4:], 0)
	le.PutUint64(b[StoreInfoWindowSizeAt:], uint64(s.WindowSize))
	le.PutUint64(b[StoreInfoAdvanceAt:], uint64(s.Advance))
	le.PutUint64(b[StoreInfoGraceAt:], uint64(s.Grace))
	le.PutUint64(b[StoreInfoRetentionAt:], uint64(s.Retention))
	le.PutUint64(b[StoreInfoInactivityGapAt:], uint64(s.InactivityGap))
}

// ReadStoreInfo decodes what store_info wrote; ok is false if b is too short.
func ReadStoreInfo(b []byte) (s StoreInfo, ok bool) {
	if len(b) < StoreInfoSize {
		return s, false
	}
	le := binary.LittleEndian
	return StoreInfo{
		Type:          int32(le.Uint32(b[StoreInfoTypeAt:])),
		WindowSize:    int64(le.Uint64(b[StoreInfoWindowSizeAt:])),
		Advance:       int64(le.Uint64(b[StoreInfoAdvanceAt:])),
		Grace:         int64(le.Uint64(b[StoreInfoGraceAt:])),
		Retention:     int64(le.Uint64(b[StoreInfoRetentionAt:])),
		InactivityGap: int64(le.Uint64(b[StoreInfoInactivityGapAt:])),
	}, true
}

// WindowClosed reports whether a window store's window starting at start is closed at stream
// time now: its end plus grace has passed (start + window_size + grace <= now). A put with a
// value into a closed window is dropped.
func (s StoreInfo) WindowClosed(start, now int64) bool {
	return now != NoTime && start <= now-s.WindowSize-s.Grace
}

// SessionClosed reports whether a session store's session ending at end is closed for writes
// at stream time now: end + grace < now. A put with a value of a closed session is dropped.
func (s StoreInfo) SessionClosed(end, now int64) bool {
	return now != NoTime && end < now-s.Grace
}

// SessionFinal reports whether a session ending at end can no longer change at stream time
// now: no record that is not late can reach it (end + inactivity_gap + grace < now).
func (s StoreInfo) SessionFinal(end, now int64) bool {
	return now != NoTime && end < now-s.InactivityGap-s.Grace
}

// Expired reports whether a window (by its start) or a session (by its end) at time t is
// expired at stream time now: t <= now - retention.
func (s StoreInfo) Expired(t, now int64) bool {
	return now != NoTime && t <= now-s.Retention
}
