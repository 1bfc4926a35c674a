package testdriver

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/statehost/statehost/host/engine"
)

// The JSON-lines formats (see the package doc): one JSON object a line; blank lines and lines
// whose first non-blank character is '#' are skipped. Bytes (keys, values, header values)
// are a JSON string when they are UTF-8, else base64 under the field's name with "_base64"
// (as the admin API's range answers them); null or an absent field is a null key or value.

// Record is an input record, as a line of the input gives it.
type Record struct {
	// Topic is the topic it is produced to. Required, unless the processors read only one
	// topic that none of them writes (ReadInputs leaves it empty then; Pipe fills it in).
	Topic string
	// Partition is the partition it goes to; -1 (a line without "partition"): the partition
	// of its key among the topic's partitions, as the runtime's producer and Kafka's default
	// partitioner choose it (murmur2), and partition 0 for a null key.
	Partition int32
	// Key and Value are nil for null.
	Key, Value []byte
	// Timestamp is in Unix milliseconds; HasTimestamp false: the driver's wall clock.
	Timestamp    int64
	HasTimestamp bool
	Headers      []engine.Header
}

// Input is one line of the input: a record, or a step of the wall clock.
type Input struct {
	// Pos is where the line is, "file:line", for errors.
	Pos string
	// Record is the record to pipe; nil for a step of the wall clock.
	Record *Record
	// AdvanceWallClock is how far the line moves the wall clock, when Record is nil.
	AdvanceWallClock time.Duration
}

// Output is a record a processor produced: to one of its output topics, or a dead letter.
type Output struct {
	Topic     string
	Partition int32
	Key       []byte // nil: null
	Value     []byte // nil: null (a tombstone)
	Timestamp int64  // Unix milliseconds
	Headers   []engine.Header
}

// StoreEntry is an entry of a store partition at the end of a run.
type StoreEntry struct {
	Store     string
	Partition int32
	Key       []byte
	Value     []byte
	// Windowed is set for an entry of a window or session store: Start and End are its
	// window's (start inclusive, end exclusive) or its session's (both inclusive), in Unix
	// milliseconds.
	Windowed   bool
	Start, End int64
}

// AppendJSON appends o as one JSON line, without the newline:
// {"topic":..,"partition":..,"key":..,"value":..,"timestamp":..,"headers":[..]}, headers
// only when it has some.
func (o Output) AppendJSON(b []byte) []byte {
	b = append(b, `{"topic":`...)
	b = appendString(b, o.Topic)
	b = append(b, `,"partition":`...)
	b = strconv.AppendInt(b, int64(o.Partition), 10)
	b = appendBytesField(b, "key", o.Key)
	b = appendBytesField(b, "value", o.Value)
	b = append(b, `,"timestamp":`...)
	b = strconv.AppendInt(b, o.Timestamp, 10)
	if len(o.Headers) > 0 {
		b = append(b, `,"headers":[`...)
		for i, h := range o.Headers {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"key":`...)
			b = appendString(b, h.Key)
			b = appendBytesField(b, "value", h.Value)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// AppendJSON appends e as one JSON line, without the newline:
// {"store":..,"partition":..,"key":..,"start":..,"end":..,"value":..}, start and end only
// for a window or session store.
func (e StoreEntry) AppendJSON(b []byte) []byte {
	b = append(b, `{"store":`...)
	b = appendString(b, e.Store)
	b = append(b, `,"partition":`...)
	b = strconv.AppendInt(b, int64(e.Partition), 10)
	b = appendBytesField(b, "key", e.Key)
	if e.Windowed {
		b = append(b, `,"start":`...)
		b = strconv.AppendInt(b, e.Start, 10)
		b = append(b, `,"end":`...)
		b = strconv.AppendInt(b, e.End, 10)
	}
	b = appendBytesField(b, "value", e.Value)
	return append(b, '}')
}

// appendBytesField appends `,"name":` and v as a JSON string when it is UTF-8, `,"name_base64":`
// and its base64 otherwise, and `,"name":null` for nil.
func appendBytesField(b []byte, name string, v []byte) []byte {
	switch {
	case v == nil:
		return append(append(append(b, `,"`...), name...), `":null`...)
	case utf8.Valid(v):
		b = append(append(append(b, `,"`...), name...), `":`...)
		return appendString(b, string(v))
	}
	b = append(append(append(b, `,"`...), name...), `_base64":"`...)
	return append(base64.StdEncoding.AppendEncode(b, v), '"')
}

// appendString appends s as a JSON string, without escaping '<', '>' and '&'.
func appendString(b []byte, s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string: it cannot fail
	return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}

// LineError is a line of a JSON-lines file that cannot be read.
type LineError struct {
	Pos string // "file:line"
	Err error
}

func (e *LineError) Error() string { return fmt.Sprintf("%s: %v", e.Pos, e.Err) }

func (e *LineError) Unwrap() error { return e.Err }

// eachLine calls fn with the position and the fields of every JSON object line of r (name
// names r in positions), skipping blank and '#' lines; it stops at the first error, as a
// *LineError.
func eachLine(r io.Reader, name string, fn func(pos string, f fields) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		pos := name + ":" + strconv.Itoa(n)
		f := fields{}
		if err := json.Unmarshal(line, &f); err != nil {
			return &LineError{Pos: pos, Err: fmt.Errorf("not a JSON object: %w", err)}
		}
		if f == nil {
			return &LineError{Pos: pos, Err: errors.New("not a JSON object: null")}
		}
		if err := fn(pos, f); err != nil {
			return &LineError{Pos: pos, Err: err}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// fields are the fields of a JSON object line; readers delete those they take, and what is
// left is unknown.
type fields map[string]json.RawMessage

// unknown returns an error naming the fields left, or nil.
func (f fields) unknown(known string) error {
	if len(f) == 0 {
		return nil
	}
	return fmt.Errorf("unknown field %s (known: %s)", strings.Join(slices.Sorted(maps.Keys(f)), ", "), known)
}

// take removes and returns the raw value of name, and whether it was there and not null.
func (f fields) take(name string) (json.RawMessage, bool) {
	raw, ok := f[name]
	delete(f, name)
	return raw, ok && string(raw) != "null"
}

// str takes the string field name; "" when absent.
func (f fields) str(name string) (string, error) {
	raw, ok := f.take(name)
	if !ok {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("%s: want a string, got %s", name, raw)
	}
	return s, nil
}

// int takes the integer field name, and whether it was there.
func (f fields) int(name string) (int64, bool, error) {
	raw, ok := f.take(name)
	if !ok {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("%s: want an integer, got %s", name, raw)
	}
	return n, true, nil
}

// bytes takes the bytes field name: a string under name, or base64 under name_base64; nil
// when both are absent or null. An empty string is empty bytes, not null.
func (f fields) bytes(name string) ([]byte, error) {
	text, isText := f.take(name)
	b64, isB64 := f.take(name + "_base64")
	var s string
	switch {
	case isText && isB64:
		return nil, fmt.Errorf("both %s and %s_base64 are given", name, name)
	case isText:
		if err := json.Unmarshal(text, &s); err != nil {
			return nil, fmt.Errorf("%s: want a string or null, got %s", name, text)
		}
		return append([]byte{}, s...), nil
	case isB64:
		if err := json.Unmarshal(b64, &s); err != nil {
			return nil, fmt.Errorf("%s_base64: want a base64 string, got %s", name, b64)
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("%s_base64: %w", name, err)
		}
		return append([]byte{}, b...), nil
	}
	return nil, nil
}
