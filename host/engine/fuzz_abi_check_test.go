package engine

// The checks of FuzzABI: each call the guest made against what the ABI documents for its
// arguments, the stores and changelogs against the successful writes, and a well-formed
// batch afterwards.

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/statehost/statehost/abi"
	"github.com/statehost/statehost/store"
)

type winKey struct {
	key   string
	start int64
}

type sessKey struct {
	key        string
	start, end int64
}

// checker follows a program's calls, keeping what the host's state must be after each.
type checker struct {
	t     *testing.T
	r     *fuzzRig
	in    *Instance
	l     layout
	data  []byte // the program's data, at l.scratch
	batch []Record
	dirty [][2]uint64 // memory ranges the host may have written to

	nStores   int32          // store handles handed out
	iters     map[int32]bool // open iterators
	seenIters map[int32]bool // every iterator handle handed out
	cursor    int            // the current record; len(batch): none
	needed    int64          // what buffer_needed must return; -1: unknown but > neededGT
	neededGT  int64

	kv                 map[string][]byte
	win                map[winKey][]byte
	sess               map[sessKey][]byte
	nKV, nWin, nS, nEm int // changelog writes and emits accounted for
}

func newChecker(t *testing.T, r *fuzzRig, in *Instance, l layout, data []byte, batch []Record) *checker {
	return &checker{t: t, r: r, in: in, l: l, data: data, batch: batch, iters: map[int32]bool{}, seenIters: map[int32]bool{},
		kv: map[string][]byte{}, win: map[winKey][]byte{}, sess: map[sessKey][]byte{}}
}

// known returns the bytes of memory region (ptr, n) when the test knows them: inside the
// scratch area (the data, then zeros) and not written by the host since.
func (c *checker) known(ptr uint32, n int32) ([]byte, bool) {
	lo, hi := uint64(ptr), uint64(ptr)+uint64(max(n, 0))
	if n < 0 || lo < uint64(c.l.scratch) || hi > uint64(c.l.size) {
		return nil, false
	}
	for _, d := range c.dirty {
		if lo < d[1] && d[0] < hi {
			return nil, false
		}
	}
	out := make([]byte, n)
	if off := lo - uint64(c.l.scratch); off < uint64(len(c.data)) {
		copy(out, c.data[off:])
	}
	return out, true
}

// call is the view of one logged call the checks need.
type fcall struct {
	i      int
	fn     string
	args   [7]int64
	params []string
	result int32
}

func (f fcall) i32(name string) int32 { return int32(f.args[slices.Index(f.params, name)]) }
func (f fcall) i64(name string) int64 { return f.args[slices.Index(f.params, name)] }

// nullable reports whether the region parameter name of fn may be null.
func nullable(fn, name string) bool {
	switch fn {
	case abi.FuncStatePut, abi.FuncWindowPut, abi.FuncSessionPut:
		return name == "val_ptr"
	case abi.FuncStateRange:
		return true
	case abi.FuncEmit:
		return name == "key_ptr" || name == "val_ptr"
	}
	return false
}

// storeKind is the type of store fn works on; -1: any.
func storeKind(fn string) int32 {
	switch {
	case fn == abi.FuncStoreInfo:
		return -1
	case strings.HasPrefix(fn, "window_"):
		return abi.StoreWindow
	case strings.HasPrefix(fn, "session_"):
		return abi.StoreSession
	}
	return abi.StoreKeyValue
}

// opensIterator reports whether fn returns an iterator handle.
func opensIterator(fn string) bool {
	switch fn {
	case abi.FuncStateRange, abi.FuncStatePrefix, abi.FuncWindowFetch, abi.FuncWindowFetchAll, abi.FuncSessionFind, abi.FuncSessionFindAll:
		return true
	}
	return false
}

// region returns the bytes of the region parameter name (nil for null) and whether they
// are known.
func (c *checker) region(f fcall, name string) ([]byte, bool) {
	k := slices.Index(f.params, name)
	n := int32(f.args[k+1])
	if n == abi.NullLen && nullable(f.fn, name) {
		return nil, true
	}
	return c.known(uint32(f.args[k]), n)
}

// checkOps checks each call of the program, in order.
func (c *checker) checkOps(sent []fuzzOp, done []loggedOp) {
	t := c.t
	for i, op := range done {
		if op.fn != sent[i].fn {
			t.Fatalf("op %d: the guest called function %d, the program says %d", i, op.fn, sent[i].fn)
		}
		for k, a := range sent[i].args {
			if !a.ref && op.args[k] != a.v {
				t.Fatalf("op %d (%s): argument %d is %d, the program says %d: guest memory was overwritten",
					i, fuzzFuncs[op.fn], k, op.args[k], a.v)
			}
		}
		f := fcall{i: i, fn: fuzzFuncs[op.fn], args: op.args, params: fuzzParams(op.fn), result: op.result}
		if err := c.check(f); err != "" {
			t.Fatalf("op %d: %s = %d (%s): %s\nprogram:%s", i, describeCall(f), f.result, abi.CodeText(f.result), err, describeOps(sent))
		}
		// The host may have written to the call's output regions, whatever it answered.
		for k := range f.params {
			if ptr, n, ok := outputRegion(sent[i], k); ok && n > 0 && uint64(ptr)+uint64(n) <= uint64(c.l.size) {
				c.dirty = append(c.dirty, [2]uint64{uint64(ptr), uint64(ptr) + uint64(n)})
			}
		}
	}
}

func describeCall(f fcall) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s(", f.fn)
	for k, name := range f.params {
		if k > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%d", name, f.args[k])
	}
	return b.String() + ")"
}

// check checks one call and updates the checker's state; it returns what is wrong, or "".
func (c *checker) check(f fcall) string {
	if f.fn == fdWrite {
		if f.result < 0 || f.result > 76 { // a WASI errno
			return "not a WASI errno"
		}
		return ""
	}
	// The error codes that apply to the arguments.
	errs := map[int32]bool{}
	maybe := map[int32]bool{} // codes that may apply: the test cannot tell
	for k := 0; k < len(f.params); k++ {
		name := f.params[k]
		switch {
		case strings.HasSuffix(name, "_ptr") && k+1 < len(f.params) && isLength(f.params[k+1]):
			ptr, n := uint32(f.args[k]), int32(f.args[k+1])
			switch {
			case n == abi.NullLen && nullable(f.fn, name):
			case n < 0:
				errs[abi.CodeBadArgument] = true
			case name == "name_ptr" && (n < 1 || n > abi.MaxNameLen):
				errs[abi.CodeBadArgument] = true
			case uint64(ptr)+uint64(n) > uint64(c.l.size):
				errs[abi.CodeOutOfBounds] = true
			}
			k++
		case name == "out_ptr":
			if uint64(uint32(f.args[k]))+8 > uint64(c.l.size) {
				errs[abi.CodeOutOfBounds] = true
			}
		case name == "store":
			h := int32(f.args[k])
			switch {
			case h < 0 || h >= c.nStores:
				errs[abi.CodeBadHandle] = true
			case storeKind(f.fn) >= 0 && c.in.stores[h].kind != storeKind(f.fn):
				errs[abi.CodeWrongStoreType] = true
			}
		case name == "iterator":
			if !c.iters[int32(f.args[k])] {
				errs[abi.CodeBadHandle] = true
			}
		case name == "output":
			if o := int32(f.args[k]); o < 0 || int(o) >= len(fuzzOutputs) {
				errs[abi.CodeBadHandle] = true
			}
		}
	}
	current := c.cursor < len(c.batch)
	switch f.fn {
	case abi.FuncLog:
		if l := f.i32("level"); l < abi.LevelTrace || l > abi.LevelError {
			errs[abi.CodeBadArgument] = true
		}
	case abi.FuncSchedule: // only in statehost_init
		errs[abi.CodeBadArgument] = true
	case abi.FuncSessionPut:
		if f.i64("start_ms") > f.i64("end_ms") {
			errs[abi.CodeBadArgument] = true
		}
	case abi.FuncRecordHeaders, abi.FuncEmit:
		if !current {
			errs[abi.CodeNoRecord] = true
		}
	}
	if opensIterator(f.fn) && len(c.iters) == abi.MaxOpenIterators {
		errs[abi.CodeLimit] = true
	}
	if f.fn == abi.FuncEmit && len(errs) == 0 {
		size := int64(max(f.i32("key_len"), 0)) + int64(max(f.i32("val_len"), 0)) + int64(f.i32("hdr_len"))
		if size > abi.MaxEmitBytes {
			errs[abi.CodeLimit] = true
		} else if f.i32("hdr_len") > 0 {
			hdr, ok := c.region(f, "hdr_ptr")
			if !ok {
				maybe[abi.CodeBadArgument], maybe[abi.CodeLimit] = true, true
			} else if _, code := copyHeaders(hdr); code != abi.CodeOK {
				errs[code] = true
			}
		}
	}
	if len(errs) > 0 {
		if !errs[f.result] && !maybe[f.result] {
			return fmt.Sprintf("want one of the codes %v of its arguments", slices.Sorted(mapKeys(errs)))
		}
		if f.result == abi.CodeBufferTooSmall {
			return "buffer too small for a bad call"
		}
		return ""
	}
	if maybe[f.result] {
		return ""
	}
	return c.checkSuccess(f)
}

func mapKeys(m map[int32]bool) func(func(int32) bool) {
	return func(yield func(int32) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// tooSmall records a CodeBufferTooSmall for a buffer of capacity cap, and what it needs
// (-1: unknown).
func (c *checker) tooSmall(cap int32, need int64) {
	c.needed, c.neededGT = need, int64(cap)
}

// getResult checks the result of a get that should find value v (nil: nothing).
func (c *checker) getResult(f fcall, v []byte, found bool) string {
	bufCap := f.i32("buf_cap")
	switch {
	case !found && f.result != abi.CodeNotFound:
		return "want not found"
	case !found:
	case len(v) > int(bufCap):
		if f.result != abi.CodeBufferTooSmall {
			return fmt.Sprintf("want buffer too small for a value of %d bytes", len(v))
		}
		c.tooSmall(bufCap, int64(len(v)))
	case f.result != int32(len(v)):
		return fmt.Sprintf("want the value's %d bytes", len(v))
	}
	return ""
}

// checkSuccess checks a call whose arguments are all valid.
func (c *checker) checkSuccess(f fcall) string {
	now := int64(fuzzNow)
	switch f.fn {
	case abi.FuncStoreOpen:
		name, ok := c.region(f, "name_ptr")
		if f.result >= 0 {
			if f.result > c.nStores || ok && !slices.Contains([]string{"kv", "win", "sess"}, string(name)) {
				return "want a new handle, or an open store's"
			}
			if f.result == c.nStores {
				c.nStores++
			}
			if ok && c.in.stores[f.result].name != string(name) {
				return fmt.Sprintf("the handle is store %q's, not %q's", c.in.stores[f.result].name, name)
			}
			return ""
		}
		if f.result != abi.CodeUnknownStore || ok && slices.Contains([]string{"kv", "win", "sess"}, string(name)) {
			return "want a handle, or unknown store for an unknown name"
		}
	case abi.FuncOutputOpen:
		name, ok := c.region(f, "name_ptr")
		want := int32(slices.Index(fuzzOutputs, string(name)))
		if want < 0 {
			want = abi.CodeUnknownOutput
		}
		if ok && f.result != want || !ok && f.result != abi.CodeUnknownOutput && (f.result < 0 || int(f.result) >= len(fuzzOutputs)) {
			return "want the output's index or unknown output"
		}
	case abi.FuncStateGet:
		key, ok := c.region(f, "key_ptr")
		if !ok {
			return c.unknownGet(f)
		}
		v, found := c.kv[string(key)]
		return c.getResult(f, v, found)
	case abi.FuncWindowGet:
		key, ok := c.region(f, "key_ptr")
		if !ok {
			return c.unknownGet(f)
		}
		start := f.i64("start_ms")
		v, found := c.win[winKey{string(key), start}]
		return c.getResult(f, v, found && start > now-fuzzWindowSpec.Retention)
	case abi.FuncSessionGet:
		key, ok := c.region(f, "key_ptr")
		if !ok {
			return c.unknownGet(f)
		}
		start, end := f.i64("start_ms"), f.i64("end_ms")
		v, found := c.sess[sessKey{string(key), start, end}]
		return c.getResult(f, v, found && end > now-fuzzSessionSpec.Retention)
	case abi.FuncStatePut, abi.FuncStateDelete:
		if f.result != abi.CodeOK {
			return "want ok"
		}
		return c.logged(f, &c.nKV, c.r.kvLog, store.KeyValue)
	case abi.FuncWindowPut:
		start := f.i64("start_ms")
		drop := start <= now-fuzzWindowSpec.Retention || f.i32("val_len") != abi.NullLen && start <= now-fuzzWindowSpec.Size-fuzzWindowSpec.Grace
		return c.put(f, drop, &c.nWin, c.r.winLog, store.Window)
	case abi.FuncSessionPut:
		end := f.i64("end_ms")
		drop := end <= now-fuzzSessionSpec.Retention || f.i32("val_len") != abi.NullLen && end < now-fuzzSessionSpec.Grace
		return c.put(f, drop, &c.nS, c.r.sLog, store.Session)
	case abi.FuncStateRange, abi.FuncStatePrefix, abi.FuncWindowFetch, abi.FuncWindowFetchAll, abi.FuncSessionFind, abi.FuncSessionFindAll:
		if f.result < 0 || c.seenIters[f.result] {
			return "want a new iterator handle"
		}
		c.iters[f.result], c.seenIters[f.result] = true, true
	case abi.FuncIterNext:
		switch {
		case f.result == abi.CodeBufferTooSmall:
			c.tooSmall(f.i32("buf_cap"), -1)
		case f.result < 0 || f.result > f.i32("buf_cap"):
			return "want the bytes written to the buffer, or buffer too small"
		}
	case abi.FuncIterClose:
		if f.result != abi.CodeOK {
			return "want ok"
		}
		delete(c.iters, f.i32("iterator"))
	case abi.FuncRecordNext:
		return c.recordNext(f)
	case abi.FuncRecordHeaders:
		_, size := headersSize(c.batch[c.cursor].Headers)
		switch bufCap := f.i32("buf_cap"); {
		case int(bufCap) < size && f.result == abi.CodeBufferTooSmall:
			c.tooSmall(bufCap, int64(size))
		case int(bufCap) >= size && f.result == int32(size):
		default:
			return fmt.Sprintf("want the headers' %d bytes or buffer too small", size)
		}
	case abi.FuncEmit:
		if f.result != abi.CodeOK {
			return "want ok"
		}
		return c.emitted(f)
	case abi.FuncLog, abi.FuncSetError, abi.FuncStreamTime:
		if f.result != abi.CodeOK {
			return "want ok"
		}
	case abi.FuncBufferNeeded:
		if c.needed >= 0 && int64(f.result) != c.needed || c.needed < 0 && int64(f.result) <= c.neededGT {
			return fmt.Sprintf("want %d (or more than %d) from the last call that found its buffer too small", c.needed, c.neededGT)
		}
	case abi.FuncStoreInfo:
		switch bufCap := f.i32("buf_cap"); {
		case bufCap < abi.StoreInfoSize && f.result == abi.CodeBufferTooSmall:
			c.tooSmall(bufCap, abi.StoreInfoSize)
		case bufCap >= abi.StoreInfoSize && f.result == abi.StoreInfoSize:
		default:
			return "want the description's size or buffer too small"
		}
	default:
		return "unexpected success"
	}
	return ""
}

// unknownGet checks a get of a key the test does not know.
func (c *checker) unknownGet(f fcall) string {
	switch {
	case f.result == abi.CodeBufferTooSmall:
		c.tooSmall(f.i32("buf_cap"), -1)
	case f.result != abi.CodeNotFound && (f.result < 0 || f.result > f.i32("buf_cap")):
		return "want a value's length, not found or buffer too small"
	}
	return ""
}

// put checks a window or session put that the stream time drops or not.
func (c *checker) put(f fcall, drop bool, n *int, log *changelog, kind store.Kind) string {
	switch {
	case drop && f.result != abi.CodeDropped:
		return "want dropped: the window or session is closed or expired"
	case drop:
		return ""
	case f.result != abi.CodeOK:
		return "want ok: the window or session is open"
	}
	return c.logged(f, n, log, kind)
}

// logged checks the changelog write of a successful write call and applies it to the model.
func (c *checker) logged(f fcall, n *int, log *changelog, kind store.Kind) string {
	if *n >= len(log.writes) {
		return "the write is not in the changelog"
	}
	w := log.writes[*n]
	*n++
	key, keyOK := c.region(f, "key_ptr")
	var val []byte
	valOK, del := true, f.fn == abi.FuncStateDelete
	if !del {
		val, valOK = c.region(f, "val_ptr")
		del = f.i32("val_len") == abi.NullLen
	}
	if keyOK {
		switch kind {
		case store.Window:
			key = store.ChangelogKey(kind, key, f.i64("start_ms"), 0)
		case store.Session:
			key = store.ChangelogKey(kind, key, f.i64("end_ms"), f.i64("start_ms"))
		}
		if !bytes.Equal(w.Key, key) {
			return fmt.Sprintf("changelog key %x, want %x", w.Key, key)
		}
	}
	if w.Delete != del || valOK && !del && !bytes.Equal(w.Value, val) {
		return fmt.Sprintf("changelog write %x delete=%v value %x, want delete=%v value %x", w.Key, w.Delete, w.Value, del, val)
	}
	var v []byte
	if !w.Delete {
		v = slices.Clone(w.Value)
	}
	switch kind {
	case store.KeyValue:
		setOrDelete(c.kv, string(w.Key), v)
	case store.Window:
		k, start, _, err := store.ParseChangelogKey(kind, w.Key)
		if err != nil {
			return err.Error()
		}
		setOrDelete(c.win, winKey{string(k), start}, v)
	case store.Session:
		k, end, start, err := store.ParseChangelogKey(kind, w.Key)
		if err != nil {
			return err.Error()
		}
		setOrDelete(c.sess, sessKey{string(k), start, end}, v)
	}
	return ""
}

func setOrDelete[K comparable](m map[K][]byte, k K, v []byte) {
	if v == nil {
		delete(m, k)
	} else {
		m[k] = v
	}
}

// recordNext checks record_next: the next record, the end of the batch, or buffer too small.
func (c *checker) recordNext(f fcall) string {
	bufCap := f.i32("buf_cap")
	next := c.cursor + 1
	if next >= len(c.batch) {
		if f.result != 0 {
			return "want 0: the batch has no more records"
		}
		c.cursor = len(c.batch)
		return ""
	}
	r := c.batch[next]
	size := abi.RecordHeaderSize + len(r.Topic) + len(r.Key) + len(r.Value)
	switch {
	case int(bufCap) < size && f.result == abi.CodeBufferTooSmall:
		c.tooSmall(bufCap, int64(size))
	case int(bufCap) >= size && f.result == int32(size):
		c.cursor = next
	default:
		return fmt.Sprintf("want the next record's %d bytes, or buffer too small", size)
	}
	return ""
}

// emitted checks the record a successful emit handed to the emitter.
func (c *checker) emitted(f fcall) string {
	recs := c.r.emitted.recs
	if c.nEm >= len(recs) {
		return "the emitter did not get the record"
	}
	rec := recs[c.nEm]
	c.nEm++
	if want := fuzzOutputs[f.i32("output")]; rec.Topic != want {
		return fmt.Sprintf("emitted to %q, want %q", rec.Topic, want)
	}
	if !rec.Timestamp.Equal(c.batch[c.cursor].Timestamp) {
		return fmt.Sprintf("emitted at %v, want the current record's time", rec.Timestamp)
	}
	for _, part := range []struct {
		name string
		got  []byte
	}{{"key_ptr", rec.Key}, {"val_ptr", rec.Value}} {
		if want, ok := c.region(f, part.name); ok && (!bytes.Equal(part.got, want) || (part.got == nil) != (want == nil)) {
			return fmt.Sprintf("emitted %s %x (null %v), want %x (null %v)", part.name, part.got, part.got == nil, want, want == nil)
		}
	}
	if hdr, ok := c.region(f, "hdr_ptr"); ok {
		var want []Header
		for rest := hdr; len(rest) > 0; {
			k, v, next, _ := abi.NextEntry(rest)
			want = append(want, Header{Key: string(k), Value: v})
			rest = next
		}
		if !slices.EqualFunc(rec.Headers, want, func(a, b Header) bool {
			return a.Key == b.Key && bytes.Equal(a.Value, b.Value) && (a.Value == nil) == (b.Value == nil)
		}) {
			return fmt.Sprintf("emitted headers %v, want %v", rec.Headers, want)
		}
	}
	return ""
}

// checkStores checks that every changelog write and emitted record came from a call that
// succeeded, and that the stores hold what the model says.
func (c *checker) checkStores() {
	t := c.t
	for _, x := range []struct {
		what string
		n    int
		all  int
	}{{"kv changelog", c.nKV, len(c.r.kvLog.writes)}, {"window changelog", c.nWin, len(c.r.winLog.writes)},
		{"session changelog", c.nS, len(c.r.sLog.writes)}, {"emitted records", c.nEm, len(c.r.emitted.recs)}} {
		if x.n != x.all {
			t.Fatalf("%s: %d entries, but %d calls succeeded", x.what, x.all, x.n)
		}
	}
	got := dump(t, c.r.kv)
	want := map[string]string{}
	for k, v := range c.kv {
		want[k] = string(v)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("kv store holds %q, want %q", got, want)
	}
	var wantW []string
	it, err := c.r.win.FetchAll(math.MinInt64, math.MaxInt64)
	gotW := windowEntries(t, it, err, false)
	for k, v := range c.win {
		if k.start > fuzzNow-fuzzWindowSpec.Retention {
			wantW = append(wantW, fmt.Sprintf("%x@%d=%x", k.key, k.start, v))
		}
	}
	slices.Sort(wantW)
	if !slices.Equal(gotW, wantW) {
		t.Fatalf("window store holds %q, want %q", gotW, wantW)
	}
	var wantS []string
	it, err = c.r.sess.FindAll(math.MinInt64, math.MaxInt64)
	gotS := windowEntries(t, it, err, true)
	for k, v := range c.sess {
		if k.end > fuzzNow-fuzzSessionSpec.Retention {
			wantS = append(wantS, fmt.Sprintf("%x@%d-%d=%x", k.key, k.start, k.end, v))
		}
	}
	slices.Sort(wantS)
	if !slices.Equal(gotS, wantS) {
		t.Fatalf("session store holds %q, want %q", gotS, wantS)
	}
}

// windowEntries lists an iterator's entries as "key@start=value" (sessions:
// "key@start-end=value"), sorted.
func windowEntries(t *testing.T, it store.WindowIterator, err error, session bool) []string {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var out []string
	for it.Next() {
		if session {
			out = append(out, fmt.Sprintf("%x@%d-%d=%x", it.Key(), it.Start(), it.End(), it.Value()))
		} else {
			out = append(out, fmt.Sprintf("%x@%d=%x", it.Key(), it.Start(), it.Value()))
		}
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// checkWellFormed runs a batch of well-formed calls on the instance: each must succeed.
func (c *checker) checkWellFormed(ctx context.Context) {
	t, s := c.t, int64(c.l.scratch)
	data := []byte("kvprobeok")
	call := func(fn string, args ...fuzzArg) fuzzOp {
		op := fuzzOp{fn: slices.Index(fuzzFuncs, fn)}
		copy(op.args[:], args)
		return op
	}
	v := func(x int64) fuzzArg { return fuzzArg{v: x} }
	ref := func(op int64) fuzzArg { return fuzzArg{ref: true, v: op} }
	ops := []fuzzOp{
		call(abi.FuncStoreOpen, v(s), v(2)),
		call(abi.FuncStatePut, ref(0), v(s+2), v(5), v(s+7), v(2)),
		call(abi.FuncStateGet, ref(0), v(s+2), v(5), v(s+64), v(64)),
		// From the probe on: what the fuzzed batch stored before it (a value larger than
		// the buffer, say) is not this batch's to read.
		call(abi.FuncStateRange, ref(0), v(s+2), v(5), v(0), v(-1)),
		call(abi.FuncIterNext, ref(3), v(s+128), v(4096)),
		call(abi.FuncEmit, v(0), v(s+2), v(5), v(s+7), v(2), v(0), v(0)),
		call(abi.FuncIterClose, ref(3)),
	}
	emitted := len(c.r.emitted.recs)
	if err := c.in.ProcessBatch(ctx, fuzzBatch(encodeProgram(data, ops), 0)); err != nil {
		t.Fatalf("a well-formed batch after the fuzzed one failed: %v", err)
	}
	done := readOpLog(t, c.in, c.l)
	if len(done) != len(ops) {
		t.Fatalf("well-formed batch: %d calls made, want %d", len(done), len(ops))
	}
	for i, op := range done {
		ok := op.result >= 0
		switch i {
		case 2:
			ok = op.result == 2
		case 4:
			ok = op.result > 0
		}
		if !ok {
			t.Fatalf("well-formed batch: call %d (%s) = %d (%s)", i, fuzzFuncs[op.fn], op.result, abi.CodeText(op.result))
		}
	}
	if got := dump(t, c.r.kv)["probe"]; got != "ok" {
		t.Fatalf("well-formed batch: probe = %q in the store, want ok", got)
	}
	if recs := c.r.emitted.recs; len(recs) != emitted+1 || string(recs[emitted].Key) != "probe" || string(recs[emitted].Value) != "ok" {
		t.Fatalf("well-formed batch: emitted %d records (%v), want probe=ok", len(recs)-emitted, c.r.emitted.strings())
	}
}
