package main

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"

	"github.com/statehost/statehost/host/testdriver"
	"github.com/statehost/statehost/store"
)

// The lines of statehost state export and import are testdriver's store entries
// (testdriver.StoreEntry.AppendJSON): what export writes, statehost test prints and checks,
// and the other way round.

// storeReader gives the stores of an open task: a store.Task (the local state) or a
// changelog.Task (restored from the changelog).
type storeReader interface {
	Store(name string) store.Store
	WindowStore(name string) store.WindowStore
	SessionStore(name string) store.SessionStore
}

// writePartition writes the entries of partition part of the store s, open in r, to w as
// JSON lines, by key (then start and end, for windows and sessions), and returns how many.
func writePartition(w *bufio.Writer, r storeReader, s stateStore, part int32) (int, error) {
	name := s.spec.Name
	fail := func(err error) error { return fmt.Errorf("read partition %d of store %s: %w", part, name, err) }
	var line []byte
	write := func(e testdriver.StoreEntry) error {
		line = append(e.AppendJSON(line[:0]), '\n')
		_, err := w.Write(line)
		return err
	}
	if !s.windowed() {
		it, err := r.Store(name).Range(nil, nil)
		if err != nil {
			return 0, fail(err)
		}
		defer it.Close()
		n := 0
		for it.Next() {
			if err := write(testdriver.StoreEntry{Store: name, Partition: part, Key: it.Key(), Value: it.Value()}); err != nil {
				return n, err
			}
			n++
		}
		if err := it.Err(); err != nil {
			return n, fail(err)
		}
		return n, nil
	}
	// Windows and sessions come by segment: sorted by key, start and end, as statehost test
	// lists them.
	var (
		it  store.WindowIterator
		err error
	)
	if s.spec.Kind == store.Window {
		it, err = r.WindowStore(name).FetchAll(math.MinInt64, math.MaxInt64)
	} else {
		it, err = r.SessionStore(name).FindAll(math.MinInt64, math.MaxInt64)
	}
	if err != nil {
		return 0, fail(err)
	}
	defer it.Close()
	var entries []testdriver.StoreEntry
	for it.Next() {
		entries = append(entries, testdriver.StoreEntry{Store: name, Partition: part, Key: bytes.Clone(it.Key()),
			Value: bytes.Clone(it.Value()), Windowed: true, Start: it.Start(), End: it.End()})
	}
	if err := it.Err(); err != nil {
		return 0, fail(err)
	}
	slices.SortFunc(entries, func(a, b testdriver.StoreEntry) int {
		return cmp.Or(bytes.Compare(a.Key, b.Key), cmp.Compare(a.Start, b.Start), cmp.Compare(a.End, b.End))
	})
	for i, e := range entries {
		if err := write(e); err != nil {
			return i, err
		}
	}
	return len(entries), nil
}

// importEntry is a line of an import file.
type importEntry struct {
	testdriver.StoreEntry
	pos string // "file:line"
}

// stateLine is a line as JSON has it: the fields of testdriver.StoreEntry.AppendJSON.
type stateLine struct {
	Store       *string      `json:"store"`
	Partition   *json.Number `json:"partition"`
	Key         *string      `json:"key"`
	KeyBase64   *string      `json:"key_base64"`
	Value       *string      `json:"value"`
	ValueBase64 *string      `json:"value_base64"`
	Start       *json.Number `json:"start"`
	End         *json.Number `json:"end"`
}

// readImportFile reads the entries of r (named name in errors) for the store s: every line
// is checked, and the first bad one fails the read with its file:line. Blank lines and lines
// that start with '#' are skipped.
func readImportFile(r io.Reader, name string, s stateStore) ([]importEntry, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	var out []importEntry
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		pos := name + ":" + strconv.Itoa(n)
		e, err := parseImportLine(line, s)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", pos, err)
		}
		out = append(out, importEntry{StoreEntry: e, pos: pos})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return out, nil
}

// parseImportLine parses one line for the store s.
func parseImportLine(line []byte, s stateStore) (testdriver.StoreEntry, error) {
	var l stateLine
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(&l); err != nil {
		return testdriver.StoreEntry{}, fmt.Errorf("not a line of statehost state export: %w", err)
	}
	e := testdriver.StoreEntry{Store: s.spec.Name, Windowed: s.windowed()}
	if l.Store != nil && *l.Store != s.spec.Name {
		return e, fmt.Errorf("an entry of store %q, not of %s", *l.Store, s.spec.Name)
	}
	var err error
	if e.Key, err = lineBytes("key", l.Key, l.KeyBase64); err != nil {
		return e, err
	}
	if e.Value, err = lineBytes("value", l.Value, l.ValueBase64); err != nil {
		return e, err
	}
	if l.Partition == nil {
		return e, errors.New("partition is required (the partition of the task that wrote the entry)")
	}
	part, err := strconv.ParseInt(l.Partition.String(), 10, 32)
	if err != nil || part < 0 {
		return e, fmt.Errorf("partition %s: want a partition number, from 0", l.Partition)
	}
	e.Partition = int32(part)
	switch {
	case !s.windowed() && (l.Start != nil || l.End != nil):
		return e, fmt.Errorf("start and end given for an entry of %s, a key-value store", s.spec.Name)
	case s.windowed() && (l.Start == nil || l.End == nil):
		return e, fmt.Errorf("store %s is a %s store: its entries need start and end", s.spec.Name, s.spec.Kind)
	case !s.windowed():
		return e, nil
	}
	if e.Start, err = l.Start.Int64(); err != nil {
		return e, fmt.Errorf("start %s: want Unix milliseconds", l.Start)
	}
	if e.End, err = l.End.Int64(); err != nil {
		return e, fmt.Errorf("end %s: want Unix milliseconds", l.End)
	}
	switch {
	case s.spec.Kind == store.Window && e.End != e.Start+s.spec.Window.Size:
		return e, fmt.Errorf("window [%d, %d) is not %d ms long, the window_size of store %s", e.Start, e.End, s.spec.Window.Size, s.spec.Name)
	case s.spec.Kind == store.Session && e.End < e.Start:
		return e, fmt.Errorf("session [%d, %d] ends before it starts", e.Start, e.End)
	}
	return e, nil
}

// lineBytes returns the bytes of field name: text, or base64 in name_base64.
func lineBytes(name string, text, b64 *string) ([]byte, error) {
	switch {
	case text != nil && b64 != nil:
		return nil, fmt.Errorf("both %s and %s_base64 are given", name, name)
	case text != nil:
		return []byte(*text), nil
	case b64 != nil:
		b, err := base64.StdEncoding.DecodeString(*b64)
		if err != nil {
			return nil, fmt.Errorf("%s_base64: %w", name, err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("%s is required (a store holds no nulls)", name)
}
