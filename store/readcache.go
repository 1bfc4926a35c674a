package store

import (
	"maps"
	"sync/atomic"
)

// readCache holds the latest value, or the absence, of the recently used keys of one Pebble
// key-value partition, so that a Get of a hot key is a map lookup rather than a search of the
// task's indexed batch, Pebble's memtables and its levels (which costs microseconds: a Pebble
// point read builds an iterator stack). It is what Kafka Streams' record cache and RocksDB's
// row cache do for reads.
//
// It is exact, not a guess: every write of the partition goes through its pebbleStore (Put,
// Delete), which updates the entry, and every other change of the partition's keys clears the
// whole cache: a range delete (window expiry), a restore batch (ApplyRestore), a wipe. A
// failed or aborted task is closed and reopened, and the cache goes with it.
//
// Entries are evicted in the map's (random) order once the cache passes its size bound, but
// the writes of the current generation (the task's uncommitted writes, which its batch holds
// anyway) are pinned: eviction skips them, and evicts them (marking the generation lost, so
// that the reads it no longer answers go through the batch) only when nothing else is left
// to evict and the cache still holds more than it may. The bound counts pinned entries like
// any other: a cache never holds more than its limit (after the entry being set), pinned
// writes included, and the caches of an instance together stay within their quota in the
// same way; pinning decides what goes first, not how much is kept.
type readCache struct {
	m     map[string]*cacheEntry
	bytes int64         // an estimate of the memory held: keys, value buffers and a fixed overhead per entry
	limit int64         // what this cache may hold
	total *atomic.Int64 // the bytes held by every read cache of the instance (cacheBudget)
	quota int64         // the bound of total

	// lostGen is the generation of uncommitted writes (Task.gen) for which the cache does
	// not hold every write: one was evicted, or a range delete went to the batch. Until that
	// generation commits, a key the cache does not hold is read through the task's batch.
	lostGen int64

	// pinned is the memory held by the entries written in generation pinGen (counted in
	// bytes too): the ones eviction keeps while it can.
	pinned int64
	pinGen int64

	// dropped counts the entries evicted since the map was last made: a Go map keeps the
	// slots of deleted keys, and under eviction churn it grows past what it holds (to
	// two and a half times the bytes counted, measured), so evict makes it anew once it
	// has dropped as many entries as it holds.
	dropped int
}

// cacheEntry is a cached value; absent records a key known to have none. written is the
// generation (Task.gen) of the write the entry holds, or -1 when it was read from the store.
type cacheEntry struct {
	v       []byte
	absent  bool
	written int64
}

// cacheEntryOverhead is the per-entry memory counted besides key and value bytes: the map
// slot (a string header, a pointer and a control byte, at the table's load), the entry
// (48 bytes with its allocation's rounding) and the rounding of the key's and the value's
// allocations. Measured: 96 to 104 bytes beside short keys and values
// (BenchmarkReadCacheMemory).
const cacheEntryOverhead = 104

// cacheBudget is the memory the read caches of an instance share: the instance's share of
// Settings.MemoryBytes for them, its total, and the most one partition's cache may hold.
type cacheBudget struct {
	total        atomic.Int64
	quota, limit int64
}

func newCacheBudget(memoryBytes int64) *cacheBudget {
	return &cacheBudget{quota: memoryBytes / readCacheShare, limit: memoryBytes / readCacheShare / 4}
}

func (b *cacheBudget) newCache() *readCache {
	return &readCache{m: make(map[string]*cacheEntry), limit: b.limit, total: &b.total, quota: b.quota,
		lostGen: -1, pinGen: -1}
}

// get returns key's entry, or nil.
func (c *readCache) get(key []byte) *cacheEntry { return c.m[string(key)] }

// knowsWrites reports whether the cache holds every write of generation gen: a key it does
// not hold then has no uncommitted write, and the committed state answers for it.
func (c *readCache) knowsWrites(gen int64) bool { return c.lostGen != gen }

// lost records that the cache misses some write of generation gen.
func (c *readCache) lost(gen int64) { c.lostGen = gen }

// fill records what a read of the store found for key, in generation gen.
func (c *readCache) fill(key, value []byte, absent bool, gen int64) {
	c.set(key, value, absent, -1, gen)
}

// write records a write of generation gen. It reports whether the cache knew the key present
// before the write.
func (c *readCache) write(key, value []byte, absent bool, gen int64) (had bool) {
	return c.set(key, value, absent, gen, gen)
}

func (c *readCache) set(key, value []byte, absent bool, written, gen int64) (had bool) {
	if c.pinGen != gen { // a commit unpinned the last generation's writes
		c.pinGen, c.pinned = gen, 0
	}
	e := c.m[string(key)]
	if e == nil {
		e = &cacheEntry{written: -1}
		c.m[string(key)] = e
		c.add(int64(len(key)) + cacheEntryOverhead)
	} else {
		had = !e.absent
		if e.written == gen {
			c.pinned -= entrySize(len(key), e)
		}
	}
	was := int64(cap(e.v))
	if absent {
		value = nil
	}
	if cap(e.v) >= len(value) && cap(e.v) <= 2*len(value)+16 {
		e.v = append(e.v[:0], value...) // the buffer fits without holding much more
	} else {
		e.v = clone(value)
	}
	if absent {
		e.v = nil
	}
	e.absent = absent
	if written == gen || e.written != gen { // a fill never unpins a write of this generation
		e.written = written
	}
	c.add(int64(cap(e.v)) - was)
	if e.written == gen {
		c.pinned += entrySize(len(key), e)
	}
	if c.bytes > c.limit || c.total.Load() > c.quota {
		c.evict(gen)
	}
	return had
}

// entrySize is the memory counted for an entry of a key of n bytes.
func entrySize(n int, e *cacheEntry) int64 { return int64(n+cap(e.v)) + cacheEntryOverhead }

// add counts n more bytes held, here and in the instance's total.
func (c *readCache) add(n int64) {
	c.bytes += n
	c.total.Add(n)
}

// evict drops entries until the cache holds at most three quarters of its bound, or of its
// part of the instance's quota when the caches together hold more than it. It is called only
// when the cache is over its bound. Entries written in generation gen go last: they are
// evicted only when the other entries are not enough, and then gen is lost.
func (c *readCache) evict(gen int64) {
	target := c.limit / 4 * 3
	if c.total.Load() > c.quota {
		target = min(target, c.bytes/4*3)
	}
	if c.lostGen != gen && c.pinGen == gen && c.pinned > 0 {
		// The other entries first, as long as there are any: the map's order visits pinned
		// ones too, but each pass drops at least a quarter of the bound or every unpinned
		// entry, so a full walk is paid for by what was added since the last one.
		for k, e := range c.m {
			if c.bytes <= target || c.bytes == c.pinned {
				break
			}
			if e.written != gen {
				c.drop(k, e)
			}
		}
		if c.bytes <= target {
			return
		}
		c.lostGen = gen // only uncommitted writes are left, and they must go
	}
	for k, e := range c.m {
		if c.bytes <= target {
			break
		}
		if e.written == gen {
			c.lostGen = gen
			c.pinned -= entrySize(len(k), e)
		}
		c.drop(k, e)
	}
	if c.dropped > len(c.m) {
		m := make(map[string]*cacheEntry, len(c.m))
		maps.Copy(m, c.m)
		c.m = m
		c.dropped = 0
	}
}

// drop removes key k's entry e.
func (c *readCache) drop(k string, e *cacheEntry) {
	delete(c.m, k)
	c.dropped++
	c.add(-entrySize(len(k), e))
}

// clear drops every entry (with the map: a Go map keeps its peak size). Call lost too when
// the batch holds writes the cache misses.
func (c *readCache) clear() {
	c.add(-c.bytes)
	c.m = make(map[string]*cacheEntry)
	c.pinned, c.dropped = 0, 0
}

// release returns the cache's bytes to the instance's total: the partition is closed.
func (c *readCache) release() {
	c.clear()
}

// readCacheShare is the share of Settings.MemoryBytes that the read caches of an instance
// hold together: 1/8, 32 MiB with the default 256 MiB, at most a quarter of it in one
// partition's cache (8 MiB, about 80,000 entries of short keys and values).
const readCacheShare = 8
