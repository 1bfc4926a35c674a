package runtime

// murmur2 is the hash that Kafka's Java client (and franz-go's default partitioner) uses to
// choose the partition of a keyed record: Utils.murmur2 in the Java client.
func murmur2(b []byte) int32 {
	const (
		seed uint32 = 0x9747b28c
		m    uint32 = 0x5bd1e995
		r           = 24
	)
	h := seed ^ uint32(len(b))
	for ; len(b) >= 4; b = b[4:] {
		k := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
		k *= m
		k ^= k >> r
		k *= m
		h *= m
		h ^= k
	}
	switch len(b) {
	case 3:
		h ^= uint32(b[2]) << 16
		fallthrough
	case 2:
		h ^= uint32(b[1]) << 8
		fallthrough
	case 1:
		h ^= uint32(b[0])
		h *= m
	}
	h ^= h >> 13
	h *= m
	h ^= h >> 15
	return int32(h)
}

// KeyPartition returns the partition of a record with key among n partitions, as Kafka's
// default partitioner chooses it for a keyed record: the positive murmur2 hash modulo n.
//
// A record without a key (nil) goes to fallback modulo n: the runtime passes the partition of
// the task that emits it, so the records of one task stay together and the choice is the same
// when a record is reprocessed after a failure.
func KeyPartition(key []byte, n int32, fallback int32) int32 {
	if key == nil {
		return fallback % n
	}
	return (murmur2(key) & 0x7fffffff) % n
}
