package testdriver

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/statehost/statehost/host/engine"
)

// Fields of each kind of line, for the messages about unknown ones.
const (
	inputFields  = "topic, partition, key, key_base64, value, value_base64, timestamp, headers; or advance_wall_clock alone"
	outputFields = "topic, partition, key, key_base64, value, value_base64, timestamp, headers"
	storeFields  = "store, partition, key, key_base64, start, end, value, value_base64"
)

// ReadInputs reads the input lines of r, named name in positions ("name:line"): records and
// steps of the wall clock. A line that cannot be read is a *LineError naming its position.
func ReadInputs(r io.Reader, name string) ([]Input, error) {
	var ins []Input
	err := eachLine(r, name, func(pos string, f fields) error {
		in := Input{Pos: pos}
		if raw, ok := f.take("advance_wall_clock"); ok {
			d, err := parseDuration(raw)
			if err != nil {
				return fmt.Errorf("advance_wall_clock: %w", err)
			}
			if err := f.unknown("advance_wall_clock alone"); err != nil {
				return err
			}
			in.AdvanceWallClock = d
			ins = append(ins, in)
			return nil
		}
		rec, err := readRecord(f)
		if err != nil {
			return err
		}
		if err := f.unknown(inputFields); err != nil {
			return err
		}
		in.Record = rec
		ins = append(ins, in)
		return nil
	})
	return ins, err
}

// readRecord takes the fields of an input record from f.
func readRecord(f fields) (*Record, error) {
	rec := &Record{Partition: -1}
	var err error
	if rec.Topic, err = f.str("topic"); err != nil {
		return nil, err
	}
	part, ok, err := f.int("partition")
	switch {
	case err != nil:
		return nil, err
	case ok && (part < 0 || part > math.MaxInt32):
		return nil, fmt.Errorf("partition %d is out of range", part)
	case ok:
		rec.Partition = int32(part)
	}
	if rec.Key, err = f.bytes("key"); err != nil {
		return nil, err
	}
	if rec.Value, err = f.bytes("value"); err != nil {
		return nil, err
	}
	if raw, ok := f.take("timestamp"); ok {
		if rec.Timestamp, err = parseTimestamp(raw); err != nil {
			return nil, fmt.Errorf("timestamp: %w", err)
		}
		rec.HasTimestamp = true
	}
	if rec.Headers, err = readHeaders(f); err != nil {
		return nil, err
	}
	return rec, nil
}

// readHeaders takes the headers field of f: an array of {"key":..,"value":..} (or
// "value_base64"); nil when absent.
func readHeaders(f fields) ([]engine.Header, error) {
	raw, ok := f.take("headers")
	if !ok {
		return nil, nil
	}
	var list []fields
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("headers: want an array of {\"key\":..,\"value\":..}, got %s", raw)
	}
	hs := make([]engine.Header, len(list))
	for i, hf := range list {
		if hf == nil {
			return nil, fmt.Errorf("headers[%d]: want an object, got null", i)
		}
		key, err := hf.str("key")
		if err == nil {
			hs[i].Key = key
			hs[i].Value, err = hf.bytes("value")
		}
		if err == nil {
			err = hf.unknown("key, value, value_base64")
		}
		if err != nil {
			return nil, fmt.Errorf("headers[%d]: %w", i, err)
		}
	}
	return hs, nil
}

// parseTimestamp reads a timestamp: an integer of Unix milliseconds, or an RFC 3339 string.
func parseTimestamp(raw json.RawMessage) (int64, error) {
	var ms int64
	if err := json.Unmarshal(raw, &ms); err == nil {
		return ms, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, fmt.Errorf("want Unix milliseconds or an RFC 3339 string, got %s", raw)
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("want Unix milliseconds or an RFC 3339 string: %w", err)
	}
	return t.UnixMilli(), nil
}

// parseDuration reads a duration: a Go duration string ("10s", "1m30s"), not negative.
func parseDuration(raw json.RawMessage) (time.Duration, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return 0, fmt.Errorf(`want a duration such as "10s", got %s`, raw)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, err
	}
	if d < 0 {
		return 0, errors.New("the wall clock does not go back: the duration is negative")
	}
	return d, nil
}

// ReadOutputs reads output lines, as Output.AppendJSON writes them (timestamps may also be
// RFC 3339 strings): an expected outputs file. A line that cannot be read is a *LineError.
func ReadOutputs(r io.Reader, name string) ([]Output, error) {
	var outs []Output
	err := eachLine(r, name, func(pos string, f fields) error {
		rec, err := readRecord(f)
		if err != nil {
			return err
		}
		if err := f.unknown(outputFields); err != nil {
			return err
		}
		switch {
		case rec.Topic == "":
			return errors.New("topic is required")
		case rec.Partition < 0:
			return errors.New("partition is required")
		case !rec.HasTimestamp:
			return errors.New("timestamp is required")
		}
		outs = append(outs, Output{Topic: rec.Topic, Partition: rec.Partition, Key: rec.Key, Value: rec.Value,
			Timestamp: rec.Timestamp, Headers: rec.Headers})
		return nil
	})
	return outs, err
}

// ReadStoreEntries reads store entry lines, as StoreEntry.AppendJSON writes them: an
// expected stores file. A line that cannot be read is a *LineError.
func ReadStoreEntries(r io.Reader, name string) ([]StoreEntry, error) {
	var entries []StoreEntry
	err := eachLine(r, name, func(pos string, f fields) error {
		var e StoreEntry
		var err error
		if e.Store, err = f.str("store"); err != nil {
			return err
		}
		part, hasPart, err := f.int("partition")
		if err != nil {
			return err
		}
		if e.Key, err = f.bytes("key"); err != nil {
			return err
		}
		if e.Value, err = f.bytes("value"); err != nil {
			return err
		}
		start, hasStart, err := f.int("start")
		if err != nil {
			return err
		}
		end, hasEnd, err := f.int("end")
		if err != nil {
			return err
		}
		if err := f.unknown(storeFields); err != nil {
			return err
		}
		switch {
		case e.Store == "":
			return errors.New("store is required")
		case !hasPart || part < 0 || part > math.MaxInt32:
			return errors.New("partition is required, from 0")
		case e.Key == nil || e.Value == nil:
			return errors.New("key and value are required (a store holds no nulls)")
		case hasStart != hasEnd:
			return errors.New("start and end go together (a window or session store's entry)")
		}
		e.Partition, e.Windowed, e.Start, e.End = int32(part), hasStart, start, end
		entries = append(entries, e)
		return nil
	})
	return entries, err
}
