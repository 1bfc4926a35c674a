package engine

import (
	"context"
	"fmt"

	"github.com/tetratelabs/wazero/api"

	"github.com/statehost/statehost/abi"
)

// hostFunction is one function of the statehost host module.
type hostFunction struct {
	name string
	fn   api.GoModuleFunc
}

// hostFunctions lists the statehost host module; abi.Signatures gives the parameters.
//
// Every function validates each pointer and length against the caller's memory and answers
// bad input with a negative code: none of them panics on guest input. Views of guest memory
// (api.Memory.Read) are handed only to callees that copy or do not keep them (Store); what
// an Emitter receives is copied first.
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
	}
}

// Stack helpers: every parameter is an i32; pointers are read as unsigned.

func argI32(stack []uint64, i int) int32  { return api.DecodeI32(stack[i]) }
func argPtr(stack []uint64, i int) uint32 { return api.DecodeU32(stack[i]) }
func ret(stack []uint64, code int32)      { stack[0] = api.EncodeI32(code) }

// view returns the guest memory region (ptr, n) without copying; n must be >= 0.
func view(mem api.Memory, ptr uint32, n int32) ([]byte, int32) {
	if n < 0 {
		return nil, abi.CodeBadArgument
	}
	b, ok := mem.Read(ptr, uint32(n))
	if !ok {
		return nil, abi.CodeOutOfBounds
	}
	return b, abi.CodeOK
}

// nullableView is view where n == abi.NullLen yields a nil (null) slice.
func nullableView(mem api.Memory, ptr uint32, n int32) ([]byte, int32) {
	if n == abi.NullLen {
		return nil, abi.CodeOK
	}
	return view(mem, ptr, n)
}

// nameView returns a store or output name of valid length.
func nameView(mem api.Memory, ptr uint32, n int32) ([]byte, int32) {
	if n < 1 || n > abi.MaxNameLen {
		return nil, abi.CodeBadArgument
	}
	return view(mem, ptr, n)
}

// store returns the open store with handle h.
func (in *Instance) store(h int32) (*openStore, int32) {
	if h < 0 || int(h) >= len(in.stores) {
		return nil, abi.CodeBadHandle
	}
	return &in.stores[h], abi.CodeOK
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

func hostStoreOpen(ctx context.Context, mod api.Module, stack []uint64) {
	in := instanceFrom(ctx)
	if in == nil {
		ret(stack, abi.CodeNoRecord)
		return
	}
	name, code := nameView(mod.Memory(), argPtr(stack, 0), argI32(stack, 1))
	if code != abi.CodeOK {
		ret(stack, code)
		return
	}
	if h, ok := in.storeIndex[string(name)]; ok {
		ret(stack, h)
		return
	}
	s, ok := in.task.Stores[string(name)]
	if !ok {
		ret(stack, abi.CodeUnknownStore)
		return
	}
	h := int32(len(in.stores))
	in.stores = append(in.stores, openStore{name: string(name), store: s})
	in.storeIndex[string(name)] = h
	ret(stack, h)
}

func hostOutputOpen(ctx context.Context, mod api.Module, stack []uint64) {
	in := instanceFrom(ctx)
	if in == nil {
		ret(stack, abi.CodeNoRecord)
		return
	}
	name, code := nameView(mod.Memory(), argPtr(stack, 0), argI32(stack, 1))
	if code != abi.CodeOK {
		ret(stack, code)
		return
	}
	for i, o := range in.task.Outputs {
		if o == string(name) {
			ret(stack, int32(i))
			return
		}
	}
	ret(stack, abi.CodeUnknownOutput)
}

func hostStateGet(ctx context.Context, mod api.Module, stack []uint64) {
	in := instanceFrom(ctx)
	if in == nil {
		ret(stack, abi.CodeNoRecord)
		return
	}
	s, code := in.store(argI32(stack, 0))
	if code != abi.CodeOK {
		ret(stack, code)
		return
	}
	mem := mod.Memory()
	key, code := view(mem, argPtr(stack, 1), argI32(stack, 2))
	if code != abi.CodeOK {
		ret(stack, code)
		return
	}
	buf, code := view(mem, argPtr(stack, 3), argI32(stack, 4))
	if code != abi.CodeOK {
		ret(stack, code)
		return
	}
	v, found, err := s.store.Get(key)
	switch {
	case err != nil:
		ret(stack, in.storeFailed(s, "get", err))
	case !found:
		ret(stack, abi.CodeNotFound)
	case len(v) > len(buf):
		in.needed = int32(len(v))
		ret(stack, abi.CodeBufferTooSmall)
	default:
		ret(stack, int32(copy(buf, v)))
	}
}

func hostStatePut(ctx context.Context, mod api.Module, stack []uint64) {
	in := instanceFrom(ctx)
	if in == nil {
		ret(stack, abi.CodeNoRecord)
		return
	}
	s, code := in.store(argI32(stack, 0))
	if code != abi.CodeOK {
		ret(stack, code)
		return
	}
	mem := mod.Memory()
	key, code := view(mem, argPtr(stack, 1), argI32(stack, 2))
	if code != abi.CodeOK {
		ret(stack, code)
		return
	}
	value, code := nullableView(mem, argPtr(stack, 3), argI32(stack, 4))
	if code != abi.CodeOK {
		ret(stack, code)
		return
	}
	// The store copies key and value: views of guest memory are safe here.
	var err error
	if value == nil {
		err = s.store.Delete(key)
	} else {
		err = s.store.Put(key, value)
	}
	if err != nil {
		ret(stack, in.storeFailed(s, "put", err))
		return
	}
	ret(stack, abi.CodeOK)
}

func hostStateDelete(ctx context.Context, mod api.Module, stack []uint64) {
	in := instanceFrom(ctx)
	if in == nil {
		ret(stack, abi.CodeNoRecord)
		return
	}
	s, code := in.store(argI32(stack, 0))
	if code != abi.CodeOK {
		ret(stack, code)
		return
	}
	key, code := view(mod.Memory(), argPtr(stack, 1), argI32(stack, 2))
	if code != abi.CodeOK {
		ret(stack, code)
		return
	}
	if err := s.store.Delete(key); err != nil {
		ret(stack, in.storeFailed(s, "delete", err))
		return
	}
	ret(stack, abi.CodeOK)
}

func hostStateRange(ctx context.Context, mod api.Module, stack []uint64) {
	in := instanceFrom(ctx)
	if in == nil {
		ret(stack, abi.CodeNoRecord)
		return
	}
	h := argI32(stack, 0)
	s, code := in.store(h)
	if code != abi.CodeOK {
		ret(stack, code)
		return
	}
	mem := mod.Memory()
	start, code := nullableView(mem, argPtr(stack, 1), argI32(stack, 2))
	if code != abi.CodeOK {
		ret(stack, code)
		return
	}
	end, code := nullableView(mem, argPtr(stack, 3), argI32(stack, 4))
	if code != abi.CodeOK {
		ret(stack, code)
		return
	}
	slot := in.freeIterator()
	if slot < 0 {
		ret(stack, abi.CodeLimit)
		return
	}
	// The bounds are views of guest memory, which can change once the guest runs again:
	// give the store copies (it may keep them for the iterator's life).
	it, err := s.store.Range(clone(start), clone(end))
	if err != nil {
		ret(stack, in.storeFailed(s, "range", err))
		return
	}
	ret(stack, in.openIterator(slot, h, it))
}

func hostStatePrefix(ctx context.Context, mod api.Module, stack []uint64) {
	in := instanceFrom(ctx)
	if in == nil {
		ret(stack, abi.CodeNoRecord)
		return
	}
	h := argI32(stack, 0)
	s, code := in.store(h)
	if code != abi.CodeOK {
		ret(stack, code)
		return
	}
	prefix, code := view(mod.Memory(), argPtr(stack, 1), argI32(stack, 2))
	if code != abi.CodeOK {
		ret(stack, code)
		return
	}
	slot := in.freeIterator()
	if slot < 0 {
		ret(stack, abi.CodeLimit)
		return
	}
	it, err := s.store.Prefix(clone(prefix))
	if err != nil {
		ret(stack, in.storeFailed(s, "prefix", err))
		return
	}
	ret(stack, in.openIterator(slot, h, it))
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

// openIterator puts it, an iterator over store h, into the free slot and returns its handle.
func (in *Instance) openIterator(slot, h int32, it Iterator) int32 {
	gen := (in.iterGen[slot] + 1) & iterGenMask
	in.iterGen[slot] = gen
	in.iters[slot] = &openIterator{store: h, it: it}
	return slot | gen<<iterSlotBits
}

// iterator returns the open iterator with handle h and its slot.
func (in *Instance) iterator(h int32) (*openIterator, int32, int32) {
	slot := h & iterSlotMask
	if h < 0 || int(slot) >= len(in.iters) || in.iters[slot] == nil || in.iterGen[slot] != h>>iterSlotBits {
		return nil, 0, abi.CodeBadHandle
	}
	return in.iters[slot], slot, abi.CodeOK
}

func hostIterNext(ctx context.Context, mod api.Module, stack []uint64) {
	in := instanceFrom(ctx)
	if in == nil {
		ret(stack, abi.CodeNoRecord)
		return
	}
	it, _, code := in.iterator(argI32(stack, 0))
	if code != abi.CodeOK {
		ret(stack, code)
		return
	}
	buf, code := view(mod.Memory(), argPtr(stack, 1), argI32(stack, 2))
	if code != abi.CodeOK {
		ret(stack, code)
		return
	}
	n := 0
	for !it.done {
		if !it.pending {
			if !it.it.Next() {
				it.done = true
				if err := it.it.Err(); err != nil {
					ret(stack, in.storeFailed(&in.stores[it.store], "iterate", err))
					return
				}
				break
			}
			it.pending = true
		}
		k, v := it.it.Key(), it.it.Value()
		size := abi.EntrySize(len(k), len(v))
		if n+size > len(buf) {
			if n == 0 {
				in.needed = int32(size)
				ret(stack, abi.CodeBufferTooSmall)
				return
			}
			break
		}
		putEntry(buf[n:], k, v)
		n += size
		it.pending = false
	}
	ret(stack, int32(n))
}

// putEntry writes a store entry (whose value is never null) at the start of b.
func putEntry(b, k, v []byte) {
	if v == nil {
		v = []byte{}
	}
	abi.PutEntry(b, k, v)
}

func hostIterClose(ctx context.Context, mod api.Module, stack []uint64) {
	in := instanceFrom(ctx)
	if in == nil {
		ret(stack, abi.CodeNoRecord)
		return
	}
	it, slot, code := in.iterator(argI32(stack, 0))
	if code != abi.CodeOK {
		ret(stack, code)
		return
	}
	in.iters[slot] = nil
	if err := it.it.Close(); err != nil {
		ret(stack, in.storeFailed(&in.stores[it.store], "close iterator", err))
		return
	}
	ret(stack, abi.CodeOK)
}

// clone copies b, keeping nil as nil and empty as empty.
func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}
