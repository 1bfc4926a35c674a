package sdktest

import (
	"bytes"
	"slices"
	"strings"
)

// MemStore is a sorted in-memory key/value store, the host side of one named store.
type MemStore struct {
	keys   []string // sorted
	values map[string][]byte
}

func newMemStore() *MemStore { return &MemStore{values: map[string][]byte{}} }

// Get returns the value under key.
func (s *MemStore) Get(key string) ([]byte, bool) {
	v, ok := s.values[key]
	return v, ok
}

// Put stores a copy of value under key (a nil value is stored as empty).
func (s *MemStore) Put(key string, value []byte) {
	if _, ok := s.values[key]; !ok {
		i, _ := slices.BinarySearch(s.keys, key)
		s.keys = slices.Insert(s.keys, i, key)
	}
	s.values[key] = append([]byte{}, value...)
}

// Delete removes key.
func (s *MemStore) Delete(key string) {
	if _, ok := s.values[key]; !ok {
		return
	}
	i, _ := slices.BinarySearch(s.keys, key)
	s.keys = slices.Delete(s.keys, i, i+1)
	delete(s.values, key)
}

// Len returns the number of keys.
func (s *MemStore) Len() int { return len(s.keys) }

// All returns a copy of the contents as a map from key to value.
func (s *MemStore) All() map[string]string {
	m := make(map[string]string, len(s.values))
	for k, v := range s.values {
		m[k] = string(v)
	}
	return m
}

// entries returns the keys in [start, end) (nil bounds unbounded) or with prefix, with
// their values, as of now.
func (s *MemStore) entries(start, end []byte, prefix []byte, isPrefix bool) []iterEntry {
	var out []iterEntry
	for _, k := range s.keys {
		kb := []byte(k)
		if isPrefix {
			if !strings.HasPrefix(k, string(prefix)) {
				continue
			}
		} else if (start != nil && bytes.Compare(kb, start) < 0) || (end != nil && bytes.Compare(kb, end) >= 0) {
			continue
		}
		out = append(out, iterEntry{key: kb, value: append([]byte{}, s.values[k]...)})
	}
	return out
}
