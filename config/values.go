package config

import (
	"fmt"
	"math"
	"math/big"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// decoder turns the raw gohcl structs into a Config, collecting every diagnostic on the way.
// Its helpers never stop at a problem: they record it and return a zero value, so the caller
// carries on with the next attribute.
type decoder struct {
	diags hcl.Diagnostics
	dir   string // absolute directory of the config file
}

func (d *decoder) errorf(rng hcl.Range, summary, format string, args ...any) {
	d.diags = append(d.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   fmt.Sprintf(format, args...),
		Subject:  rng.Ptr(),
	})
}

func (d *decoder) warnf(rng hcl.Range, summary, format string, args ...any) {
	d.diags = append(d.diags, &hcl.Diagnostic{
		Severity: hcl.DiagWarning,
		Summary:  summary,
		Detail:   fmt.Sprintf(format, args...),
		Subject:  rng.Ptr(),
	})
}

// value evaluates expr without variables or functions. ok is false when it could not be
// evaluated (the problem is recorded) or when it is null, which is how gohcl represents an
// attribute that is absent (and how a user says "the default").
func (d *decoder) value(expr hcl.Expression) (v cty.Value, ok bool) {
	if expr == nil {
		return cty.NilVal, false
	}
	v, diags := expr.Value(nil)
	for _, diag := range diags {
		// hcl ends the range of a function call that misses its ")" at 0:0 (found by
		// FuzzParse): point at where the expression starts rather than print a garbled
		// snippet.
		for _, r := range []*hcl.Range{diag.Subject, diag.Context} {
			if r != nil && r.End.Byte < r.Start.Byte {
				r.End = r.Start
			}
		}
	}
	d.diags = append(d.diags, diags...)
	if diags.HasErrors() || v.IsNull() {
		return cty.NilVal, false
	}
	if !v.IsWhollyKnown() {
		// Without variables or functions, only an expression the parser could not read (and
		// already reported) is unknown.
		if !d.hasErrorOverlapping(expr.Range()) {
			d.errorf(expr.Range(), "Unknown value", "This value must be known when the configuration is loaded.")
		}
		return cty.NilVal, false
	}
	return v, true
}

// hasErrorOverlapping reports whether an error was already recorded on a range overlapping rng.
func (d *decoder) hasErrorOverlapping(rng hcl.Range) bool {
	for _, diag := range d.diags {
		if diag.Severity == hcl.DiagError && diag.Subject != nil && diag.Subject.Overlaps(rng) {
			return true
		}
	}
	return false
}

// absent reports whether expr is missing (or explicitly null) without recording anything.
func absent(expr hcl.Expression) bool {
	if expr == nil {
		return true
	}
	v, diags := expr.Value(nil)
	return !diags.HasErrors() && v.IsNull()
}

// required records a "Missing required argument" error when expr is absent; where is the
// range to point at (the enclosing block's header).
func (d *decoder) required(expr hcl.Expression, name string, where hcl.Range) bool {
	if !absent(expr) {
		return true
	}
	d.errorf(where, "Missing required argument", "The argument %q is required, but no definition was found.", name)
	return false
}

// str decodes a string attribute. present is false when it is absent or invalid.
func (d *decoder) str(expr hcl.Expression, name string) (s string, present bool) {
	v, ok := d.value(expr)
	if !ok {
		return "", false
	}
	if v.Type() != cty.String {
		d.errorf(expr.Range(), "Incorrect attribute value type", "The argument %q must be a string, not %s.", name, v.Type().FriendlyName())
		return "", false
	}
	return v.AsString(), true
}

// boolean decodes a bool attribute, returning def when it is absent or invalid.
func (d *decoder) boolean(expr hcl.Expression, name string, def bool) bool {
	v, ok := d.value(expr)
	if !ok {
		return def
	}
	if v.Type() != cty.Bool {
		d.errorf(expr.Range(), "Incorrect attribute value type", "The argument %q must be true or false, not %s.", name, v.Type().FriendlyName())
		return def
	}
	return v.True()
}

// partitions decodes a partition count: a whole number from 1 to 2^31-1.
func (d *decoder) partitions(expr hcl.Expression) int32 {
	v, ok := d.value(expr)
	if !ok {
		return 0
	}
	if v.Type() != cty.Number {
		d.errorf(expr.Range(), "Incorrect attribute value type", "The argument \"partitions\" must be a whole number, not %s.", v.Type().FriendlyName())
		return 0
	}
	bf := v.AsBigFloat()
	switch {
	case !bf.IsInt():
		d.errorf(expr.Range(), "Invalid partition count", "The partition count must be a whole number, not %s.", bf.Text('g', -1))
	case bf.Sign() < 1:
		d.errorf(expr.Range(), "Invalid partition count", "The partition count must be at least 1 (and at most %d), not %s.", math.MaxInt32, intText(bf))
	case bf.Cmp(big.NewFloat(math.MaxInt32)) > 0:
		d.errorf(expr.Range(), "Partition count too large", "The partition count %s is too large: a Kafka topic has at most %d partitions (the protocol counts them in 32 bits).", intText(bf), math.MaxInt32)
	default:
		n, _ := bf.Int64()
		return int32(n)
	}
	return 0
}

// wholeNumber decodes a whole number from 0 to most, returning def when it is absent or
// invalid.
func (d *decoder) wholeNumber(expr hcl.Expression, name string, most, def int64) int64 {
	v, ok := d.value(expr)
	if !ok {
		return def
	}
	if v.Type() != cty.Number {
		d.errorf(expr.Range(), "Incorrect attribute value type", "The argument %q must be a whole number, not %s.", name, v.Type().FriendlyName())
		return def
	}
	bf := v.AsBigFloat()
	n, acc := bf.Int64()
	switch {
	case !bf.IsInt():
		d.errorf(expr.Range(), "Invalid number", "The argument %q must be a whole number, not %s.", name, bf.Text('g', -1))
	case bf.Sign() < 0:
		d.errorf(expr.Range(), "Invalid number", "The argument %q must be zero or greater, not %s.", name, intText(bf))
	case acc != big.Exact || n > most:
		d.errorf(expr.Range(), "Invalid number", "The argument %q must be at most %d, not %s.", name, most, intText(bf))
	default:
		return n
	}
	return def
}

// intText formats a whole number: in full when it fits in an int64, in exponent form
// otherwise (a mistyped value can have hundreds of digits).
func intText(bf *big.Float) string {
	if n, acc := bf.Int64(); acc == big.Exact {
		return strconv.FormatInt(n, 10)
	}
	return bf.Text('g', -1)
}

// duration decodes a Go duration string (time.ParseDuration) that must be positive.
func (d *decoder) duration(expr hcl.Expression, name string, def time.Duration) time.Duration {
	dur, _, ok := d.durationValue(expr, name, false)
	if !ok {
		return def
	}
	return dur
}

// millisDuration is duration for a duration that must also be a whole number of
// milliseconds, as Kafka Streams' settings in *.ms are.
func (d *decoder) millisDuration(expr hcl.Expression, name string, def time.Duration) time.Duration {
	dur, text, ok := d.durationValue(expr, name, false)
	if !ok {
		return def
	}
	if dur%time.Millisecond != 0 {
		d.errorf(expr.Range(), "Invalid duration", "The argument %q must be a whole number of milliseconds, not %q.", name, text)
		return def
	}
	return dur
}

// durationValue decodes a Go duration string (time.ParseDuration) that must be positive, or
// at least zero when zero is set. ok is false when it is absent or invalid (the problem is
// recorded); text is the string as written, for messages.
func (d *decoder) durationValue(expr hcl.Expression, name string, zero bool) (dur time.Duration, text string, ok bool) {
	s, ok := d.str(expr, name)
	if !ok {
		return 0, "", false
	}
	dur, err := time.ParseDuration(s)
	if err != nil {
		d.errorf(expr.Range(), "Invalid duration", "The argument %q must be a duration such as \"500ms\", \"1s\" or \"2m30s\"; %q is not one (%v).", name, s, err)
		return 0, "", false
	}
	switch {
	case zero && dur < 0:
		d.errorf(expr.Range(), "Invalid duration", "The argument %q must be zero or greater, not %q.", name, s)
		return 0, "", false
	case !zero && dur <= 0:
		d.errorf(expr.Range(), "Invalid duration", "The argument %q must be greater than zero, not %q.", name, s)
		return 0, "", false
	}
	return dur, s, true
}

// addDurations returns a + b for non-negative durations, at most the largest time.Duration.
func addDurations(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// FormatDuration is time.Duration.String without the zero units it ends with: "1m" rather
// than "1m0s", "2h" rather than "2h0m0s". Diagnostics write durations so, as the file does.
func FormatDuration(dur time.Duration) string {
	s := dur.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// stringList decodes a static list of strings and the range of each element. present is
// false when the attribute is absent or is not a list at all.
func (d *decoder) stringList(expr hcl.Expression, name string) (vals []string, ranges []hcl.Range, present bool) {
	if absent(expr) {
		return nil, nil, false
	}
	elems, diags := hcl.ExprList(expr)
	if diags.HasErrors() {
		// An empty list literal has no element expressions, which ExprList reports as an error.
		if v, vdiags := expr.Value(nil); !vdiags.HasErrors() && !v.IsNull() && v.IsKnown() &&
			(v.Type().IsTupleType() || v.Type().IsListType()) && v.LengthInt() == 0 {
			return nil, nil, true
		}
		d.errorf(expr.Range(), "Incorrect attribute value type", "The argument %q must be a list of strings, such as [\"a\", \"b\"].", name)
		return nil, nil, false
	}
	for _, e := range elems {
		v, ok := d.value(e)
		if !ok {
			if absent(e) {
				d.errorf(e.Range(), "Invalid list element", "The elements of %q must be strings, not null.", name)
			}
			continue
		}
		if v.Type() != cty.String {
			d.errorf(e.Range(), "Invalid list element", "The elements of %q must be strings, not %s.", name, v.Type().FriendlyName())
			continue
		}
		vals = append(vals, v.AsString())
		ranges = append(ranges, e.Range())
	}
	return vals, ranges, true
}

// stringMap decodes a static map of string keys to string values (numbers and bools are
// turned into their string form). It returns nil when absent.
func (d *decoder) stringMap(expr hcl.Expression, name string) map[string]string {
	if absent(expr) {
		return nil
	}
	pairs, diags := hcl.ExprMap(expr)
	if diags.HasErrors() {
		d.errorf(expr.Range(), "Incorrect attribute value type", "The argument %q must be a map of strings, such as { \"retention.ms\" = \"-1\" }.", name)
		return nil
	}
	m := make(map[string]string, len(pairs))
	keyRanges := make(map[string]hcl.Range, len(pairs))
	for _, p := range pairs {
		kv, ok := d.value(p.Key)
		if !ok {
			continue
		}
		if kv.Type() != cty.String {
			d.errorf(p.Key.Range(), "Invalid map key", "The keys of %q must be strings.", name)
			continue
		}
		key := kv.AsString()
		if first, dup := keyRanges[key]; dup {
			d.errorf(p.Key.Range(), "Duplicate map key", "The key %q of %q was already set at %s.", key, name, where(first))
			continue
		}
		keyRanges[key] = p.Key.Range()
		vv, ok := d.value(p.Value)
		if !ok {
			if absent(p.Value) {
				d.errorf(p.Value.Range(), "Invalid map value", "The value of %q in %q must be a string, not null.", key, name)
			}
			continue
		}
		if !vv.Type().IsPrimitiveType() {
			d.errorf(p.Value.Range(), "Invalid map value", "The value of %q in %q must be a string, number or bool, not %s.", key, name, vv.Type().FriendlyName())
			continue
		}
		sv, err := convert.Convert(vv, cty.String)
		if err != nil {
			d.errorf(p.Value.Range(), "Invalid map value", "The value of %q in %q must be a string: %v.", key, name, err)
			continue
		}
		m[key] = sv.AsString()
	}
	return m
}

// hostPort checks a "host:port" address; example is shown in messages. emptyHost allows
// ":9092" (every interface); zeroPort allows port 0 (any free port).
func (d *decoder) hostPort(rng hcl.Range, name, addr, example string, emptyHost, zeroPort bool) bool {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		d.errorf(rng, "Invalid address", "The %s %q must be of the form \"host:port\", such as %q (%v).", name, addr, example, err)
		return false
	}
	if host == "" && !emptyHost {
		d.errorf(rng, "Invalid address", "The %s %q has no host; use the form \"host:port\", such as %q.", name, addr, example)
		return false
	}
	lowest := 1
	if zeroPort {
		lowest = 0
	}
	if p, err := strconv.Atoi(port); err != nil || p < lowest || p > 65535 {
		d.errorf(rng, "Invalid address", "The %s %q has port %q; a port is a number from %d to 65535.", name, addr, port, lowest)
		return false
	}
	return true
}

// where formats a range as file:line for a diagnostic's detail.
func where(r hcl.Range) string {
	return fmt.Sprintf("%s:%d", r.Filename, r.Start.Line)
}
