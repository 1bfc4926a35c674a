package engine

// FuzzABI drives the ABI boundary with a C guest (testdata/c/abifuzz.c) that calls the host
// functions with pointers, lengths, handles and times chosen by the fuzzer, through
// Instance.ProcessBatch on real stores. Its seed corpus is under testdata/fuzz/FuzzABI/; the
// plain `go test` runs it, and .ci/run fuzzes briefly:
//
//	go test -run '^$' -fuzz '^FuzzABI$' -fuzztime 60s ./host/engine
//
// The checks of each call are in fuzz_abi_check_test.go.

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/tetratelabs/wazero/api"

	"github.com/statehost/statehost/abi"
	"github.com/statehost/statehost/store"
)

func init() {
	cGuests["abifuzz"] = [2]string{"host/engine/testdata/c/abifuzz.c", "host/engine/testdata/c/abifuzz.wasm"}
	if onlyFuzzing(os.Args[1:]) {
		// TestMain builds and compiles every Go guest, which takes a minute in the
		// coverage-instrumented binary of go test -fuzz (twice: coordinator and worker), and
		// FuzzABI needs none of them.
		clear(goGuests)
	}
}

// onlyFuzzing reports whether the test binary's arguments make it a fuzz worker, or a fuzz
// coordinator that runs no test (-test.run=^$): then only the fuzz target runs.
func onlyFuzzing(args []string) bool {
	fuzz, noTests := false, false
	for _, a := range args {
		switch {
		case a == "-test.fuzzworker" || a == "-test.fuzzworker=true":
			return true
		case strings.HasPrefix(a, "-test.fuzz=") && a != "-test.fuzz=":
			fuzz = true
		case a == "-test.run=^$":
			noTests = true
		}
	}
	return fuzz && noTests
}

// fdWrite is WASI's fd_write, which the guest also calls: its output goes to guestOutput.
const fdWrite = "fd_write"

// fuzzFuncs are the functions abifuzz.c calls, in the order of its switch.
var fuzzFuncs = []string{
	abi.FuncStoreOpen, abi.FuncOutputOpen, abi.FuncStateGet, abi.FuncStatePut, abi.FuncStateDelete,
	abi.FuncStateRange, abi.FuncStatePrefix, abi.FuncIterNext, abi.FuncIterClose, abi.FuncRecordNext,
	abi.FuncRecordHeaders, abi.FuncEmit, abi.FuncLog, abi.FuncSetError, abi.FuncBufferNeeded,
	abi.FuncStoreInfo, abi.FuncWindowPut, abi.FuncWindowGet, abi.FuncWindowFetch, abi.FuncWindowFetchAll,
	abi.FuncSessionPut, abi.FuncSessionGet, abi.FuncSessionFind, abi.FuncSessionFindAll, abi.FuncStreamTime,
	abi.FuncSchedule, fdWrite,
}

// fuzzParams returns the parameter names of fuzzFuncs[fn].
func fuzzParams(fn int) []string {
	if fuzzFuncs[fn] == fdWrite {
		return []string{"fd", "iovs_ptr", "iovs_len", "nwritten_ptr"}
	}
	return abi.Signatures[fuzzFuncs[fn]]
}

// TestFuzzABICoversHostFunctions checks that FuzzABI calls every function of the host module.
func TestFuzzABICoversHostFunctions(t *testing.T) {
	var host []string
	for _, f := range hostFunctions() {
		host = append(host, f.name)
	}
	fuzzed := slices.DeleteFunc(slices.Clone(fuzzFuncs), func(s string) bool { return s == fdWrite })
	slices.Sort(host)
	slices.Sort(fuzzed)
	if !slices.Equal(host, fuzzed) {
		t.Fatalf("the host module has %q, FuzzABI calls %q: add the new functions to abifuzz.c and fuzzFuncs", host, fuzzed)
	}
}

// The fuzzed task: stream time fuzzNow (every record has that timestamp), and the specs of
// its window and session stores.
const fuzzNow = 1_000_000

var (
	fuzzWindowSpec  = store.WindowSpec{Size: 100, Grace: 50, Retention: 1000, SegmentInterval: 500}
	fuzzSessionSpec = store.WindowSpec{Gap: 100, Grace: 50, Retention: 1000, SegmentInterval: 500}
	fuzzOutputs     = []string{"out", "out2"}
)

// The data of every program starts with these, at these offsets of the scratch area: store
// and output names, a valid sequence of header entries, and an iovec for fd_write.
const (
	dataKV, dataWin, dataSess, dataOut, dataOut2 = 0, 2, 5, 9, 12
	dataHeaders, dataHeadersLen                  = 16, 19 // ("h", "v"), ("n", null)
	dataIovec, dataText, dataTextLen             = 40, 48, 12
	dataFuzz                                     = 64 // the fuzzer's data follows
)

// fuzzRegions are the (offset, length) pairs in the data a pointer may pick by name.
var fuzzRegions = [][2]int32{
	{dataKV, 2}, {dataWin, 3}, {dataSess, 4}, {dataOut, 3}, {dataOut2, 4}, {dataHeaders, dataHeadersLen},
	{dataIovec, 1}, {dataText, dataTextLen}, {dataFuzz, 0}, {dataFuzz, 8}, {0, 0}, {0, 64},
}

// fuzzArg is one argument of an op: a value, or (ref) the result of an earlier op plus value.
type fuzzArg struct {
	ref bool
	v   int64
}

// fuzzOp is one call the guest makes.
type fuzzOp struct {
	fn   int
	args [7]fuzzArg
}

// layout is where the guest's memory holds what the test needs.
type layout struct {
	scratch, log, size uint32 // scratch area, op log, memory size (the end of the scratch area)
}

// fuzzReader hands out the fuzzer's bytes, then zeros.
type fuzzReader struct{ b []byte }

func (r *fuzzReader) bytes(n int) []byte {
	out := make([]byte, 8)
	copy(out, r.b[:min(n, len(r.b))])
	r.b = r.b[min(n, len(r.b)):]
	return out
}
func (r *fuzzReader) u8() uint8   { return r.bytes(1)[0] }
func (r *fuzzReader) u16() uint16 { return binary.LittleEndian.Uint16(r.bytes(2)) }
func (r *fuzzReader) i32() int32  { return int32(binary.LittleEndian.Uint32(r.bytes(4))) }
func (r *fuzzReader) i64() int64  { return int64(binary.LittleEndian.Uint64(r.bytes(8))) }

func pick[T any](r *fuzzReader, vs ...T) T { return vs[int(r.u8())%len(vs)] }

// decodeOps turns the fuzzer's bytes into at most maxOps ops for a guest whose memory is
// laid out as l. Each op is a function byte, then per parameter a selector byte and what it
// needs: a pointer and its length are chosen together (a named region of the data, near the
// scratch area's start or the memory's end, raw, null, overlapping the op's previous region,
// or values at the edges); handles are small numbers, raw, or results of earlier ops (of
// another generation for iterators); times are near the stream time, raw or extreme.
func decodeOps(b []byte, l layout, maxOps int) []fuzzOp {
	r := &fuzzReader{b: b}
	var ops []fuzzOp
	for len(r.b) > 0 && len(ops) < maxOps {
		op := fuzzOp{fn: int(r.u8()) % len(fuzzFuncs)}
		params := fuzzParams(op.fn)
		var prevPtr uint32
		for i := 0; i < len(params); i++ {
			name := params[i]
			switch {
			case strings.HasSuffix(name, "_ptr") && i+1 < len(params) && isLength(params[i+1]):
				ptr, n := decodeRegion(r, l, prevPtr)
				op.args[i], op.args[i+1] = fuzzArg{v: int64(ptr)}, fuzzArg{v: int64(n)}
				prevPtr = ptr
				i++
			case strings.HasSuffix(name, "_ptr"): // out_ptr, nwritten_ptr
				ptr, _ := decodeRegion(r, l, prevPtr)
				op.args[i] = fuzzArg{v: int64(ptr)}
			case name == "store" || name == "output":
				switch r.u8() % 4 {
				case 0:
					op.args[i] = fuzzArg{v: int64(r.u8() % 4)}
				case 1:
					op.args[i] = fuzzArg{ref: true, v: int64(r.u8())}
				case 2:
					op.args[i] = fuzzArg{v: int64(r.i32())}
				default:
					op.args[i] = fuzzArg{v: -1}
				}
			case name == "iterator":
				switch r.u8() % 4 {
				case 0:
					op.args[i] = fuzzArg{ref: true, v: int64(r.u8())}
				case 1: // another generation of the slot, or another slot
					op.args[i] = fuzzArg{ref: true, v: int64(r.u8()) | pick[int64](r, 1, -1, 256, -256, 1<<23)<<8}
				case 2:
					op.args[i] = fuzzArg{v: int64(r.u8())}
				default:
					op.args[i] = fuzzArg{v: int64(r.i32())}
				}
			case abi.IsI64Param(name):
				switch r.u8() % 3 {
				case 0:
					op.args[i] = fuzzArg{v: fuzzNow + int64(int16(r.u16()))}
				case 1:
					op.args[i] = fuzzArg{v: r.i64()}
				default:
					op.args[i] = fuzzArg{v: pick[int64](r, math.MinInt64, math.MaxInt64, -1, 0, 1, fuzzNow-1000, fuzzNow-150, fuzzNow-50, fuzzNow+1)}
				}
			default: // level, kind, fd
				if r.u8()%2 == 0 {
					op.args[i] = fuzzArg{v: int64(r.u8() % 7)}
				} else {
					op.args[i] = fuzzArg{v: int64(r.i32())}
				}
			}
		}
		ops = append(ops, op)
	}
	return ops
}

func isLength(name string) bool {
	return strings.HasSuffix(name, "_len") || strings.HasSuffix(name, "_cap")
}

// decodeRegion chooses a pointer and a length.
func decodeRegion(r *fuzzReader, l layout, prev uint32) (uint32, int32) {
	end := l.size
	switch r.u8() % 8 {
	case 0:
		reg := pick(r, fuzzRegions...)
		return l.scratch + uint32(reg[0]), reg[1]
	case 1:
		return l.scratch + uint32(r.u16()), int32(r.u8())
	case 2: // near the end: lengths that end just before, at or just after it
		ptr := end - uint32(r.u16()%512)
		return ptr, int32(end-ptr) + int32(int8(r.u8()))%4
	case 3:
		return uint32(r.i32()), r.i32()
	case 4:
		return l.scratch + uint32(r.u16()), abi.NullLen
	case 5:
		return pick(r, 0, math.MaxUint32, math.MaxUint32-15, 1<<31, l.scratch-8, end),
			pick[int32](r, 0, 1, 16, abi.StoreInfoSize, math.MaxInt32, -2, math.MinInt32, abi.MaxEmitBytes+1)
	case 6: // overlapping the previous region of the op
		return prev + uint32(int8(r.u8())), int32(r.u8())
	default:
		return l.scratch + uint32(r.u16()), r.i32()
	}
}

// outputRegion returns the region a host function writes to for parameter i of op, if any:
// output buffers, stream_time's i64 and fd_write's count.
func outputRegion(op fuzzOp, i int) (ptr uint32, n int64, ok bool) {
	params := fuzzParams(op.fn)
	switch name := params[i]; {
	case name == "buf_ptr":
		return uint32(op.args[i].v), int64(int32(op.args[i+1].v)), true
	case name == "out_ptr":
		return uint32(op.args[i].v), 8, true
	case name == "nwritten_ptr":
		return uint32(op.args[i].v), 4, true
	}
	return 0, 0, false
}

// protect moves output buffers that lie in the guest's own memory (below the scratch area)
// into the scratch area, so that the host never overwrites the guest's log or stack.
func protect(ops []fuzzOp, l layout) {
	for k := range ops {
		for i := range fuzzParams(ops[k].fn) {
			ptr, n, ok := outputRegion(ops[k], i)
			if ok && n >= 0 && uint64(ptr)+uint64(n) <= uint64(l.size) && ptr < l.scratch && n > 0 {
				ops[k].args[i].v = int64(l.scratch + ptr%(l.size-l.scratch))
			}
		}
	}
}

// fuzzData returns the data of a program: the named regions, then the fuzzer's data.
func fuzzData(l layout, data []byte) []byte {
	d := make([]byte, dataFuzz, dataFuzz+len(data))
	copy(d[dataKV:], "kv")
	copy(d[dataWin:], "win")
	copy(d[dataSess:], "sess")
	copy(d[dataOut:], "out")
	copy(d[dataOut2:], "out2")
	n := abi.PutEntry(d[dataHeaders:], []byte("h"), []byte("v"))
	abi.PutEntry(d[dataHeaders+n:], []byte("n"), nil)
	binary.LittleEndian.PutUint32(d[dataIovec:], l.scratch+dataText)
	binary.LittleEndian.PutUint32(d[dataIovec+4:], dataTextLen)
	copy(d[dataText:], "hello\nworld\n")
	return append(d, data...)
}

// encodeProgram lays out a program as abifuzz.c reads it.
func encodeProgram(data []byte, ops []fuzzOp) []byte {
	p := binary.LittleEndian.AppendUint32(nil, uint32(len(data)))
	p = append(p, data...)
	for _, op := range ops {
		p = append(p, byte(op.fn))
		for _, a := range op.args {
			mode := byte(0)
			if a.ref {
				mode = 1
			}
			p = binary.LittleEndian.AppendUint64(append(p, mode), uint64(a.v))
		}
	}
	return p
}

// fuzzBatch returns the records of a batch: the program, then extra records with headers
// for the program's record_next and record_headers to take.
func fuzzBatch(program []byte, extra int) []Record {
	ts := time.UnixMilli(fuzzNow)
	batch := []Record{{Topic: "in", Offset: 10, Timestamp: ts, Key: []byte("k"), Value: program}}
	for i := range extra {
		r := Record{Topic: "in", Offset: int64(11 + i), Timestamp: ts, Key: []byte{byte(i)}}
		for j := range i + 1 {
			r.Headers = append(r.Headers, Header{Key: fmt.Sprintf("h%d", j), Value: []byte(strings.Repeat("v", j))})
		}
		batch = append(batch, r)
	}
	return batch
}

// changelog records the writes of a store.
type changelog struct{ writes []store.Write }

func (l *changelog) LogPut(key, value []byte) error {
	l.writes = append(l.writes, store.Write{Key: slices.Clone(key), Value: slices.Clone(value)})
	return nil
}

func (l *changelog) LogDelete(key []byte) error {
	l.writes = append(l.writes, store.Write{Key: slices.Clone(key), Delete: true})
	return nil
}

// fuzzRig is the fuzzed task: its stores with their changelogs, and its outputs.
type fuzzRig struct {
	task                *store.Task
	kv                  Store
	win                 store.WindowStore
	sess                store.SessionStore
	kvLog, winLog, sLog *changelog
	emitted             *collector
}

func newFuzzRig(t *testing.T, m *store.Manager) *fuzzRig {
	st, err := m.OpenTask("fuzz", 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	r := &fuzzRig{task: st, kvLog: &changelog{}, winLog: &changelog{}, sLog: &changelog{}, emitted: &collector{}}
	if r.kv, err = st.Open("kv", store.Options{Backend: store.Memory, Changelog: r.kvLog}); err != nil {
		t.Fatal(err)
	}
	if r.win, err = st.OpenWindow("win", store.Options{Backend: store.Memory, Kind: store.Window, Window: fuzzWindowSpec, Changelog: r.winLog}); err != nil {
		t.Fatal(err)
	}
	if r.sess, err = st.OpenSession("sess", store.Options{Backend: store.Memory, Kind: store.Session, Window: fuzzSessionSpec, Changelog: r.sLog}); err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *fuzzRig) engineTask() Task {
	return Task{
		Processor: "fuzz", Stores: map[string]Store{"kv": r.kv},
		Windows: map[string]store.WindowStore{"win": r.win}, Sessions: map[string]store.SessionStore{"sess": r.sess},
		Clock: r.task, Outputs: fuzzOutputs, Emitter: r.emitted,
	}
}

// guestLayout asks the guest where its scratch area and log are.
func guestLayout(t *testing.T, in *Instance) layout {
	get := func(name string) uint32 {
		res, err := in.guest.ExportedFunction(name).Call(context.Background())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return api.DecodeU32(res[0])
	}
	return layout{scratch: get("abifuzz_scratch"), log: get("abifuzz_log"), size: in.mem.Size()}
}

// readOpLog returns what the guest logged: per op the function, the result and the arguments.
func readOpLog(t *testing.T, in *Instance, l layout) []loggedOp {
	b, ok := in.mem.Read(l.log, 8)
	if !ok {
		t.Fatalf("op log at %#x is outside the memory", l.log)
	}
	n := binary.LittleEndian.Uint32(b)
	b, ok = in.mem.Read(l.log+8, n*64)
	if !ok || n > 128 {
		t.Fatalf("op log of %d entries at %#x does not fit the memory", n, l.log)
	}
	out := make([]loggedOp, n)
	for i := range out {
		e := b[i*64:]
		out[i].fn = int(int32(binary.LittleEndian.Uint32(e)))
		out[i].result = int32(binary.LittleEndian.Uint32(e[4:]))
		for k := range out[i].args {
			out[i].args[k] = int64(binary.LittleEndian.Uint64(e[8+8*k:]))
		}
	}
	return out
}

// loggedOp is a call the guest made: the function, its result and its arguments.
type loggedOp struct {
	fn     int
	result int32
	args   [7]int64
}

// fuzzEnv is what every input of FuzzABI shares: an engine, the compiled guest and a store
// manager.
type fuzzEnv struct {
	mod *Module
	m   *store.Manager
}

func newFuzzEnv(f *testing.F) *fuzzEnv {
	// Guests' log lines are formatted at every level, then dropped.
	logger := hclog.New(&hclog.LoggerOptions{Output: io.Discard, Level: hclog.Trace})
	e, _ := testEngine(f, Config{Logger: logger})
	m, err := store.Open(store.Settings{Dir: f.TempDir(), MemoryBytes: store.MinMemoryBytes})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = m.Close() })
	return &fuzzEnv{mod: compile(f, e, "abifuzz"), m: m}
}

// FuzzABI runs one batch whose program makes the calls the input encodes, with extra records
// for record_next, on a fresh instance and fresh key-value, window and session stores (in
// memory, logged to recording changelogs). Every call must return a code the ABI documents
// for it and agree with its arguments (see checkOps); the batch must succeed (no host
// function traps or fails the guest); the stores must hold what the successful writes wrote
// and their changelogs must hold exactly those writes; the emitted records must be those of
// the successful emits; and a well-formed batch after it must work.
func FuzzABI(f *testing.F) {
	env := newFuzzEnv(f)
	f.Fuzz(func(t *testing.T, data, ops []byte, extra uint8) {
		ctx := context.Background()
		r := newFuzzRig(t, env.m)
		in, err := env.mod.Instantiate(ctx, r.engineTask())
		if err != nil {
			t.Fatal(err)
		}
		defer in.Close(ctx)
		l := guestLayout(t, in)
		if len(data) > 4096 {
			data = data[:4096]
		}
		prog := decodeOps(ops, l, 100)
		protect(prog, l)
		d := fuzzData(l, data)
		batch := fuzzBatch(encodeProgram(d, prog), int(extra%4))
		if err := in.ProcessBatch(ctx, batch); err != nil {
			t.Fatalf("the batch failed: %v\nops: %s", err, describeOps(prog))
		}
		if size := in.mem.Size(); size != l.size {
			t.Fatalf("memory grew from %d to %d bytes", l.size, size)
		}
		done := readOpLog(t, in, l)
		if len(done) != len(prog) {
			t.Fatalf("the guest made %d calls of the %d in its program", len(done), len(prog))
		}
		c := newChecker(t, r, in, l, d, batch)
		c.checkOps(prog, done)
		c.checkStores()
		c.checkWellFormed(ctx)
	})
}

// describeOps formats ops for failure messages.
func describeOps(ops []fuzzOp) string {
	var b strings.Builder
	for i, op := range ops {
		fmt.Fprintf(&b, "\n  %d: %s(", i, fuzzFuncs[op.fn])
		for k, name := range fuzzParams(op.fn) {
			if k > 0 {
				b.WriteString(", ")
			}
			if op.args[k].ref {
				fmt.Fprintf(&b, "%s=result[%d]%+d", name, op.args[k].v&0xff, op.args[k].v>>8)
			} else {
				fmt.Fprintf(&b, "%s=%d", name, op.args[k].v)
			}
		}
		b.WriteString(")")
	}
	return b.String()
}
