package config

import (
	"errors"
	"math"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// DefaultEmitBudget is the default of a processor's emit_budget: 64 MiB, 64 of the largest
// records a broker takes by default (message.max.bytes, 1 MiB).
const DefaultEmitBudget = 64 << 20

// byteUnits are the units of a byte size, longest first so that "KiB" is not read as "B".
var byteUnits = []struct {
	name string
	size int64
}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}

// ParseByteSize parses a byte size: a whole number and one of the units B, KiB, MiB and GiB,
// with or without a space between ("64MiB", "512 KiB", "100B").
func ParseByteSize(s string) (int64, error) {
	for _, u := range byteUnits {
		num, ok := strings.CutSuffix(s, u.name)
		if !ok {
			continue
		}
		num = strings.TrimSuffix(num, " ")
		if num == "" || strings.TrimLeft(num, "0123456789") != "" {
			return 0, errors.New("the number must be a whole number of digits")
		}
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n > math.MaxInt64/u.size {
			return 0, errors.New("the size is too large")
		}
		return n * u.size, nil
	}
	return 0, errors.New("the unit must be one of B, KiB, MiB and GiB")
}

// byteSize decodes a byte size string (ParseByteSize) that must be greater than zero,
// returning def when it is absent or invalid (the problem is recorded).
func (d *decoder) byteSize(expr hcl.Expression, name string, def int64) int64 {
	s, ok := d.str(expr, name)
	if !ok {
		return def
	}
	n, err := ParseByteSize(s)
	switch {
	case err != nil:
		d.errorf(expr.Range(), "Invalid byte size", "The argument %q must be a byte size such as \"64MiB\", \"512KiB\" or \"1GiB\"; %q is not one: %v.", name, s, err)
	case n <= 0:
		d.errorf(expr.Range(), "Invalid byte size", "The argument %q must be greater than zero, not %q.", name, s)
	default:
		return n
	}
	return def
}

// FormatByteSize writes n in the largest unit of byteUnits that divides it: "64MiB",
// "1536KiB", "100B"; ParseByteSize reads it back.
func FormatByteSize(n int64) string {
	for _, u := range byteUnits {
		if n != 0 && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}
