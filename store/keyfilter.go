package store

import (
	"hash/maphash"
	"runtime"
	"sync/atomic"
)

// keyFilter is a Bloom filter of every key a Pebble store partition may hold: the keys it
// held when its task opened (none for a new or wiped store; otherwise a scan adds them in the
// background, see filterBuild), and the keys written since, by the task (Put, committed or
// not) or by a restore (ApplyRestore). A
// key the filter does not hold is absent, and a read of it is answered without searching
// Pebble, whose memtables have no filter: a point read of an absent key searches every
// memtable's skiplist (several microseconds in a memtable of tens of MiB), and the first read
// of every new key is one. It does for the whole partition what RocksDB's memtable Bloom
// filter does for a memtable.
//
// It never forgets a key (deletes and range deletes leave their keys in it: it may answer
// "maybe" for an absent key, never "no" for a present one), so it only grows. It grows by
// layers, each four times the size of the last; a key is added to the newest layer unless
// one of them holds it already. Its memory comes from the instance's filter budget (1/32 of
// Settings.MemoryBytes, at most a quarter of it for one partition: 2 MiB, about 930,000 keys,
// by default); when a new layer does not fit, the filter is dropped, and the partition's
// reads search Pebble as they did without it until it is wiped or its task opens again.
type keyFilter struct {
	layers   []filterLayer
	bytes    int64
	budget   *filterBudget
	released bool

	// negatives counts the reads the filter answered (the key is absent).
	negatives int64
}

// filterLayer is a blocked Bloom filter: a key sets filterProbes bits in one 64-byte block.
type filterLayer struct {
	blocks []filterBlock
	keys   int // keys added
	cap    int // keys it takes at filterBitsPerKey
}

type filterBlock [8]uint64

const (
	// filterBitsPerKey is the bits per key of a full layer: with 7 probes in a 512-bit block,
	// about 0.4% of absent keys get "maybe" from it.
	filterBitsPerKey = 12
	filterProbes     = 7
	// filterFirstBlocks is the size of a filter's first layer, in blocks: 4 KiB, 2,730 keys;
	// smaller, down to filterMinBlocks (512 bytes, 341 keys), when the instance has so many
	// filters that first layers of that size would take more than half of the budget
	// (filterBudget.firstBlocks): at 256 MiB, 4,096 store partitions of 4 KiB took all of it.
	filterFirstBlocks = 64
	filterMinBlocks   = 8
	filterGrowth      = 4
	// filterShare: the filters of an instance hold at most Settings.MemoryBytes/filterShare.
	filterShare = 32
)

// filterSeed keys the filters' hash: they live in memory only, so it changes at every start.
var filterSeed = maphash.MakeSeed()

// filterHash returns the hash of key that the filters use.
func filterHash(key []byte) uint64 { return maphash.Bytes(filterSeed, key) }

// block returns the block of hash h, and the bits of it that h sets.
func (l *filterLayer) block(h uint64) (*filterBlock, filterBlock) {
	b := &l.blocks[(h>>32)*uint64(len(l.blocks))>>32]
	g := (h ^ h>>29) * 0xbf58476d1ce4e5b9 // bits independent of the block's
	g ^= g >> 32
	var m filterBlock
	for range filterProbes {
		m[g>>6&7] |= 1 << (g & 63)
		g >>= 9
	}
	return b, m
}

func (l *filterLayer) holds(h uint64) bool {
	b, m := l.block(h)
	for i := range b {
		if b[i]&m[i] != m[i] {
			return false
		}
	}
	return true
}

func (l *filterLayer) add(h uint64) {
	b, m := l.block(h)
	for i := range b {
		b[i] |= m[i]
	}
	l.keys++
}

// mayHold reports whether the partition may hold the key of hash h; false: it does not.
func (f *keyFilter) mayHold(h uint64) bool {
	for i := len(f.layers) - 1; i >= 0; i-- {
		if f.layers[i].holds(h) {
			return true
		}
	}
	return false
}

// add adds the key of hash h, unless the filter may hold it already. It returns false when
// the filter cannot take it (no new layer fits in the budget): drop the filter then.
func (f *keyFilter) add(h uint64) bool {
	if f.mayHold(h) {
		return true
	}
	n := len(f.layers)
	if n == 0 || f.layers[n-1].keys >= f.layers[n-1].cap {
		blocks := f.budget.firstBlocks()
		if n > 0 {
			blocks = len(f.layers[n-1].blocks) * filterGrowth
		}
		if !f.grow(blocks) {
			return false
		}
	}
	f.layers[len(f.layers)-1].add(h)
	return true
}

// grow adds an empty layer of the given number of blocks, if the budget has room for it.
func (f *keyFilter) grow(blocks int) bool {
	size := int64(blocks) * 64
	if f.bytes+size > f.budget.limit || !f.budget.take(size) {
		return false
	}
	f.bytes += size
	f.layers = append(f.layers, filterLayer{blocks: make([]filterBlock, blocks), cap: blocks * 512 / filterBitsPerKey})
	return true
}

// release gives the filter's memory back to the budget; the filter must not be used after.
func (f *keyFilter) release() {
	f.budget.give(f.bytes)
	f.bytes, f.layers = 0, nil
	if !f.released {
		f.released = true
		f.budget.filters.Add(-1)
	}
}

// filterBudget is the memory the key filters of an instance share.
type filterBudget struct {
	used         atomic.Int64
	quota, limit int64        // the bound of used, and the most one partition's filter may hold
	filters      atomic.Int64 // the filters not released
	scans        scanQueue    // the scans of the filter builds (filterBuild)
}

// firstBlocks returns the size of a new filter's first layer, in blocks: filterFirstBlocks,
// or less when the filters' first layers of that size would take more than half of the quota,
// and not less than filterMinBlocks. The per-partition minimum then falls with the partitions,
// so that thousands of them share the budget instead of the first two thousand taking it.
func (b *filterBudget) firstBlocks() int {
	n := max(b.filters.Load(), 1)
	return int(min(max(b.quota/2/n/64, filterMinBlocks), filterFirstBlocks))
}

func newFilterBudget(memoryBytes int64) *filterBudget {
	return &filterBudget{quota: memoryBytes / filterShare, limit: memoryBytes / filterShare / 4,
		scans: scanQueue{limit: runtime.GOMAXPROCS(0)}}
}

// take reserves n bytes, and reports whether they were within the quota.
func (b *filterBudget) take(n int64) bool {
	if b.used.Add(n) > b.quota {
		b.used.Add(-n)
		return false
	}
	return true
}

func (b *filterBudget) give(n int64) { b.used.Add(-n) }

// newFilter returns an empty filter, for a partition whose committed state holds no key.
func (b *filterBudget) newFilter() *keyFilter {
	b.filters.Add(1)
	return &keyFilter{budget: b}
}

// initFilter gives the partition a key filter: an empty one when its committed state holds
// no key (a new store, or one that restores from the start of its changelog); otherwise one
// built in the background from its keys (startFilterBuild: 0.2 s of one core for 700,000
// keys here, off the way of the task's open), which its reads use once it is complete.
func (p *Partition) initFilter() {
	found, err := anyKey(p.t.m.db, p.prefix, p.upper)
	if err != nil {
		// The reads of the store meet the same error, and report it.
		p.t.log.Warn("no key filter: the store's first key could not be read", "store", p.name, "error", err)
		return
	}
	if !found {
		p.filter = p.t.m.filters.newFilter()
		return
	}
	p.startFilterBuild()
}

// filterAdd adds key to the partition's filter, which a write or a restore may make present.
func (p *Partition) filterAdd(key []byte) {
	p.wakeFilter()
	if p.filter != nil && !p.filter.add(filterHash(key)) {
		p.dropFilter("its memory budget is spent")
	}
	if p.building != nil && !p.building.add(filterHash(key)) {
		p.stopFilterBuild()
	}
}

// dropFilter drops the partition's filter: its reads search Pebble from now on.
func (p *Partition) dropFilter(why string) {
	if p.filter == nil {
		return
	}
	p.releaseFilter()
	p.t.log.Debug("key filter dropped", "store", p.name, "reason", why)
}

// releaseFilter returns the partition's filter, if any, to the instance's budget, and ends
// the build of one.
func (p *Partition) releaseFilter() {
	p.filterLazy = false
	p.stopFilterBuild()
	if p.filter != nil {
		p.filter.release()
		p.filter = nil
	}
}

// wakeFilter starts the build of the filter that a load left to be built when the partition
// is first used (Loader): before its first read or write, so that every key the task writes
// reaches the build (filterBuild).
func (p *Partition) wakeFilter() {
	if p.filterLazy {
		p.filterLazy = false
		p.startFilterBuild()
	}
}
