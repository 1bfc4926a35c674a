// Package recordbatch computes the size of a Kafka record batch (magic 2) that holds one
// record alone: what a broker compares with the topic's max.message.bytes (Kafka checks
// batches, not records), and what the producer compares with its batch bound. A record that
// fits alone always goes: the producer starts a new batch for it.
package recordbatch

// overhead is the size of a record batch without its records: base offset (8), batch length
// (4), partition leader epoch (4), magic (1), CRC (4), attributes (2), last offset delta (4),
// base and max timestamps (8 + 8), producer id (8) and epoch (2), base sequence (4) and the
// record count (4).
const overhead = 61

// Header returns the encoded size of a record header whose key and value have these
// lengths (0 for a null value).
func Header(keyLen, valueLen int) int {
	return varintLen(keyLen) + keyLen + varintLen(valueLen) + valueLen
}

// Size returns the size of a record batch that holds one record whose key and value have
// these lengths (0 for null: a null and an empty field take one byte each), with headerCount
// headers whose Header sizes sum to headerBytes.
//
// The record alone in its batch has a timestamp delta and an offset delta of 0 (one byte
// each); its size is its length (a varint) and attributes (1), the deltas, the key and value
// with their varint lengths, and the header count and headers.
func Size(keyLen, valueLen, headerCount, headerBytes int) int {
	body := 1 + 1 + 1 + // attributes, timestamp delta, offset delta
		varintLen(keyLen) + keyLen + varintLen(valueLen) + valueLen +
		varintLen(headerCount) + headerBytes
	return overhead + varintLen(body) + body
}

// varintLen is the size of n as a zig-zag varint, Kafka's encoding of lengths in records.
func varintLen(n int) int {
	u := uint64(n)<<1 ^ uint64(int64(n)>>63)
	size := 1
	for u >= 0x80 {
		u >>= 7
		size++
	}
	return size
}
