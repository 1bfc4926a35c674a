package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/tetratelabs/wazero/api"

	"github.com/statehost/statehost/abi"
)

func hostRecordNext(ctx context.Context, mod api.Module, stack []uint64) {
	in := instanceFrom(ctx)
	if in == nil || in.batch == nil {
		ret(stack, abi.CodeNoRecord)
		return
	}
	buf, code := view(mod.Memory(), argPtr(stack, 0), argI32(stack, 1))
	if code != abi.CodeOK {
		ret(stack, code)
		return
	}
	next := in.cursor + 1
	if next >= len(in.batch) {
		in.cursor = len(in.batch)
		ret(stack, 0)
		return
	}
	r := &in.batch[next]
	count, hsize := headersSize(r.Headers)
	h := abi.RecordHeader{
		Offset:      r.Offset,
		Timestamp:   r.Timestamp.UnixMilli(),
		Partition:   r.Partition,
		TopicLen:    int32(len(r.Topic)),
		KeyLen:      lenOrNull(r.Key),
		ValueLen:    lenOrNull(r.Value),
		HeaderCount: int32(count),
		HeadersSize: int32(hsize),
	}
	size := h.Size()
	if size > len(buf) {
		in.needed = int32(size)
		ret(stack, abi.CodeBufferTooSmall)
		return
	}
	abi.PutRecordHeader(buf, h)
	n := abi.RecordHeaderSize + copy(buf[abi.RecordHeaderSize:], r.Topic)
	n += copy(buf[n:], r.Key)
	n += copy(buf[n:], r.Value)
	in.cursor, in.last = next, next
	ret(stack, int32(n))
}

// headersSize returns the number of headers and the size of their entry encoding.
func headersSize(hs []Header) (count, size int) {
	for _, h := range hs {
		size += abi.EntrySize(len(h.Key), int(lenOrNull(h.Value)))
	}
	return len(hs), size
}

func lenOrNull(b []byte) int32 {
	if b == nil {
		return abi.NullLen
	}
	return int32(len(b))
}

func hostRecordHeaders(ctx context.Context, mod api.Module, stack []uint64) {
	in := instanceFrom(ctx)
	if in == nil {
		ret(stack, abi.CodeNoRecord)
		return
	}
	r := in.current()
	if r == nil {
		ret(stack, abi.CodeNoRecord)
		return
	}
	buf, code := view(mod.Memory(), argPtr(stack, 0), argI32(stack, 1))
	if code != abi.CodeOK {
		ret(stack, code)
		return
	}
	if _, size := headersSize(r.Headers); size > len(buf) {
		in.needed = int32(size)
		ret(stack, abi.CodeBufferTooSmall)
		return
	}
	n := 0
	for _, h := range r.Headers {
		n += abi.PutEntry(buf[n:], []byte(h.Key), h.Value)
	}
	ret(stack, int32(n))
}

func hostEmit(ctx context.Context, mod api.Module, stack []uint64) {
	in := instanceFrom(ctx)
	if in == nil {
		ret(stack, abi.CodeNoRecord)
		return
	}
	r := in.current()
	if r == nil {
		ret(stack, abi.CodeNoRecord)
		return
	}
	out := argI32(stack, 0)
	if out < 0 || int(out) >= len(in.task.Outputs) {
		ret(stack, abi.CodeBadHandle)
		return
	}
	mem := mod.Memory()
	key, code := nullableView(mem, argPtr(stack, 1), argI32(stack, 2))
	if code != abi.CodeOK {
		ret(stack, code)
		return
	}
	value, code := nullableView(mem, argPtr(stack, 3), argI32(stack, 4))
	if code != abi.CodeOK {
		ret(stack, code)
		return
	}
	hdrs, code := view(mem, argPtr(stack, 5), argI32(stack, 6))
	if code != abi.CodeOK {
		ret(stack, code)
		return
	}
	rec := OutputRecord{Topic: in.task.Outputs[out], Timestamp: r.Timestamp}
	// The emitter keeps what it gets: copy key and value out of guest memory, in one
	// allocation.
	buf := make([]byte, len(key)+len(value))
	if key != nil {
		rec.Key = buf[:copy(buf, key):len(key)]
	}
	if value != nil {
		rec.Value = buf[len(key) : len(key)+copy(buf[len(key):], value)]
	}
	if len(hdrs) > 0 {
		if rec.Headers, code = copyHeaders(hdrs); code != abi.CodeOK {
			ret(stack, code)
			return
		}
	}
	if err := in.task.Emitter.Emit(rec); err != nil {
		if in.hostErr == nil {
			in.hostErr, in.hostKind = fmt.Errorf("output %q: %w", rec.Topic, err), ErrEmit
		}
		ret(stack, abi.CodeEmitFailed)
		return
	}
	ret(stack, abi.CodeOK)
}

// copyHeaders decodes a sequence of header entries into copies.
func copyHeaders(b []byte) ([]Header, int32) {
	var hs []Header
	for len(b) > 0 {
		k, v, rest, ok := abi.NextEntry(b)
		if !ok {
			return nil, abi.CodeBadArgument
		}
		hs = append(hs, Header{Key: string(k), Value: clone(v)})
		b = rest
	}
	return hs, abi.CodeOK
}

func hostLog(ctx context.Context, mod api.Module, stack []uint64) {
	in := instanceFrom(ctx)
	if in == nil {
		ret(stack, abi.CodeNoRecord)
		return
	}
	level := argI32(stack, 0)
	if level < abi.LevelTrace || level > abi.LevelError {
		ret(stack, abi.CodeBadArgument)
		return
	}
	msg, code := view(mod.Memory(), argPtr(stack, 1), argI32(stack, 2))
	if code != abi.CodeOK {
		ret(stack, code)
		return
	}
	if hclog.Level(level) < in.log.GetLevel() {
		ret(stack, abi.CodeOK)
		return
	}
	text := truncate(msg, abi.MaxLogLen)
	if r := in.current(); r != nil {
		in.log.Log(hclog.Level(level), text, "offset", r.Offset)
	} else {
		in.log.Log(hclog.Level(level), text)
	}
	ret(stack, abi.CodeOK)
}

func hostSetError(ctx context.Context, mod api.Module, stack []uint64) {
	in := instanceFrom(ctx)
	if in == nil {
		ret(stack, abi.CodeNoRecord)
		return
	}
	msg, code := view(mod.Memory(), argPtr(stack, 0), argI32(stack, 1))
	if code != abi.CodeOK {
		ret(stack, code)
		return
	}
	in.message = truncate(msg, abi.MaxErrorLen)
	ret(stack, abi.CodeOK)
}

func hostBufferNeeded(ctx context.Context, _ api.Module, stack []uint64) {
	in := instanceFrom(ctx)
	if in == nil {
		ret(stack, abi.CodeNoRecord)
		return
	}
	ret(stack, in.needed)
}

// truncate copies at most n bytes of b into a string with invalid UTF-8 replaced.
func truncate(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
