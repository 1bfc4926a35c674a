package engine

// The seed corpus of FuzzABI, written by TestWriteFuzzABISeeds with -write-fuzz-seeds:
//
//	go test ./host/engine -run '^TestWriteFuzzABISeeds$' -write-fuzz-seeds
//
// Each seed is a program in the encoding decodeOps reads; the helpers below write it.

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/statehost/statehost/abi"
)

var writeFuzzSeeds = flag.Bool("write-fuzz-seeds", false, "write the seed corpus of FuzzABI to testdata/fuzz/FuzzABI")

// Encoders of decodeOps's choices.
func sOp(fn string, params ...[]byte) []byte {
	return append([]byte{byte(slices.Index(fuzzFuncs, fn))}, slices.Concat(params...)...)
}
func le16(v uint16) []byte { return binary.LittleEndian.AppendUint16(nil, v) }
func le32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func le64(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }

// Regions (pointer and length).
func rNamed(k int) []byte             { return []byte{0, byte(k)} }
func rAt(off uint16, n uint8) []byte  { return slices.Concat([]byte{1}, le16(off), []byte{n}) }
func rEnd(back uint16, d int8) []byte { return slices.Concat([]byte{2}, le16(back), []byte{byte(d)}) }
func rRaw(ptr uint32, n int32) []byte { return slices.Concat([]byte{3}, le32(ptr), le32(uint32(n))) }
func rNull(off uint16) []byte         { return slices.Concat([]byte{4}, le16(off)) }
func rEdge(p, n int) []byte           { return []byte{5, byte(p), byte(n)} }
func rOverlap(d int8, n uint8) []byte { return []byte{6, byte(d), n} }
func rAtN(off uint16, n int32) []byte { return slices.Concat([]byte{7}, le16(off), le32(uint32(n))) }
func hSmall(h int) []byte             { return []byte{0, byte(h)} }
func hRef(op int) []byte              { return []byte{1, byte(op)} }
func hRaw(h int32) []byte             { return slices.Concat([]byte{2}, le32(uint32(h))) }
func iRef(op int) []byte              { return []byte{0, byte(op)} }
func iGen(op, delta int) []byte       { return []byte{1, byte(op), byte(delta)} }
func iRaw(h int32) []byte             { return slices.Concat([]byte{3}, le32(uint32(h))) }
func tNear(d int16) []byte            { return slices.Concat([]byte{0}, le16(uint16(d))) }
func tRaw(v int64) []byte             { return slices.Concat([]byte{1}, le64(uint64(v))) }
func tEdge(k int) []byte              { return []byte{2, byte(k)} }
func small(v int) []byte              { return []byte{0, byte(v)} }
func rawInt(v int32) []byte           { return slices.Concat([]byte{1}, le32(uint32(v))) }

// Named regions (fuzzRegions) and the regions of the fuzz data.
const (
	nKV, nWin, nSess, nOut, nOut2, nHeaders, nIovec, nText, nFuzz0, nFuzz8 = 0, 1, 2, 3, 4, 5, 6, 7, 8, 9
)

func buf(off uint16) []byte { return rAtN(off, 2048) }

// fuzzABISeeds returns the seeds by name: data, ops and the number of extra records.
func fuzzABISeeds() map[string]struct {
	data, ops []byte
	extra     uint8
} {
	type seed = struct {
		data, ops []byte
		extra     uint8
	}
	open := func(name int) []byte { return sOp(abi.FuncStoreOpen, rNamed(name)) }
	seeds := map[string]seed{
		"keyvalue": {[]byte("key-0001value-01"), slices.Concat(
			open(nKV),
			sOp(abi.FuncStatePut, hRef(0), rNamed(nFuzz8), rAt(dataFuzz+8, 8)),
			sOp(abi.FuncStatePut, hRef(0), rAt(dataFuzz, 3), rAt(dataFuzz+8, 0)),
			sOp(abi.FuncStateGet, hRef(0), rNamed(nFuzz8), buf(1024)),
			sOp(abi.FuncStateGet, hRef(0), rNamed(nFuzz8), rAt(1024, 2)),
			sOp(abi.FuncBufferNeeded),
			sOp(abi.FuncStateRange, hRef(0), rNull(0), rNull(0)),
			sOp(abi.FuncIterNext, iRef(6), buf(2048)),
			sOp(abi.FuncIterNext, iRef(6), buf(2048)),
			sOp(abi.FuncIterClose, iRef(6)),
			sOp(abi.FuncIterNext, iRef(6), buf(2048)),
			sOp(abi.FuncStatePrefix, hRef(0), rAt(dataFuzz, 3)),
			sOp(abi.FuncIterNext, iRef(11), rAt(2048, 4)),
			sOp(abi.FuncStateDelete, hRef(0), rNamed(nFuzz8)),
			sOp(abi.FuncStatePut, hRef(0), rAt(dataFuzz, 3), rNull(0)),
			sOp(abi.FuncStateGet, hRef(0), rNamed(nFuzz8), buf(1024)),
		), 0},
		"window": {[]byte("key-0001value-01"), slices.Concat(
			open(nWin),
			sOp(abi.FuncWindowPut, hRef(0), rNamed(nFuzz8), tNear(0), rAt(dataFuzz+8, 8)),
			sOp(abi.FuncWindowPut, hRef(0), rNamed(nFuzz8), tNear(-100), rAt(dataFuzz+8, 8)),
			sOp(abi.FuncWindowPut, hRef(0), rNamed(nFuzz8), tEdge(5), rAt(dataFuzz+8, 8)),
			sOp(abi.FuncWindowPut, hRef(0), rNamed(nFuzz8), tEdge(6), rNull(0)),
			sOp(abi.FuncWindowPut, hRef(0), rNamed(nFuzz8), tEdge(0), rAt(dataFuzz+8, 8)),
			sOp(abi.FuncWindowPut, hRef(0), rNamed(nFuzz8), tEdge(1), rAt(dataFuzz+8, 8)),
			sOp(abi.FuncWindowGet, hRef(0), rNamed(nFuzz8), tNear(0), buf(1024)),
			sOp(abi.FuncWindowFetch, hRef(0), rNamed(nFuzz8), tEdge(0), tEdge(1)),
			sOp(abi.FuncIterNext, iRef(8), buf(2048)),
			sOp(abi.FuncWindowFetchAll, hRef(0), tNear(-2000), tNear(2000)),
			sOp(abi.FuncIterNext, iRef(10), rAt(2048, 30)),
			sOp(abi.FuncStoreInfo, hRef(0), rAt(1024, 48)),
			sOp(abi.FuncStoreInfo, hRef(0), rAt(1024, 47)),
			sOp(abi.FuncStateGet, hRef(0), rNamed(nFuzz8), buf(1024)),
		), 0},
		"session": {[]byte("key-0001value-01"), slices.Concat(
			open(nSess),
			sOp(abi.FuncSessionPut, hRef(0), rNamed(nFuzz8), tNear(-10), tNear(0), rAt(dataFuzz+8, 8)),
			sOp(abi.FuncSessionPut, hRef(0), rNamed(nFuzz8), tNear(10), tNear(0), rAt(dataFuzz+8, 8)),
			sOp(abi.FuncSessionPut, hRef(0), rNamed(nFuzz8), tEdge(0), tEdge(1), rAt(dataFuzz+8, 8)),
			sOp(abi.FuncSessionPut, hRef(0), rNamed(nFuzz8), tNear(-200), tNear(-60), rAt(dataFuzz+8, 8)),
			sOp(abi.FuncSessionGet, hRef(0), rNamed(nFuzz8), tNear(-10), tNear(0), buf(1024)),
			sOp(abi.FuncSessionGet, hRef(0), rNamed(nFuzz8), tNear(10), tNear(0), buf(1024)),
			sOp(abi.FuncSessionFind, hRef(0), rNamed(nFuzz8), tNear(-100), tNear(100)),
			sOp(abi.FuncIterNext, iRef(7), buf(2048)),
			sOp(abi.FuncSessionFindAll, hRef(0), tEdge(0), tEdge(1)),
			sOp(abi.FuncIterNext, iRef(9), buf(2048)),
			sOp(abi.FuncSessionPut, hRef(0), rNamed(nFuzz8), tNear(-10), tNear(0), rNull(0)),
			sOp(abi.FuncStoreInfo, hRef(0), rAt(1024, 48)),
			sOp(abi.FuncWindowPut, hRef(0), rNamed(nFuzz8), tNear(0), rAt(dataFuzz+8, 8)),
		), 0},
		"records": {[]byte("key-0001value-01"), slices.Concat(
			sOp(abi.FuncRecordHeaders, rAt(1024, 0)),
			sOp(abi.FuncOutputOpen, rNamed(nOut2)),
			sOp(abi.FuncEmit, hSmall(1), rNamed(nFuzz8), rNull(0), rNamed(nHeaders)),
			sOp(abi.FuncEmit, hSmall(0), rNull(0), rAt(dataFuzz+8, 0), rAt(dataFuzz, 0)),
			sOp(abi.FuncRecordNext, rAt(1024, 10)),
			sOp(abi.FuncBufferNeeded),
			sOp(abi.FuncRecordNext, buf(1024)),
			sOp(abi.FuncRecordHeaders, rAt(3072, 5)),
			sOp(abi.FuncRecordHeaders, buf(3072)),
			sOp(abi.FuncRecordNext, buf(1024)),
			sOp(abi.FuncRecordHeaders, buf(3072)),
			sOp(abi.FuncEmit, hSmall(0), rNamed(nFuzz8), rNamed(nFuzz8), rNamed(nHeaders)),
			sOp(abi.FuncRecordNext, buf(1024)),
			sOp(abi.FuncRecordNext, buf(1024)),
			sOp(abi.FuncEmit, hSmall(0), rNamed(nFuzz8), rNamed(nFuzz8), rAt(0, 0)),
			sOp(abi.FuncRecordHeaders, buf(3072)),
		), 3},
		"bad-arguments": {[]byte("\x05\x00\x00\x00\x00\x00\x00\x00"), slices.Concat(
			open(nKV), open(nWin),
			sOp(abi.FuncStateGet, hRef(0), rRaw(0xFFFFFFF0, 100), buf(1024)),
			sOp(abi.FuncStateGet, hRef(0), rEdge(1, 4), buf(1024)),
			sOp(abi.FuncStateGet, hRef(0), rNamed(nFuzz8), rEdge(3, 5)),
			sOp(abi.FuncStateGet, hRaw(99), rNamed(nFuzz8), buf(1024)),
			sOp(abi.FuncStateGet, hRef(1), rNamed(nFuzz8), buf(1024)),
			sOp(abi.FuncStatePut, hRef(0), rAtN(0, -2), rNull(0)),
			sOp(abi.FuncStatePut, hRef(0), rNull(0), rNamed(nFuzz0)),
			sOp(abi.FuncStatePrefix, hRef(0), rNull(0)),
			sOp(abi.FuncEmit, hSmall(0), rNamed(nFuzz8), rNamed(nFuzz8), rNamed(nFuzz8)),
			sOp(abi.FuncEmit, hRaw(-1), rNamed(nFuzz8), rNamed(nFuzz8), rAt(0, 0)),
			sOp(abi.FuncEmit, hSmall(0), rEdge(0, 7), rNamed(nFuzz8), rAt(0, 0)),
			sOp(abi.FuncLog, rawInt(9), rNamed(nText)),
			sOp(abi.FuncSetError, rEdge(2, 3)),
			sOp(abi.FuncStoreOpen, rAt(dataFuzz, 0)),
			sOp(abi.FuncStoreOpen, rAtN(dataFuzz, 300)),
			sOp(abi.FuncStoreOpen, rNamed(nOut)),
			sOp(abi.FuncOutputOpen, rNamed(nKV)),
			sOp(abi.FuncIterNext, iRaw(7), buf(1024)),
			sOp(abi.FuncIterClose, iRaw(-3)),
			sOp(abi.FuncStreamTime, rEdge(5, 0)),
			sOp(abi.FuncSchedule, small(0), tNear(100)),
			sOp(abi.FuncSessionPut, hRef(1), rNamed(nFuzz8), tNear(0), tNear(0), rNull(0)),
		), 0},
		"end-of-memory": {nil, slices.Concat(
			open(nKV),
			sOp(abi.FuncStatePut, hRef(0), rNamed(nFuzz8), rNamed(nFuzz8)),
			sOp(abi.FuncStateGet, hRef(0), rEnd(0, 0), buf(1024)),
			sOp(abi.FuncStateGet, hRef(0), rNamed(nFuzz8), rEnd(8, 0)),
			sOp(abi.FuncStateGet, hRef(0), rNamed(nFuzz8), rEnd(8, 1)),
			sOp(abi.FuncStateGet, hRef(0), rNamed(nFuzz8), rEnd(7, 0)),
			sOp(abi.FuncLog, small(3), rEnd(1, 0)),
			sOp(abi.FuncLog, small(3), rEnd(0, 1)),
			sOp(abi.FuncStreamTime, rEnd(8, 0)),
			sOp(abi.FuncStreamTime, rEnd(7, 0)),
			sOp(abi.FuncStatePut, hRef(0), rNamed(nFuzz8), rOverlap(4, 8)),
			sOp(abi.FuncStateGet, hRef(0), rNamed(nFuzz8), rOverlap(2, 16)),
		), 0},
		"iterators": {[]byte("abc"), slices.Concat(
			open(nKV),
			sOp(abi.FuncStatePut, hRef(0), rAt(dataFuzz, 1), rAt(dataFuzz, 2)),
			slices.Repeat(sOp(abi.FuncStatePrefix, hRef(0), rAt(dataFuzz, 0)), abi.MaxOpenIterators+1),
			sOp(abi.FuncIterClose, iRef(2)),
			sOp(abi.FuncIterNext, iRef(2), buf(1024)),
			sOp(abi.FuncStatePrefix, hRef(0), rAt(dataFuzz, 0)),
			sOp(abi.FuncIterNext, iGen(2, 2), buf(1024)),
			sOp(abi.FuncIterNext, iGen(22, 0), buf(1024)),
			sOp(abi.FuncIterClose, iGen(3, 1)),
		), 0},
		"output-and-wasi": {[]byte("hello"), slices.Concat(
			sOp(abi.FuncLog, small(1), rNamed(nText)),
			sOp(abi.FuncLog, small(5), rAt(dataFuzz, 5)),
			sOp(abi.FuncSetError, rNamed(nText)),
			sOp(fdWrite, small(1), rNamed(nIovec), rAt(2048, 4)),
			sOp(fdWrite, small(2), rNamed(nIovec), rAt(2048, 4)),
			sOp(fdWrite, rawInt(9), rNamed(nIovec), rAt(2048, 4)),
			sOp(fdWrite, small(2), rEdge(2, 2), rAt(2048, 4)),
			sOp(abi.FuncStreamTime, rAt(1024, 0)),
			sOp(abi.FuncBufferNeeded),
		), 1},
	}
	// Random programs over every function, for breadth.
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 8 {
		ops := make([]byte, 64+rng.IntN(512))
		for k := range ops {
			ops[k] = byte(rng.Uint32())
		}
		data := make([]byte, rng.IntN(64))
		for k := range data {
			data[k] = byte(rng.Uint32())
		}
		seeds[fmt.Sprintf("random-%d", i)] = seed{data, ops, uint8(i)}
	}
	return seeds
}

// TestWriteFuzzABISeeds writes FuzzABI's seed corpus when -write-fuzz-seeds is given.
func TestWriteFuzzABISeeds(t *testing.T) {
	if !*writeFuzzSeeds {
		t.Skip("a generator: run with -write-fuzz-seeds")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzABI")
	old, _ := filepath.Glob(filepath.Join(dir, "seed-*"))
	for _, p := range old {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, s := range fuzzABISeeds() {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n[]byte(%q)\nuint8(%d)\n", s.data, s.ops, s.extra)
		if err := os.WriteFile(filepath.Join(dir, "seed-"+name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
