package pluginsdk

import (
	"encoding/binary"
	"fmt"
	"time"
	"unsafe"

	"github.com/statehost/statehost/abi"
)

// Context is what a processor sees while it processes one record. It is valid only during
// the ProcessFunc call.
type Context interface {
	// Record returns the current record. Its Key and Value are valid until the
	// ProcessFunc returns.
	Record() Record
	// Headers returns the current record's headers (fetched on first call per record).
	Headers() ([]Header, error)
	// Store returns the key-value store with that name, opened once per instance.
	// Operations on a store the host does not have return an error matching
	// ErrUnknownStore, and on a store of another type one matching ErrWrongStoreType.
	Store(name string) *Store
	// WindowStore returns the window store with that name, opened once per instance (see
	// WindowStore.Err for a store that could not be opened).
	WindowStore(name string) *WindowStore
	// SessionStore returns the session store with that name, opened once per instance (see
	// SessionStore.Err for a store that could not be opened).
	SessionStore(name string) *SessionStore
	// StreamTime returns the task's stream time in milliseconds since the Unix epoch: the
	// largest timestamp of the records the task has taken, the current record's included,
	// kept across restarts; abi.NoTime before any.
	StreamTime() int64
	// Emit sends a record to the processor's first output topic. A nil key or value is
	// null; a nil value is a tombstone. The host copies both. A record that would not fit
	// the output topic (about 1 MiB by default), or that passes the emit budget of the
	// record being processed (64 MiB by default), is refused with an error matching
	// ErrLimit; see ErrLimit.
	Emit(key, value []byte) error
	// EmitTo sends a record to the output topic with that name, which must be one of the
	// processor's declared outputs (else an error matching ErrUnknownOutput).
	EmitTo(output string, key, value []byte) error
	// Send sends m, with headers, to m.Output ("" for the first output).
	Send(m Message) error
	// Log writes msg to the host's log, tagged with processor, partition and offset.
	Log(level Level, msg string)
	// Logf formats and logs as fmt.Sprintf.
	Logf(level Level, format string, args ...any)
}

// Record is an input record. Key and Value are nil when null, non-nil (maybe empty)
// otherwise.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Timestamp time.Time
	Key       []byte
	Value     []byte
}

// IsNull reports whether the value is null: the record is a tombstone.
func (r Record) IsNull() bool { return r.Value == nil }

// Header is a record header; a nil Value is null.
type Header struct {
	Key   string
	Value []byte
}

// Message is an output record for Context.Send.
type Message struct {
	Output  string // a declared output topic; "" is the first
	Key     []byte // nil is null
	Value   []byte // nil is null (a tombstone)
	Headers []Header
}

// Level is a log level.
type Level int32

// Log levels, as hclog's.
const (
	Trace Level = Level(abi.LevelTrace)
	Debug Level = Level(abi.LevelDebug)
	Info  Level = Level(abi.LevelInfo)
	Warn  Level = Level(abi.LevelWarn)
	Error Level = Level(abi.LevelError)
)

// stateCtx holds what Context and PunctuationContext share: stores, stream time, output
// and logging, all over the instance's state g.
type stateCtx struct{}

// procCtx implements Context over the instance's state g.
type procCtx struct {
	stateCtx
	rec        Record
	headers    []Header
	hasHeaders bool // headers fetched for rec
	headerCnt  int32
}

func (c *procCtx) Record() Record { return c.rec }

func (c *procCtx) Headers() ([]Header, error) {
	if c.hasHeaders || c.headerCnt == 0 {
		return c.headers, nil
	}
	n, err := fill(&g.hdrBuf, hRecordHeaders)
	if err != nil {
		return nil, fmt.Errorf("pluginsdk: record headers: %w", err)
	}
	c.headers = c.headers[:0]
	for rest := g.hdrBuf[:n]; len(rest) > 0; {
		k, v, r, ok := abi.NextEntry(rest)
		if !ok {
			return nil, fmt.Errorf("pluginsdk: record headers: malformed entries")
		}
		c.headers = append(c.headers, Header{Key: string(k), Value: v})
		rest = r
	}
	c.hasHeaders = true
	return c.headers, nil
}

func (stateCtx) Store(name string) *Store {
	// Fast path: the same name as last time, usually the very same string literal (no
	// byte comparison, no call).
	if s := g.lastStore; s != nil && sameString(s.name, name) {
		return s
	}
	s := g.store(name)
	g.lastStore = s
	return s
}

func (stateCtx) WindowStore(name string) *WindowStore {
	if s := g.lastWindow; s != nil && sameString(s.name, name) {
		return s
	}
	s := g.windowStore(name)
	g.lastWindow = s
	return s
}

func (stateCtx) SessionStore(name string) *SessionStore {
	if s := g.lastSession; s != nil && sameString(s.name, name) {
		return s
	}
	s := g.sessionStore(name)
	g.lastSession = s
	return s
}

// sameString reports whether a and b are the very same string (same bytes in memory), the
// usual case of a store named by a literal; other strings take the slow path.
func sameString(a, b string) bool {
	return len(a) == len(b) && unsafe.StringData(a) == unsafe.StringData(b)
}

func (stateCtx) StreamTime() int64 { return streamTime() }

func (stateCtx) Emit(key, value []byte) error {
	if code := hEmit(0, key, value, nil); code < 0 {
		return opError("emit", code)
	}
	return nil
}

func (c stateCtx) EmitTo(output string, key, value []byte) error {
	return c.Send(Message{Output: output, Key: key, Value: value})
}

func (stateCtx) Send(m Message) error {
	out := int32(0)
	if m.Output != "" {
		var err error
		if out, err = g.output(m.Output); err != nil {
			return err
		}
	}
	var hdrs []byte
	if len(m.Headers) > 0 {
		g.emitHdrBuf = g.emitHdrBuf[:0]
		for _, h := range m.Headers {
			g.emitHdrBuf = abi.AppendEntry(g.emitHdrBuf, []byte(h.Key), h.Value)
		}
		hdrs = g.emitHdrBuf
	}
	return emit(out, m.Key, m.Value, hdrs)
}

func emit(out int32, key, value, hdrs []byte) error {
	if code := hEmit(out, key, value, hdrs); code < 0 {
		return opError("emit", code)
	}
	return nil
}

func (stateCtx) Log(level Level, msg string) { hLog(int32(level), msg) }

func (stateCtx) Logf(level Level, format string, args ...any) {
	hLog(int32(level), fmt.Sprintf(format, args...))
}

// streamTime asks the host for the stream time; abi.NoTime if it cannot say.
func streamTime() int64 {
	if hStreamTime(&g.timeBuf) < 0 {
		return abi.NoTime
	}
	return int64(binary.LittleEndian.Uint64(g.timeBuf[:]))
}
