// Package tally holds what the example plugins share: counts stored as decimal text, and
// the "start,end,count" value with which windowcount and sessionize emit a closed window or
// session.
package tally

import (
	"fmt"
	"strconv"
)

// Parse parses a stored decimal count without allocating.
func Parse(b []byte) (uint64, error) {
	if len(b) == 0 || len(b) > 19 {
		return 0, fmt.Errorf("stored count %q is not a decimal number", b)
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("stored count %q is not a decimal number", b)
		}
		n = n*10 + uint64(c-'0')
	}
	return n, nil
}

// AppendResult appends "start,end,count" in decimal to dst.
func AppendResult(dst []byte, start, end int64, count uint64) []byte {
	dst = strconv.AppendInt(dst, start, 10)
	dst = append(dst, ',')
	dst = strconv.AppendInt(dst, end, 10)
	dst = append(dst, ',')
	return strconv.AppendUint(dst, count, 10)
}
