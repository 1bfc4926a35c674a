// Package tally is the counting of the runtime tests' count plugins (countv2, slowcount): a
// key's count, a decimal string as plugins/count keeps it, raised by one.
package tally

import (
	"strconv"

	"github.com/statehost/statehost/pluginsdk"
)

// Increment adds one to key's count in s and returns the new count.
func Increment(s *pluginsdk.Store, key []byte) ([]byte, error) {
	old, found, err := s.Get(key)
	if err != nil {
		return nil, err
	}
	n := uint64(0)
	if found {
		if n, err = strconv.ParseUint(string(old), 10, 64); err != nil {
			return nil, err
		}
	}
	num := strconv.AppendUint(nil, n+1, 10)
	if err := s.Put(key, num); err != nil {
		return nil, err
	}
	return num, nil
}
