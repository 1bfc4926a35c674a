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

// Driver feeds records to the registered processor and records what it does.
type Driver struct {
	cfg        Config
	host       *memHost
	stores     map[string]*MemStore
	emitted    []Emitted
	logs       []LogEntry
	nextOffset int64
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
	d := &Driver{cfg: cfg, stores: map[string]*MemStore{}}
	for _, s := range cfg.Stores {
		d.stores[s] = newMemStore()
	}
	d.host = &memHost{d: d, cursor: -1, last: -1}
	hostcall.Current = d.host
	if hostcall.Entry.Reset == nil {
		return nil, errors.New("sdktest: the plugin does not link pluginsdk")
	}
	hostcall.Entry.Reset()
	if code := hostcall.Entry.Init(); code != abi.CodeOK {
		return nil, d.failure("init", code)
	}
	return d, nil
}

// Process runs one batch, as the host does: one call of the SDK's batch entry point for
// all records. Records without a topic get Config.InputTopic, records without a partition
// get Config.Partition, and records without an offset get the next sequential offset.
//
// An error names the record that was current. Unlike the real host, the driver does not
// discard the instance or undo state written before the failure.
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
	h := d.host
	h.batch, h.cursor, h.last, h.inBatch, h.message = batch, -1, -1, true, ""
	defer func() { h.batch, h.inBatch, h.iters = nil, false, [abi.MaxOpenIterators]*memIter{} }()
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

// Store returns the store with that name (nil if the config has none such), to inspect or
// to seed.
func (d *Driver) Store(name string) *MemStore { return d.stores[name] }
