package engine

import (
	"context"
	"fmt"

	"github.com/tetratelabs/wazero/api"

	"github.com/statehost/statehost/abi"
	"github.com/statehost/statehost/store"
)

// hostFunction is one function of the statehost host module.
type hostFunction struct {
	name string
	fn   func(c call) int32
}

// hostFunctions lists the statehost host module; abi.Signatures gives the parameters.
//
// Every function validates each pointer and length against the caller's memory and answers
// bad input with a negative code: none of them panics on guest input. What each copies and
// what it passes on as a view of guest memory is stated once, in the package doc ("Copies
// and views of guest memory").
func hostFunctions() []hostFunction {
	return []hostFunction{
		{abi.FuncStoreOpen, hostStoreOpen},
		{abi.FuncOutputOpen, hostOutputOpen},
		{abi.FuncStateGet, hostStateGet},
		{abi.FuncStatePut, hostStatePut},
		{abi.FuncStateDelete, hostStateDelete},
		{abi.FuncStateRange, hostStateRange},
		{abi.FuncStatePrefix, hostStatePrefix},
		{abi.FuncIterNext, hostIterNext},
		{abi.FuncIterClose, hostIterClose},
		{abi.FuncRecordNext, hostRecordNext},
		{abi.FuncRecordHeaders, hostRecordHeaders},
		{abi.FuncEmit, hostEmit},
		{abi.FuncLog, hostLog},
		{abi.FuncSetError, hostSetError},
		{abi.FuncBufferNeeded, hostBufferNeeded},
		{abi.FuncStoreInfo, hostStoreInfo},
		{abi.FuncWindowPut, hostWindowPut},
		{abi.FuncWindowGet, hostWindowGet},
		{abi.FuncWindowFetch, hostWindowFetch},
		{abi.FuncWindowFetchAll, hostWindowFetchAll},
		{abi.FuncSessionPut, hostSessionPut},
		{abi.FuncSessionGet, hostSessionGet},
		{abi.FuncSessionFind, hostSessionFind},
		{abi.FuncSessionFindAll, hostSessionFindAll},
		{abi.FuncStreamTime, hostStreamTime},
		{abi.FuncSchedule, hostSchedule},
	}
}

// goModuleFunc makes fn a wazero host function: it finds the instance the call serves
// (CodeNoRecord outside a guest call of an Instance), and returns fn's result to the guest.
func goModuleFunc(fn func(c call) int32) api.GoModuleFunc {
	return func(ctx context.Context, mod api.Module, stack []uint64) {
		code := abi.CodeNoRecord
		if in := instanceFrom(ctx); in != nil {
			code = fn(call{in: in, ctx: ctx, mem: mod.Memory(), stack: stack})
		}
		stack[0] = api.EncodeI32(code)
	}
}

// call is one call of a host function: the instance it serves, the guest call's context,
// the guest's memory, and the arguments on the stack (i32s, and i64s for times). Its
// decoders check each argument; the first that fails sets code, and the decoders after it
// return nothing, so a host function decodes all its arguments, then returns code if it is
// set. Decoders run in parameter order: when several arguments are bad, the first decides.
type call struct {
	in    *Instance
	ctx   context.Context
	mem   api.Memory
	stack []uint64
	code  int32 // abi.CodeOK until an argument is bad
}

// i32 returns parameter i.
func (c *call) i32(i int) int32 { return api.DecodeI32(c.stack[i]) }

// i64 returns parameter i, an i64.
func (c *call) i64(i int) int64 { return int64(c.stack[i]) }

// bytes returns the guest memory region (pointer i, length i+1) without copying: a view,
// valid only until the host function returns (package doc). The length must be >= 0.
func (c *call) bytes(i int) []byte {
	if c.code != abi.CodeOK {
		return nil
	}
	n := c.i32(i + 1)
	if n < 0 {
		c.code = abi.CodeBadArgument
		return nil
	}
	b, ok := c.mem.Read(api.DecodeU32(c.stack[i]), uint32(n))
	if !ok {
		c.code = abi.CodeOutOfBounds
		return nil
	}
	return b
}

// nullable is bytes where a length of abi.NullLen yields nil (null).
func (c *call) nullable(i int) []byte {
	if c.code == abi.CodeOK && c.i32(i+1) == abi.NullLen {
		return nil
	}
	return c.bytes(i)
}

// name is bytes for a store or output name, 1 to abi.MaxNameLen bytes long.
func (c *call) name(i int) []byte {
	if n := c.i32(i + 1); c.code == abi.CodeOK && (n < 1 || n > abi.MaxNameLen) {
		c.code = abi.CodeBadArgument
	}
	return c.bytes(i)
}

// store returns the open key-value store whose handle is parameter i, and the handle.
func (c *call) store(i int) (*openStore, int32) { return c.storeOf(i, abi.StoreKeyValue) }

// storeOf returns the open store of type kind (-1: any) whose handle is parameter i, and
// the handle: CodeBadHandle when it is not open, CodeWrongStoreType when it is of another type.
func (c *call) storeOf(i int, kind int32) (*openStore, int32) {
	h := c.i32(i)
	if c.code != abi.CodeOK {
		return nil, h
	}
	if h < 0 || int(h) >= len(c.in.stores) {
		c.code = abi.CodeBadHandle
		return nil, h
	}
	s := &c.in.stores[h]
	if kind >= 0 && s.kind != kind {
		c.code = abi.CodeWrongStoreType
		return nil, h
	}
	if kind >= 0 && c.in.initializing {
		c.in.mod.initState.Store(true) // a state, window or session function: the task's
	}
	return s, h
}

// storeFailed records a store failure; the call will fail with ErrStore.
func (in *Instance) storeFailed(s *openStore, op string, err error) int32 {
	in.hostFailed(ErrStore, fmt.Errorf("store %q: %s: %w", s.name, op, err))
	return abi.CodeStoreFailed
}

// hostFailed records the first store or emitter failure of a guest call, with the record
// to blame at that moment: the call will fail with kind whatever the guest returns.
func (in *Instance) hostFailed(kind, err error) {
	if in.hostErr == nil {
		in.hostErr, in.hostKind, in.hostAt = err, kind, in.blame
	}
}

func hostStoreOpen(c call) int32 {
	name := c.name(0)
	if c.code != abi.CodeOK {
		return c.code
	}
	return c.in.openStore(string(name))
}

// openStore returns the handle of the store called name, opening it on its first use in the
// instance (store_open): CodeUnknownStore when the bound task has no store of that name.
func (in *Instance) openStore(name string) int32 {
	if h, ok := in.storeIndex[name]; ok {
		return h
	}
	os := openStore{name: name, limit: in.task.StoreLimits[name]}
	if s, ok := in.task.Stores[name]; ok {
		os.kind, os.store = abi.StoreKeyValue, s
	} else if w, ok := in.task.Windows[name]; ok {
		os.kind, os.win = abi.StoreWindow, w
	} else if ss, ok := in.task.Sessions[name]; ok {
		os.kind, os.sess = abi.StoreSession, ss
	} else {
		return abi.CodeUnknownStore
	}
	h := int32(len(in.stores))
	in.stores = append(in.stores, os)
	in.storeIndex[name] = h
	return h
}

func hostOutputOpen(c call) int32 {
	name := c.name(0)
	if c.code != abi.CodeOK {
		return c.code
	}
	for i, o := range c.in.task.Outputs {
		if o == string(name) {
			return int32(i)
		}
	}
	return abi.CodeUnknownOutput
}

func hostStateGet(c call) int32 {
	s, _ := c.store(0)
	key, buf := c.bytes(1), c.bytes(3)
	if c.code != abi.CodeOK {
		return c.code
	}
	v, found, err := s.store.Get(key)
	return c.getInto(s, buf, v, found, err)
}

func hostStatePut(c call) int32 {
	s, _ := c.store(0)
	key, value := c.bytes(1), c.nullable(3)
	if c.code != abi.CodeOK {
		return c.code
	}
	if store.IsVersionRecordKey(key) {
		return abi.CodeBadArgument // the changelog's version records have it (store/version.go)
	}
	if !c.writeFits(s, "state_put", len(key), len(value)) {
		return abi.CodeLimit
	}
	// Views of guest memory: the store copies key and value (package doc).
	if value == nil {
		if err := s.store.Delete(key); err != nil {
			return c.in.storeFailed(s, "delete", err)
		}
		return abi.CodeOK
	}
	if err := s.store.Put(key, value); err != nil {
		return c.in.storeFailed(s, "put", err)
	}
	return abi.CodeOK
}

func hostStateDelete(c call) int32 {
	s, _ := c.store(0)
	key := c.bytes(1)
	if c.code != abi.CodeOK {
		return c.code
	}
	if store.IsVersionRecordKey(key) {
		return abi.CodeBadArgument
	}
	if !c.writeFits(s, "state_delete", len(key), 0) {
		return abi.CodeLimit
	}
	if err := s.store.Delete(key); err != nil {
		return c.in.storeFailed(s, "delete", err)
	}
	return abi.CodeOK
}

func hostStateRange(c call) int32 {
	s, h := c.store(0)
	start, end := c.nullable(1), c.nullable(3)
	if c.code != abi.CodeOK {
		return c.code
	}
	// The bounds are views of guest memory, and the store may keep them for the iterator's
	// life: give it copies (package doc).
	return c.in.openIterator(s, h, "range", func() (Iterator, error) { return s.store.Range(clone(start), clone(end)) })
}

func hostStatePrefix(c call) int32 {
	s, h := c.store(0)
	prefix := c.bytes(1)
	if c.code != abi.CodeOK {
		return c.code
	}
	return c.in.openIterator(s, h, "prefix", func() (Iterator, error) { return s.store.Prefix(clone(prefix)) })
}

// Iterator handles are slot | generation<<iterSlotBits: the generation of a slot changes
// each time an iterator is opened in it, so the handle of a closed iterator stays invalid
// (CodeBadHandle) when its slot is reused, until the generation wraps around after
// iterGenMask+1 opens in that slot. Handles are never negative.
const (
	iterSlotBits = 8
	iterSlotMask = 1<<iterSlotBits - 1
	iterGenMask  = 1<<(31-iterSlotBits) - 1
)

// freeIterator returns a free iterator slot, or -1.
func (in *Instance) freeIterator() int32 {
	for i, it := range in.iters {
		if it == nil {
			return int32(i)
		}
	}
	return -1
}

// openIterator opens an iterator over key-value store s (handle h) with open, puts it into
// a free slot and returns its handle: CodeLimit when no slot is free, CodeStoreFailed when
// open fails (op names the operation in the error).
func (in *Instance) openIterator(s *openStore, h int32, op string, open func() (Iterator, error)) int32 {
	return in.addIterator(s, h, op, func() (*openIterator, error) {
		it, err := open()
		return &openIterator{it: it}, err
	})
}

// openWindowIterator is openIterator for a window or session store.
func (in *Instance) openWindowIterator(s *openStore, h int32, op string, open func() (store.WindowIterator, error)) int32 {
	return in.addIterator(s, h, op, func() (*openIterator, error) {
		it, err := open()
		return &openIterator{wit: it}, err
	})
}

func (in *Instance) addIterator(s *openStore, h int32, op string, open func() (*openIterator, error)) int32 {
	slot := in.freeIterator()
	if slot < 0 {
		return abi.CodeLimit
	}
	it, err := open()
	if err != nil {
		return in.storeFailed(s, op, err)
	}
	it.store = h
	gen := (in.iterGen[slot] + 1) & iterGenMask
	in.iterGen[slot] = gen
	in.iters[slot] = it
	return slot | gen<<iterSlotBits
}

// iterator returns the open iterator whose handle is parameter i, and its slot.
func (c *call) iterator(i int) (*openIterator, int32) {
	h := c.i32(i)
	slot := h & iterSlotMask
	if c.code != abi.CodeOK {
		return nil, slot
	}
	if h < 0 || int(slot) >= len(c.in.iters) || c.in.iters[slot] == nil || c.in.iterGen[slot] != h>>iterSlotBits {
		c.code = abi.CodeBadHandle
		return nil, slot
	}
	return c.in.iters[slot], slot
}

func hostIterNext(c call) int32 {
	it, _ := c.iterator(0)
	buf := c.bytes(1)
	if c.code != abi.CodeOK {
		return c.code
	}
	n := 0
	for !it.done {
		if !it.pending {
			if !it.next() {
				it.done = true
				if err := it.err(); err != nil {
					return c.in.storeFailed(&c.in.stores[it.store], "iterate", err)
				}
				break
			}
			it.pending = true
		}
		size := it.size()
		if n+size > len(buf) {
			if n == 0 {
				c.in.needed = int32(size)
				return abi.CodeBufferTooSmall
			}
			break
		}
		it.put(buf[n:])
		n += size
		it.pending = false
	}
	return int32(n)
}

func (it *openIterator) next() bool {
	if it.wit != nil {
		return it.wit.Next()
	}
	return it.it.Next()
}

func (it *openIterator) err() error {
	if it.wit != nil {
		return it.wit.Err()
	}
	return it.it.Err()
}

func (it *openIterator) close() error {
	if it.wit != nil {
		return it.wit.Close()
	}
	return it.it.Close()
}

// size returns the encoded size of the current entry.
func (it *openIterator) size() int {
	if it.wit != nil {
		return abi.WindowEntrySize(len(it.wit.Key()), len(it.wit.Value()))
	}
	return abi.EntrySize(len(it.it.Key()), len(it.it.Value()))
}

// put writes the current entry at the start of b: a window entry for a window or session
// iterator, else an entry (whose value is never null).
func (it *openIterator) put(b []byte) {
	if w := it.wit; w != nil {
		abi.PutWindowEntry(b, w.Start(), w.End(), w.Key(), w.Value())
		return
	}
	putEntry(b, it.it.Key(), it.it.Value())
}

// putEntry writes a store entry (whose value is never null) at the start of b.
func putEntry(b, k, v []byte) {
	if v == nil {
		v = []byte{}
	}
	abi.PutEntry(b, k, v)
}

func hostIterClose(c call) int32 {
	it, slot := c.iterator(0)
	if c.code != abi.CodeOK {
		return c.code
	}
	c.in.iters[slot] = nil
	if err := it.close(); err != nil {
		return c.in.storeFailed(&c.in.stores[it.store], "close iterator", err)
	}
	return abi.CodeOK
}

// clone copies b, keeping nil as nil and empty as empty.
func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}
