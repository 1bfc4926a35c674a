package pluginsdk

import (
	"bytes"
	"time"

	"github.com/statehost/statehost/abi"
	"github.com/statehost/statehost/pluginsdk/internal/hostcall"
)

// Initial buffer sizes; buffers grow on CodeBufferTooSmall and are reused.
const (
	recordBufSize = 4 << 10
	valueBufSize  = 256
	iterBufSize   = 4 << 10
)

// instance is the SDK's state in one guest instance.
type instance struct {
	ctx        procCtx
	recBuf     []byte
	hdrBuf     []byte
	emitHdrBuf []byte
	topic      []byte   // bytes of ctx.rec.Topic, to reuse the string
	stores     []*Store // by order of opening; few, so a linear search beats a map
	outputs    map[string]int32
	freeIter   [][]byte
}

var g instance

func init() {
	hostcall.Entry.Reset = func() { g = instance{} }
	hostcall.Entry.Init = guestInit
	hostcall.Entry.ProcessBatch = processBatch
}

// guestInit implements statehost_init: it opens the declared stores.
func guestInit() int32 {
	if registered == nil {
		hSetError("pluginsdk: no processor registered: call pluginsdk.Register in init()")
		return abi.CodeProcessorFailed
	}
	for _, name := range registered.stores {
		if s := g.store(name); s.err != nil {
			hSetError(s.err.Error())
			return abi.CodeUnknownStore
		}
	}
	return abi.CodeOK
}

// processBatch implements statehost_process_batch: it takes every record of the batch and
// calls the processor for each.
func processBatch(count int32) int32 {
	if registered == nil {
		hSetError("pluginsdk: no processor registered: call pluginsdk.Register in init()")
		return abi.CodeProcessorFailed
	}
	if g.recBuf == nil {
		g.recBuf = make([]byte, recordBufSize)
	}
	for {
		n := hRecordNext(g.recBuf)
		if n == abi.CodeBufferTooSmall {
			g.recBuf = make([]byte, grow(len(g.recBuf), hBufferNeeded()))
			continue
		}
		if n <= 0 {
			return n // 0: end of the batch
		}
		if !g.decodeRecord(g.recBuf[:n]) {
			hSetError("pluginsdk: malformed record from host")
			return abi.CodeProcessorFailed
		}
		if err := registered.fn(&g.ctx); err != nil {
			hSetError(err.Error())
			return abi.CodeProcessorFailed
		}
	}
}

// decodeRecord makes b, written by record_next, the current record.
func (in *instance) decodeRecord(b []byte) bool {
	h, topic, key, value, ok := abi.ReadRecord(b)
	if !ok {
		return false
	}
	c := &in.ctx
	if !bytes.Equal(topic, in.topic) || c.rec.Topic == "" {
		c.rec.Topic = string(topic)
		in.topic = append(in.topic[:0], topic...)
	}
	c.rec.Partition = h.Partition
	c.rec.Offset = h.Offset
	c.rec.Timestamp = time.UnixMilli(h.Timestamp)
	c.rec.Key, c.rec.Value = key, value
	c.headerCnt, c.hasHeaders, c.headers = h.HeaderCount, false, c.headers[:0]
	return true
}

// store returns the store named name, opening it on first use.
func (in *instance) store(name string) *Store {
	for _, s := range in.stores {
		if s.name == name {
			return s
		}
	}
	s := &Store{name: name}
	if h := hStoreOpen(name); h < 0 {
		s.err = s.fail("open", h)
	} else {
		s.handle, s.buf = h, make([]byte, valueBufSize)
	}
	in.stores = append(in.stores, s)
	return s
}

// output returns the index of the output topic named name.
func (in *instance) output(name string) (int32, error) {
	if i, ok := in.outputs[name]; ok {
		return i, nil
	}
	i := hOutputOpen(name)
	if i < 0 {
		return 0, opError("output "+name, i)
	}
	if in.outputs == nil {
		in.outputs = map[string]int32{}
	}
	in.outputs[name] = i
	return i, nil
}

// iterBuf returns a buffer for an iterator, reusing a released one.
func (in *instance) iterBuf() []byte {
	if n := len(in.freeIter); n > 0 {
		b := in.freeIter[n-1]
		in.freeIter = in.freeIter[:n-1]
		return b
	}
	return make([]byte, iterBufSize)
}

// releaseIterBuf keeps b for the next iterator.
func (in *instance) releaseIterBuf(b []byte) {
	if len(in.freeIter) < abi.MaxOpenIterators {
		in.freeIter = append(in.freeIter, b)
	}
}

// fill calls call with *buf, growing *buf while the host answers CodeBufferTooSmall, and
// returns the length written.
func fill(buf *[]byte, call func([]byte) int32) (int, error) {
	if *buf == nil {
		*buf = make([]byte, valueBufSize)
	}
	for {
		n := call((*buf)[:cap(*buf)])
		if n == abi.CodeBufferTooSmall {
			*buf = make([]byte, grow(cap(*buf), hBufferNeeded()))
			continue
		}
		if n < 0 {
			return 0, Code(n)
		}
		return int(n), nil
	}
}
