package engine

import (
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/statehost/statehost/abi"
)

func hostRecordNext(c call) int32 {
	in := c.in
	buf := c.bytes(0)
	switch {
	case in.batch == nil:
		return abi.CodeNoRecord
	case c.code != abi.CodeOK:
		return c.code
	}
	next := in.cursor + 1
	if next >= len(in.batch) {
		in.cursor = len(in.batch)
		return 0
	}
	r := &in.batch[next]
	count, hsize := headersSize(r.Headers)
	h := abi.RecordHeader{
		Offset:      r.Offset,
		Timestamp:   r.Timestamp.UnixMilli(),
		Partition:   r.Partition,
		TopicLen:    int32(len(r.Topic)),
		KeyLen:      abi.LenOrNull(r.Key),
		ValueLen:    abi.LenOrNull(r.Value),
		HeaderCount: int32(count),
		HeadersSize: int32(hsize),
	}
	size := h.Size()
	if size > len(buf) {
		// The guest will grow its buffer for this record: if it dies doing so, this is the
		// record that killed it, though the cursor has not moved.
		in.needed, in.blame = int32(size), next
		return abi.CodeBufferTooSmall
	}
	n := abi.PutRecord(buf, h, r.Topic, r.Key, r.Value)
	in.cursor, in.last, in.blame = next, next, next
	if h.Timestamp >= 0 {
		in.task.Clock.ObserveTime(h.Timestamp)
	}
	return int32(n)
}

// headersSize returns the number of headers and the size of their entry encoding.
func headersSize(hs []Header) (count, size int) {
	for _, h := range hs {
		size += abi.EntrySize(len(h.Key), int(abi.LenOrNull(h.Value)))
	}
	return len(hs), size
}

func hostRecordHeaders(c call) int32 {
	r := c.in.current()
	if r == nil {
		return abi.CodeNoRecord
	}
	buf := c.bytes(0)
	if c.code != abi.CodeOK {
		return c.code
	}
	if _, size := headersSize(r.Headers); size > len(buf) {
		c.in.needed = int32(size)
		return abi.CodeBufferTooSmall
	}
	n := 0
	for _, h := range r.Headers {
		n += abi.PutEntry(buf[n:], []byte(h.Key), h.Value)
	}
	return int32(n)
}

func hostEmit(c call) int32 {
	in := c.in
	var ts time.Time
	switch r := in.current(); {
	case r != nil:
		ts = r.Timestamp
	case in.punct != nil:
		ts = time.UnixMilli(in.punct.time)
	default:
		return abi.CodeNoRecord
	}
	out := c.i32(0)
	if out < 0 || int(out) >= len(in.task.Outputs) {
		return abi.CodeBadHandle
	}
	key, value, hdrs := c.nullable(1), c.nullable(3), c.bytes(5)
	if c.code != abi.CodeOK {
		return c.code
	}
	// Bound what the emitter keeps for one emit; the views above cost nothing.
	if len(key)+len(value)+len(hdrs) > abi.MaxEmitBytes {
		return abi.CodeLimit
	}
	rec := OutputRecord{Topic: in.task.Outputs[out], Timestamp: ts}
	if len(hdrs) > 0 {
		var code int32
		if rec.Headers, code = copyHeaders(hdrs); code != abi.CodeOK {
			return code
		}
	}
	if !c.emitFits(out, len(key), len(value), rec.Headers) {
		return abi.CodeLimit // the output's limit, or the record's emit budget (limits.go)
	}
	// Key and value stay views of guest memory; the headers are copies (package doc).
	rec.Key, rec.Value = key, value
	if err := in.task.Emitter.Emit(c.ctx, rec); err != nil {
		in.hostFailed(ErrEmit, fmt.Errorf("output %q: %w", rec.Topic, err))
		return abi.CodeEmitFailed
	}
	return abi.CodeOK
}

// copyHeaders decodes a sequence of header entries into copies, in three allocations
// whatever the number of headers: the []Header, one string holding every key and one
// []byte holding every value. It returns CodeBadArgument for malformed entries and
// CodeLimit for more than abi.MaxEmitHeaders headers.
func copyHeaders(b []byte) ([]Header, int32) {
	// Count and validate first, so that nothing is allocated for a refused emit.
	n, keyBytes, valueBytes := 0, 0, 0
	for rest := b; len(rest) > 0; n++ {
		k, v, next, ok := abi.NextEntry(rest)
		if !ok {
			return nil, abi.CodeBadArgument
		}
		if n == abi.MaxEmitHeaders {
			return nil, abi.CodeLimit
		}
		keyBytes += len(k)
		valueBytes += len(v)
		rest = next
	}
	hs := make([]Header, n)
	values := make([]byte, valueBytes) // non-nil even when empty: an empty value is not null
	var keys strings.Builder
	keys.Grow(keyBytes)
	for rest := b; len(rest) > 0; {
		k, _, next, _ := abi.NextEntry(rest)
		keys.Write(k)
		rest = next
	}
	allKeys := keys.String()
	kOff, vOff := 0, 0
	for i, rest := 0, b; len(rest) > 0; i++ {
		k, v, next, _ := abi.NextEntry(rest)
		hs[i].Key = allKeys[kOff : kOff+len(k)]
		kOff += len(k)
		if v != nil {
			end := vOff + len(v)
			hs[i].Value = values[vOff:end:end]
			copy(hs[i].Value, v)
			vOff = end
		}
		rest = next
	}
	return hs, abi.CodeOK
}

func hostLog(c call) int32 {
	level := c.i32(0)
	if level < abi.LevelTrace || level > abi.LevelError {
		return abi.CodeBadArgument
	}
	msg := c.bytes(1)
	if c.code != abi.CodeOK {
		return c.code
	}
	in := c.in
	if hclog.Level(level) < in.log.GetLevel() || !in.logs.allow() {
		return abi.CodeOK // below the log level, or beyond the task's rate limit: dropped
	}
	text := truncate(msg, abi.MaxLogLen)
	if r := in.current(); r != nil {
		in.log.Log(hclog.Level(level), text, "offset", r.Offset)
	} else {
		in.log.Log(hclog.Level(level), text)
	}
	return abi.CodeOK
}

func hostSetError(c call) int32 {
	msg := c.bytes(0)
	if c.code != abi.CodeOK {
		return c.code
	}
	c.in.message = truncate(msg, abi.MaxErrorLen)
	return abi.CodeOK
}

func hostBufferNeeded(c call) int32 { return c.in.needed }

// truncate copies at most n bytes of b into a string with invalid UTF-8 replaced.
func truncate(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}
