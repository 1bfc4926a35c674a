package restore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/store"
)

// A record batch (Kafka's message format v2, the only one Kafka 4 writes) is a 61-byte header
// and its records; the offsets of the header's fields follow.
const (
	batchLengthAt     = 8  // int32: the bytes after this field
	batchMagicAt      = 16 // int8: 2
	batchCRCAt        = 17 // uint32: CRC-32C of everything after it
	batchAttrsAt      = 21 // int16: compression (bits 0-2), LogAppendTime (3), transactional (4), control (5)
	batchLastDeltaAt  = 23 // int32: the offset of the batch's last record, from its first
	batchBaseTimeAt   = 27 // int64: the first record's timestamp
	batchCountAt      = 57 // int32: the number of records
	batchHeaderLength = 61

	attrCompression   = 0x07
	attrLogAppendTime = 0x08
	attrControl       = 0x20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errOldFormat is returned by decodeBatches for a batch of message format v0 or v1, which
// only a broker older than Kafka 4 can hold: kgo's decoder reads those.
var errOldFormat = errors.New("restore: message format older than v2")

// batchSpan returns the offset after the last complete batch of a fetched partition's record
// batches, reading only their headers; from when they hold no complete batch past from. The
// next fetch can start there before the records are decoded. It also returns the size of the
// largest of those batches.
func batchSpan(data []byte, from int64) (next, largest int64) {
	next = from
	for len(data) > batchMagicAt {
		n := 12 + int64(int32(binary.BigEndian.Uint32(data[batchLengthAt:])))
		if n <= batchMagicAt || n > int64(len(data)) {
			break
		}
		end := int64(binary.BigEndian.Uint64(data)) + 1 // a message of format v0 or v1: its offset (a wrapper's is its last inner one)
		if data[batchMagicAt] == 2 {
			if n < batchHeaderLength {
				break
			}
			end += int64(int32(binary.BigEndian.Uint32(data[batchLastDeltaAt:])))
		}
		next, largest = max(next, end), max(largest, n)
		data = data[n:]
	}
	return next, largest
}

// batchRecords returns the number of records that the whole record batches (format v2) at
// the start of data say they hold between offsets pos and end, transaction markers aside. A
// count is a hint, not trusted before the CRC: at most what the batch's bytes can hold of
// records of 7 bytes, the smallest (a compressed batch may hold more: its writes are then
// appended as they come).
func batchRecords(data []byte, pos, end int64) int {
	n := 0
	for len(data) >= batchHeaderLength && data[batchMagicAt] == 2 {
		size := 12 + int64(int32(binary.BigEndian.Uint32(data[batchLengthAt:])))
		if size < batchHeaderLength || size > int64(len(data)) {
			break
		}
		base := int64(binary.BigEndian.Uint64(data))
		if base >= end {
			break
		}
		attrs := binary.BigEndian.Uint16(data[batchAttrsAt:])
		if attrs&attrControl == 0 && base+int64(int32(binary.BigEndian.Uint32(data[batchLastDeltaAt:]))) >= pos {
			count := int64(int32(binary.BigEndian.Uint32(data[batchCountAt:])))
			n += int(min(max(count, 0), (size-batchHeaderLength)/minRecordBytes))
		}
		data = data[size:]
	}
	return n
}

// minRecordBytes is the size of the smallest record of a batch: its length, attributes,
// timestamp and offset deltas, key and value lengths and header count, a byte each.
const minRecordBytes = 7

// decodeBatches appends to ws the records of a fetched partition's record batches (the
// fetch response's bytes) whose offsets lie in [pos, end), as a restore applies them:
// a nil value is a delete; a LogAppendTime timestamp, the broker's clock, is -1. Control
// batches (transaction markers) only move the position. The key and value of each write
// point into data, or into the decompressed records of a compressed batch.
//
// It returns ws, the offset of the last record appended (-1 for none), and the position
// after the last batch read, at most end: a trailing batch that the response cut short is
// left for the next fetch. Every batch's CRC is checked. The records of aborted transactions
// are not filtered: a read_committed caller passes only partitions without any. A batch of
// an older message format returns errOldFormat.
func decodeBatches(ws []store.Write, data []byte, pos, end int64, dec kgo.Decompressor) (_ []store.Write, last, next int64, err error) {
	last, next = -1, pos
	// Room for every record of the whole batches at once: grown append by append, the
	// writes (pointers, for the garbage collector) were copied and cleared again and again,
	// a tenth of a small restore's CPU.
	ws = slices.Grow(ws, batchRecords(data, pos, end))
	for len(data) >= 12 && next < end {
		base := int64(binary.BigEndian.Uint64(data))
		n := 12 + int64(int32(binary.BigEndian.Uint32(data[batchLengthAt:])))
		if n > int64(len(data)) {
			break // cut short by the response's size limit
		}
		if len(data) > batchMagicAt && data[batchMagicAt] != 2 {
			return ws, last, next, errOldFormat
		}
		if n < batchHeaderLength {
			return ws, last, next, fmt.Errorf("restore: corrupt record batch at offset %d: %d bytes", base, n)
		}
		batch := data[:n]
		data = data[n:]
		if crc32.Checksum(batch[batchAttrsAt:], castagnoli) != binary.BigEndian.Uint32(batch[batchCRCAt:]) {
			return ws, last, next, fmt.Errorf("restore: corrupt record batch at offset %d: its CRC does not match", base)
		}
		attrs := binary.BigEndian.Uint16(batch[batchAttrsAt:])
		batchEnd := base + int64(int32(binary.BigEndian.Uint32(batch[batchLastDeltaAt:]))) + 1
		if batchEnd <= next {
			continue // before the position: the broker returns the whole batch that holds it
		}
		if attrs&attrControl != 0 {
			next = min(batchEnd, end)
			continue
		}
		recs := batch[batchHeaderLength:]
		if codec := attrs & attrCompression; codec != 0 {
			if recs, err = dec.Decompress(recs, kgo.CompressionCodecType(codec)); err != nil {
				return ws, last, next, fmt.Errorf("restore: record batch at offset %d: decompress: %w", base, err)
			}
		}
		baseTime := int64(binary.BigEndian.Uint64(batch[batchBaseTimeAt:]))
		logAppend := attrs&attrLogAppendTime != 0
		count := int32(binary.BigEndian.Uint32(batch[batchCountAt:]))
		for i := int32(0); i < count; i++ {
			ws = append(ws, store.Write{})
			w := &ws[len(ws)-1]
			size, err := decodeRecord(w, recs, base, baseTime)
			if err != nil {
				*w = store.Write{}
				return ws[:len(ws)-1], last, next, fmt.Errorf("restore: corrupt record %d of the batch at offset %d: %w", i, base, err)
			}
			recs = recs[size:]
			if off := w.Offset; off < next || off >= end {
				*w = store.Write{} // nothing left behind that holds the response
				ws = ws[:len(ws)-1]
				if off >= end {
					return ws, last, end, nil
				}
				continue
			}
			if logAppend {
				w.Timestamp = -1
			}
			last = w.Offset
		}
		next = min(batchEnd, end)
	}
	return ws, last, next, nil
}

var errShortRecord = errors.New("truncated")

// decodeRecord reads the record at the start of b into w: its length, attributes, timestamp
// and offset deltas, key, value and headers (skipped). It returns the bytes read. It fills w
// in place (a write is 72 bytes: returned by value, and copied again into the slice, it was
// a third of the decoding).
func decodeRecord(w *store.Write, b []byte, base, baseTime int64) (size int, err error) {
	length, n := varint(b)
	if n <= 0 || length < 0 || int64(len(b)-n) < length {
		return 0, errShortRecord
	}
	size = n + int(length)
	r := b[n:size]
	if len(r) < 1 {
		return 0, errShortRecord
	}
	r = r[1:] // attributes: unused
	tsDelta, n := varint(r)
	if n <= 0 {
		return 0, errShortRecord
	}
	r = r[n:]
	offDelta, n := varint(r)
	if n <= 0 {
		return 0, errShortRecord
	}
	r = r[n:]
	if w.Key, r, err = varBytes(r); err != nil {
		return 0, err
	}
	if w.Value, _, err = varBytes(r); err != nil {
		return 0, err
	}
	w.Delete = w.Value == nil
	w.Timestamp = baseTime + tsDelta
	w.Offset = base + offDelta
	return size, nil
}

// varint is binary.Varint, with the one-byte varints of a small record's fields first.
func varint(b []byte) (int64, int) {
	if len(b) > 0 && b[0] < 0x80 {
		return int64(b[0]>>1) ^ -int64(b[0]&1), 1
	}
	return binary.Varint(b)
}

// varBytes reads a varint length and that many bytes (nil for a length of -1) off b.
func varBytes(b []byte) (v, rest []byte, err error) {
	l, n := varint(b)
	switch {
	case n <= 0 || l < -1 || int64(len(b)-n) < l:
		return nil, nil, errShortRecord
	case l == -1:
		return nil, b[n:], nil
	}
	end := n + int(l)
	return b[n:end:end], b[end:], nil
}
