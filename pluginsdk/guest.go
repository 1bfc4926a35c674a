package pluginsdk

import (
	"encoding/binary"
	"errors"
	"fmt"
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
	ctx           procCtx
	pctx          punctCtx
	recBuf        []byte
	hdrBuf        []byte
	emitHdrBuf    []byte
	stores        []*Store // by order of opening; few, so a linear search beats a map
	lastStore     *Store   // the store Context.Store returned last
	windowStores  []*WindowStore
	lastWindow    *WindowStore
	sessionStores []*SessionStore
	lastSession   *SessionStore
	outputs       map[string]int32
	freeIter      [][]byte
	punctuators   []punctuator // the scheduled punctuations, by order of scheduling
	timeBuf       [8]byte      // stream_time writes here
}

var g instance

func init() {
	hostcall.Entry.Reset = func() { g = instance{} }
	hostcall.Entry.Init = guestInit
	hostcall.Entry.ProcessBatch = processBatch
	hostcall.Entry.Punctuate = punctuate
	hostcall.Entry.StoreVersion = guestStoreVersion
	hostcall.Entry.Migrate = guestMigrate
	hostcall.Entry.StoreReversible = guestStoreReversible
	hostcall.Entry.MigrateReverse = guestMigrateReverse
}

// guestInit implements statehost_init: it opens the declared stores and schedules the
// punctuations.
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
	for _, name := range registered.windowStores {
		if s := g.windowStore(name); s.err != nil {
			return initFailure(s.err)
		}
	}
	for _, name := range registered.sessionStores {
		if s := g.sessionStore(name); s.err != nil {
			return initFailure(s.err)
		}
	}
	return schedule()
}

// initFailure reports err from statehost_init and returns its code.
func initFailure(err error) int32 {
	hSetError(err.Error())
	var c Code
	if errors.As(err, &c) {
		return int32(c)
	}
	return abi.CodeProcessorFailed
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
		if !g.ctx.decodeRecord(g.recBuf[:n]) {
			hSetError("pluginsdk: malformed record from host")
			return abi.CodeProcessorFailed
		}
		if err := registered.fn(&g.ctx); err != nil {
			hSetError(err.Error())
			return abi.CodeProcessorFailed
		}
	}
}

// decodeRecord makes b, written by record_next, the current record. It is
// abi.ReadRecord written out: in wasm every Go function call on the per-record path costs
// tens of nanoseconds, and this one runs for every record.
func (c *procCtx) decodeRecord(b []byte) bool {
	if len(b) < abi.RecordHeaderSize {
		return false
	}
	le := binary.LittleEndian
	tl := int32(le.Uint32(b[abi.RecordTopicLenAt:]))
	kl := int32(le.Uint32(b[abi.RecordKeyLenAt:]))
	vl := int32(le.Uint32(b[abi.RecordValueLenAt:]))
	if tl < 0 || kl < abi.NullLen || vl < abi.NullLen ||
		int64(abi.RecordHeaderSize)+int64(tl)+int64(max(kl, 0))+int64(max(vl, 0)) > int64(len(b)) {
		return false
	}
	rest := b[abi.RecordHeaderSize:]
	// The topic string is made again only when the topic changes (no allocation per record).
	if topic := rest[:tl]; string(topic) != c.rec.Topic {
		c.rec.Topic = string(topic)
	}
	rest = rest[tl:]
	c.rec.Key, c.rec.Value = nil, nil
	if kl >= 0 {
		c.rec.Key, rest = rest[:kl:kl], rest[kl:]
	}
	if vl >= 0 {
		c.rec.Value = rest[:vl:vl]
	}
	c.rec.Partition = int32(le.Uint32(b[abi.RecordPartitionAt:]))
	c.rec.Offset = int64(le.Uint64(b[abi.RecordOffsetAt:]))
	c.rec.Timestamp = time.UnixMilli(int64(le.Uint64(b[abi.RecordTimestampAt:])))
	c.headerCnt, c.hasHeaders, c.headers = int32(le.Uint32(b[abi.RecordHeaderCountAt:])), false, c.headers[:0]
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

// windowStore returns the window store named name, opening it on first use.
func (in *instance) windowStore(name string) *WindowStore {
	for _, s := range in.windowStores {
		if s.name == name {
			return s
		}
	}
	s := &WindowStore{name: name}
	s.handle, s.info, s.err = openTimed(name, abi.StoreWindow)
	if s.err == nil {
		s.buf = make([]byte, valueBufSize)
	}
	in.windowStores = append(in.windowStores, s)
	return s
}

// sessionStore returns the session store named name, opening it on first use.
func (in *instance) sessionStore(name string) *SessionStore {
	for _, s := range in.sessionStores {
		if s.name == name {
			return s
		}
	}
	s := &SessionStore{name: name}
	s.handle, s.info, s.err = openTimed(name, abi.StoreSession)
	if s.err == nil {
		s.buf = make([]byte, valueBufSize)
	}
	in.sessionStores = append(in.sessionStores, s)
	return s
}

// openTimed opens the window or session store (typ) named name and reads its description.
// On error, info is the zero StoreInfo.
func openTimed(name string, typ int32) (handle int32, info abi.StoreInfo, err error) {
	handle = hStoreOpen(name)
	if handle < 0 {
		return handle, info, storeFail(name, "open", handle)
	}
	var b [abi.StoreInfoSize]byte
	if n := hStoreInfo(handle, b[:]); n < 0 {
		return handle, info, storeFail(name, "info", n)
	}
	got, _ := abi.ReadStoreInfo(b[:])
	switch {
	case got.Type != typ:
		err = fmt.Errorf("pluginsdk: store %q: open: %w: it is a %s store, not a %s store",
			name, Code(abi.CodeWrongStoreType), storeTypeName(got.Type), storeTypeName(typ))
	case typ == abi.StoreWindow && (got.WindowSize <= 0 || got.Advance <= 0):
		err = fmt.Errorf("pluginsdk: store %q: info: window_size %d and advance %d must be positive", name, got.WindowSize, got.Advance)
	case got.Grace < 0 || got.Retention < 0 || got.InactivityGap < 0:
		err = fmt.Errorf("pluginsdk: store %q: info: negative duration in %+v", name, got)
	default:
		info = got
	}
	return handle, info, err
}

// storeTypeName names a store type of store_info.
func storeTypeName(typ int32) string {
	switch typ {
	case abi.StoreKeyValue:
		return "key-value"
	case abi.StoreWindow:
		return "window"
	case abi.StoreSession:
		return "session"
	}
	return fmt.Sprintf("type-%d", typ)
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

// iterFill fills *buf with the next entries of the host iterator handle, growing *buf while
// the host answers CodeBufferTooSmall. It returns the bytes written, 0 when the iterator is
// exhausted, or a negative code.
func iterFill(handle int32, buf *[]byte) int32 {
	for {
		n := hIterNext(handle, (*buf)[:cap(*buf)])
		if n != abi.CodeBufferTooSmall {
			return n
		}
		*buf = make([]byte, grow(cap(*buf), hBufferNeeded()))
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
