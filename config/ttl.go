package config

import (
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// The TTL clocks, the values of Store.TTLClock.
const (
	// TTLStreamTime counts a store's TTL in stream time (the largest record timestamp the
	// task has seen), the default.
	TTLStreamTime = "stream_time"
	// TTLWallClock counts a store's TTL in the wall clock's time.
	TTLWallClock = "wall_clock"
)

// decodeStoreTTL decodes the ttl and ttl_clock attributes into s, whose Type is decoded
// (typeKnown is false when the type attribute was invalid). Both apply to key-value stores
// only; ttl is a positive whole number of milliseconds, written as a Go duration or with days
// ("7d", "1d12h"); ttl_clock without ttl has no effect (a warning).
func (d *decoder) decodeStoreTTL(rs rawStore, s *Store, typeKnown bool) {
	applies := func(expr hcl.Expression, name string) bool {
		if absent(expr) {
			return false
		}
		if typeKnown && s.Type != StoreKeyValue {
			d.errorf(expr.Range(), "Attribute not applicable", "The attribute %q applies only to keyvalue stores; store %q is a %s store: its retention expires its windows or sessions.", name, s.Name, s.Type)
			return false
		}
		return true
	}
	if applies(rs.TTL, "ttl") {
		if text, ok := d.str(rs.TTL, "ttl"); ok {
			dur, err := parseTTL(text)
			switch {
			case err != nil:
				d.errorf(rs.TTL.Range(), "Invalid duration", "The argument \"ttl\" must be a duration such as \"7d\", \"12h\" or \"1d12h\" (whole days with d, then Go's units h, m, s, ms); %q is not one (%v).", text, err)
			case dur <= 0:
				d.errorf(rs.TTL.Range(), "Invalid duration", "The argument \"ttl\" must be greater than zero, not %q.", text)
			case dur%time.Millisecond != 0:
				d.errorf(rs.TTL.Range(), "Invalid duration", "The ttl %q is not a whole number of milliseconds: entries' write times are in milliseconds, as record timestamps are.", text)
			default:
				s.TTL, s.TTLClock = dur, TTLStreamTime
			}
		}
	}
	if !applies(rs.TTLClock, "ttl_clock") {
		return
	}
	clock, ok := d.str(rs.TTLClock, "ttl_clock")
	switch {
	case !ok:
	case clock != TTLStreamTime && clock != TTLWallClock:
		d.errorf(rs.TTLClock.Range(), "Invalid TTL clock", "The ttl_clock %q is not one of the valid values: %q (the default) or %q.", clock, TTLStreamTime, TTLWallClock)
	case absent(rs.TTL):
		d.warnf(rs.TTLClock.Range(), "TTL clock not used", "The ttl_clock of store %q has no effect because the store has no ttl: its entries never expire.", s.Name)
	case s.TTL > 0:
		s.TTLClock = clock
	}
}

// maxTTLDays is the most days a ttl may say: what a time.Duration holds.
const maxTTLDays = int64(1<<63-1) / int64(24*time.Hour)

// parseTTL parses a ttl: a Go duration, possibly after a whole number of days ("7d", "1d12h").
func parseTTL(s string) (time.Duration, error) {
	var days time.Duration
	if i := strings.IndexByte(s, 'd'); i > 0 {
		if n, err := strconv.ParseInt(s[:i], 10, 64); err == nil && n >= 0 && n <= maxTTLDays {
			days, s = time.Duration(n)*24*time.Hour, s[i+1:]
			if s == "" {
				return days, nil
			}
		}
	}
	dur, err := time.ParseDuration(s)
	if err != nil {
		return 0, err
	}
	if dur > 0 && days > 1<<63-1-dur {
		return 0, strconv.ErrRange
	}
	return days + dur, nil
}
