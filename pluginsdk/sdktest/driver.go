package sdktest

import (
	"errors"
	"fmt"
	"time"

	"github.com/statehost/statehost/abi"
	"github.com/statehost/statehost/pluginsdk/internal/hostcall"
)

// Config describes the task the driver simulates.
type Config struct {
	// Processor names the processor in errors. Default: "test".
	Processor string
	// Partition is the task's partition, given to records that have none. Default: 0.
	Partition int32
	// InputTopic is the topic given to records that have none. Default: "input".
	InputTopic string
	// Stores are the processor's stores, empty at start.
	Stores []string
	// Outputs are the processor's output topics; the first is the default output.
	Outputs []string
	// WindowStores are the processor's window stores, empty at start, by name, with their
	// descriptions (durations in milliseconds; see TumblingWindows and HoppingWindows).
	// Type may be left 0; Advance defaults to WindowSize (tumbling windows) and Retention
	// to the larger of a day and WindowSize + Grace, as in the statehost config.
	WindowStores map[string]abi.StoreInfo
	// SessionStores are the processor's session stores, empty at start, by name, with their
	// descriptions (see Sessions). Type may be left 0; Retention defaults to the larger of a
	// day and InactivityGap + Grace.
	SessionStores map[string]abi.StoreInfo
	// WallClock is the time of the fake wall clock when the driver starts. Default: the
	// Unix epoch. Only AdvanceWallClock moves it.
	WallClock time.Time
}

// Record is an input record. Key and Value are nil for null; a nil Value is a tombstone.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Timestamp time.Time
	Key       []byte
	Value     []byte
	Headers   []Header
}

// Header is a record header; a nil Value is null.
type Header struct {
	Key   string
	Value []byte
}

// KV returns a record with a key and a value.
func KV(key, value string) Record { return Record{Key: []byte(key), Value: []byte(value)} }

// Tombstone returns a record with a key and a null value.
func Tombstone(key string) Record { return Record{Key: []byte(key)} }

// At returns r with the timestamp ms milliseconds since the Unix epoch, e.g.
// sdktest.KV("k", "v").At(1000).
func (r Record) At(ms int64) Record {
	r.Timestamp = time.UnixMilli(ms)
	return r
}

// Emitted is a record the processor emitted.
type Emitted struct {
	Topic     string
	Key       []byte // nil is null
	Value     []byte // nil is null (a tombstone)
	Headers   []Header
	Timestamp time.Time
}

// LogEntry is one call of Context.Log.
type LogEntry struct {
	Level   int32 // abi.LevelTrace..abi.LevelError
	Message string
	Offset  int64 // offset of the current record, -1 if none
}

// Punctuation is a call of the processor's punctuation that the driver made.
type Punctuation struct {
	Schedule int32 // the id schedule returned
	Kind     int32 // abi.ScheduleStreamTime or abi.ScheduleWallClock
	Time     int64 // the punctuation's time, ms
}

// Driver feeds records to the registered processor and records what it does.
//
// It keeps the task's stream time as the host does: the largest timestamp of the records
// that record_next handed out (abi.NoTime before any). After each successful Process it
// runs the stream-time punctuations that are due, and AdvanceWallClock runs the wall-clock
// ones, by the rules of "Punctuation" in package abi.
type Driver struct {
	cfg          Config
	host         *memHost
	stores       map[string]*MemStore
	timed        map[string]*memTimed // window and session stores
	emitted      []Emitted
	logs         []LogEntry
	punctuations []Punctuation
	nextOffset   int64
	streamTime   int64 // valid if timeKnown
	timeKnown    bool
	clock        time.Time
}

// New installs an in-memory host for cfg and starts the processor as the host does
// (statehost_init: declared stores are opened). Creating a Driver replaces the previous one.
func New(cfg Config) (*Driver, error) {
	if cfg.Processor == "" {
		cfg.Processor = "test"
	}
	if cfg.InputTopic == "" {
		cfg.InputTopic = "input"
	}
	if cfg.WallClock.IsZero() {
		cfg.WallClock = time.UnixMilli(0)
	}
	d := &Driver{cfg: cfg, stores: map[string]*MemStore{}, timed: map[string]*memTimed{}, clock: cfg.WallClock}
	for _, s := range cfg.Stores {
		d.stores[s] = newMemStore()
	}
	for _, typ := range []int32{abi.StoreWindow, abi.StoreSession} {
		stores := cfg.WindowStores
		if typ == abi.StoreSession {
			stores = cfg.SessionStores
		}
		for name, info := range stores {
			if _, dup := d.stores[name]; dup || d.timed[name] != nil {
				return nil, fmt.Errorf("sdktest: store %q is declared twice", name)
			}
			info, err := normalizeInfo(name, typ, info)
			if err != nil {
				return nil, err
			}
			d.timed[name] = newMemTimed(d, info)
		}
	}
	d.host = &memHost{d: d, cursor: -1, last: -1}
	hostcall.Current = d.host
	if hostcall.Entry.Reset == nil {
		return nil, errors.New("sdktest: the plugin does not link pluginsdk")
	}
	hostcall.Entry.Reset()
	code := hostcall.Entry.Init()
	d.host.closeIters() // the host closes what statehost_init left open
	if code != abi.CodeOK {
		return nil, d.failure("init", code)
	}
	return d, nil
}

// Process runs one batch, as the host does: one call of the SDK's batch entry point for
// all records. Records without a topic get Config.InputTopic, records without a partition
// get Config.Partition, and records without an offset get the next sequential offset.
//
// An error names the record that was current. Unlike the real host, the driver does not
// discard the instance or undo state written before the failure. After a successful batch,
// Process runs the stream-time punctuations that are due (see Driver), and returns the
// error of one that fails.
func (d *Driver) Process(records ...Record) error {
	batch := make([]Record, len(records))
	for i, r := range records {
		if r.Topic == "" {
			r.Topic = d.cfg.InputTopic
		}
		if r.Partition == 0 {
			r.Partition = d.cfg.Partition
		}
		if r.Offset == 0 {
			r.Offset = d.nextOffset
		}
		d.nextOffset = r.Offset + 1
		batch[i] = r
	}
	if len(batch) == 0 {
		return nil
	}
	if err := d.processBatch(batch); err != nil {
		return err
	}
	return d.punctuate(abi.ScheduleStreamTime)
}

func (d *Driver) processBatch(batch []Record) error {
	h := d.host
	h.batch, h.cursor, h.last, h.inBatch, h.message = batch, -1, -1, true, ""
	defer func() { h.batch, h.inBatch = nil, false; h.closeIters() }()
	code := hostcall.Entry.ProcessBatch(int32(len(batch)))
	if code != abi.CodeOK {
		return d.failure("process", code)
	}
	if h.last != len(batch)-1 {
		return fmt.Errorf("sdktest: processor %q: protocol error: success after taking %d of %d records",
			d.cfg.Processor, h.last+1, len(batch))
	}
	return nil
}

// observe takes the timestamp of a record that record_next handed out into the stream time;
// negative timestamps (Kafka's "none", or a zero time.Time) do not count, as on the host.
func (d *Driver) observe(ts int64) {
	if ts < 0 {
		return
	}
	if !d.timeKnown || ts > d.streamTime {
		d.streamTime, d.timeKnown = ts, true
	}
}

// StreamTime returns the task's stream time: the largest timestamp of the records handed to
// the processor, in milliseconds; abi.NoTime before any.
func (d *Driver) StreamTime() int64 {
	if !d.timeKnown {
		return abi.NoTime
	}
	return d.streamTime
}

// WallClock returns the fake wall clock's time.
func (d *Driver) WallClock() time.Time { return d.clock }

// AdvanceWallClock moves the fake wall clock forward by dt and runs the wall-clock
// punctuations that are due: a schedule fires the first time one interval after it was
// scheduled, then when the clock reaches the previous punctuation's time plus the interval;
// once per call however far the clock moved, with the clock's time.
func (d *Driver) AdvanceWallClock(dt time.Duration) error {
	if dt < 0 {
		return fmt.Errorf("sdktest: AdvanceWallClock(%v): the clock does not go back", dt)
	}
	d.clock = d.clock.Add(dt)
	return d.punctuate(abi.ScheduleWallClock)
}

// punctuate runs the due punctuations of that kind, in the order they were scheduled.
func (d *Driver) punctuate(kind int32) error {
	now := d.clock.UnixMilli()
	if kind == abi.ScheduleStreamTime {
		if !d.timeKnown {
			return nil
		}
		now = d.streamTime
	}
	for _, sc := range d.host.schedules {
		if sc.kind != kind {
			continue
		}
		due := sc.fired && now >= sc.last+sc.interval
		if !sc.fired {
			due = kind == abi.ScheduleStreamTime || now >= sc.since+sc.interval
		}
		if !due {
			continue
		}
		sc.fired, sc.last = true, now
		if err := d.runPunctuation(sc, now); err != nil {
			return err
		}
	}
	return nil
}

// runPunctuation calls statehost_punctuate as the host does.
func (d *Driver) runPunctuation(sc *schedule, now int64) error {
	h := d.host
	h.inPunct, h.punctTime, h.message = true, now, ""
	defer func() { h.inPunct = false; h.closeIters() }()
	d.punctuations = append(d.punctuations, Punctuation{Schedule: sc.id, Kind: sc.kind, Time: now})
	if code := hostcall.Entry.Punctuate(sc.id, now); code != abi.CodeOK {
		kind := "stream-time"
		if sc.kind == abi.ScheduleWallClock {
			kind = "wall-clock"
		}
		return fmt.Errorf("sdktest: processor %q: %s punctuation (schedule %d) at %d failed with code %d (%s): %s",
			d.cfg.Processor, kind, sc.id, now, code, abi.CodeText(code), h.message)
	}
	return nil
}

// Punctuations returns every punctuation run so far, in order.
func (d *Driver) Punctuations() []Punctuation { return d.punctuations }

func (d *Driver) failure(op string, code int32) error {
	h := d.host
	at := "no current record"
	if h.inBatch && h.last >= 0 {
		at = fmt.Sprintf("offset %d", h.batch[h.last].Offset)
	}
	return fmt.Errorf("sdktest: processor %q: %s failed at %s with code %d (%s): %s",
		d.cfg.Processor, op, at, code, abi.CodeText(code), h.message)
}

// Emitted returns every record emitted so far, in order.
func (d *Driver) Emitted() []Emitted { return d.emitted }

// TakeEmitted returns the records emitted since the last TakeEmitted and forgets them.
func (d *Driver) TakeEmitted() []Emitted {
	e := d.emitted
	d.emitted = nil
	return e
}

// Logs returns every log entry so far.
func (d *Driver) Logs() []LogEntry { return d.logs }

// Store returns the key-value store with that name (nil if the config has none such), to
// inspect or to seed.
func (d *Driver) Store(name string) *MemStore { return d.stores[name] }

// WindowStore returns the window store with that name (nil if the config has none such),
// to inspect or to seed.
func (d *Driver) WindowStore(name string) *MemWindowStore {
	if s := d.timed[name]; s != nil && s.window() {
		return &MemWindowStore{s: s}
	}
	return nil
}

// SessionStore returns the session store with that name (nil if the config has none
// such), to inspect or to seed.
func (d *Driver) SessionStore(name string) *MemSessionStore {
	if s := d.timed[name]; s != nil && !s.window() {
		return &MemSessionStore{s: s}
	}
	return nil
}
