package runtime

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/statehost/statehost/changelog"
	"github.com/statehost/statehost/store"
)

// The pages, prefixes and time bounds of interactive queries (iq.go), and the list of stores.
//
//	GET /v1/stores                                  the stores of the application ([]StoreInfo)
//	GET /v1/stores/{store}/range?prefix=            the keys that start with prefix
//	GET /v1/stores/{store}/range?after=CURSOR       the page after the one whose answer gave
//	                                                CURSOR in its X-Statehost-Next header
//	GET /v1/stores/{store}/keys/{key}?from_time=&to_time=   window and session stores: the
//	                                                key's windows or sessions, as JSON lines
//	GET /v1/stores/{store}/range?from_time=&to_time=        window and session stores: every
//	                                                key's, as JSON lines
//
// A range answer that stops at its limit with entries left has the header X-Statehost-Next:
// an opaque cursor (the partition and the position of its last entry), to pass as after= with
// the same other parameters for the next page. The last page has none.
//
// Window and session stores answer JSON lines with "start" and "end" (milliseconds since the
// epoch; a window's end is exclusive, a session's inclusive) beside the key and the value.
// from_time and to_time (milliseconds since the epoch, or RFC 3339; absent: unbounded) select
// the windows that start in [from_time, to_time] and the sessions that overlap it (end >=
// from_time, start <= to_time). Each partition's entries come in the store's order: by time
// segment, then key and time. Windows and sessions expired at the committed stream time are
// never answered. from, to and prefix are for key-value stores, from_time and to_time for
// window and session stores: the other kind answers 400.

// StoreInfo is one store in GET /v1/stores.
type StoreInfo struct {
	Name       string `json:"name"`
	Processor  string `json:"processor"`
	Type       string `json:"type"`    // "keyvalue", "window" or "session"
	Backend    string `json:"backend"` // "pebble" or "memory"
	Partitions int32  `json:"partitions"`
	Logged     bool   `json:"logged"` // it has a changelog
	// Window is the time spec of a window or session store, defaults filled in.
	Window *WindowInfo `json:"window,omitempty"`
}

// WindowInfo is the time spec of a window or session store, in milliseconds.
type WindowInfo struct {
	Size          int64 `json:"size_ms,omitempty"`           // window stores
	Advance       int64 `json:"advance_ms,omitempty"`        // window stores
	InactivityGap int64 `json:"inactivity_gap_ms,omitempty"` // session stores
	Grace         int64 `json:"grace_ms"`
	Retention     int64 `json:"retention_ms"`
}

// Stores returns the stores of the application, in the order of the configuration (and of
// the reloads that added processors), as the loop last published them (view.go).
func (r *Runtime) Stores() []StoreInfo {
	var out []StoreInfo
	for _, p := range r.view().procs {
		for _, s := range p.stores {
			info := StoreInfo{Name: s.Name, Processor: p.cfg.Name, Type: s.Kind.String(), Backend: s.Backend.String(),
				Partitions: p.partitions, Logged: !s.LoggingDisabled}
			if s.Windowed() {
				ws, _ := s.Window.Filled(s.Kind) // New checked it
				info.Window = &WindowInfo{Size: ws.Size, Advance: ws.Advance, InactivityGap: ws.Gap, Grace: ws.Grace, Retention: ws.Retention}
			}
			out = append(out, info)
		}
	}
	return out
}

// rangeCursor is where a page of a range ends: a partition, and the position of its last
// entry there (a key-value store's key, a window or session store's local key).
type rangeCursor struct {
	partition int32
	pos       []byte
}

// String encodes c as the value of X-Statehost-Next and after=: "<partition>.<position in
// unpadded base64url>".
func (c rangeCursor) String() string {
	return strconv.Itoa(int(c.partition)) + "." + base64.RawURLEncoding.EncodeToString(c.pos)
}

// parseCursor decodes a cursor that String encoded.
func parseCursor(s string) (*rangeCursor, error) {
	p, pos, ok := strings.Cut(s, ".")
	n, err := strconv.ParseInt(p, 10, 32)
	if !ok || err != nil || n < 0 {
		return nil, fmt.Errorf("after %q: not a cursor of X-Statehost-Next", s)
	}
	b, err := base64.RawURLEncoding.DecodeString(pos)
	if err != nil {
		return nil, fmt.Errorf("after %q: not a cursor of X-Statehost-Next: %w", s, err)
	}
	return &rangeCursor{partition: int32(n), pos: b}, nil
}

// from returns where a page reads partition part from: after the position pos (nil: from its
// start), or skip when the cursor is past the whole partition.
func (c *rangeCursor) from(part int32) (pos []byte, skip bool) {
	switch {
	case c == nil || part > c.partition:
		return nil, false
	case part < c.partition:
		return nil, true
	}
	return c.pos, false
}

// parsePage reads the parameters of a range beyond from, to and limit into rq: prefix, after,
// from_time and to_time, with the message of the 400 answer.
func parsePage(q url.Values, rq *rangeQuery) error {
	if s := q.Get("prefix"); s != "" {
		rq.prefix = []byte(s)
	}
	if s := q.Get("after"); s != "" {
		c, err := parseCursor(s)
		if err != nil {
			return err
		}
		rq.after = c
	}
	for _, t := range []struct {
		name string
		dst  **int64
	}{{"from_time", &rq.fromTime}, {"to_time", &rq.toTime}} {
		s := q.Get(t.name)
		if s == "" {
			continue
		}
		ms, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			ts, terr := time.Parse(time.RFC3339Nano, s)
			if terr != nil {
				return fmt.Errorf("%s %q: want milliseconds since the epoch or an RFC 3339 time", t.name, s)
			}
			ms = ts.UnixMilli()
		}
		*t.dst = &ms
	}
	return nil
}

// errWrongKind: a parameter of one kind of store was given to a store of another.
var errWrongKind = errors.New("runtime: a parameter of another kind of store")

// checkKind refuses the parameters of rq that the store's kind does not take.
func (rq *rangeQuery) checkKind(spec changelog.StoreSpec) error {
	switch {
	case spec.Windowed() && (rq.from != nil || rq.to != nil || rq.prefix != nil):
		return fmt.Errorf("%w: store %s is a %s store: from, to and prefix bound the keys of key-value stores; use from_time and to_time, and /keys/{key} for one key", errWrongKind, spec.Name, spec.Kind)
	case !spec.Windowed() && (rq.fromTime != nil || rq.toTime != nil):
		return fmt.Errorf("%w: store %s is a key-value store: from_time and to_time are for window and session stores", errWrongKind, spec.Name)
	}
	return nil
}

// windowQuery is the store.WindowQuery of rq, after the position after.
func (rq *rangeQuery) windowQuery(after []byte) store.WindowQuery {
	wq := store.WindowQuery{Key: rq.key, From: math.MinInt64, To: math.MaxInt64, After: after}
	if rq.fromTime != nil {
		wq.From = *rq.fromTime
	}
	if rq.toTime != nil {
		wq.To = *rq.toTime
	}
	return wq
}

// page calls fn with the entries of partition part that rq asks for after the position after
// (nil: from the first), each with its position, in order, until fn returns false.
func (read copyReader) page(spec changelog.StoreSpec, part int32, rq *rangeQuery, after []byte, fn func(e entry, pos []byte) bool) error {
	if spec.Windowed() {
		return read.windows(rq.windowQuery(after), func(we store.WindowEntry) bool {
			e := rangeEntry(part, we.Key, we.Value)
			e.Start, e.End = &we.Start, &we.End
			return fn(e, we.Position)
		})
	}
	from := rq.from
	if bytes.Compare(rq.prefix, from) > 0 {
		from = rq.prefix
	}
	if after != nil && bytes.Compare(after, from) >= 0 {
		from = append(bytes.Clone(after), 0) // the first key after it
	}
	if rq.to != nil && bytes.Compare(from, rq.to) > 0 {
		return nil
	}
	return read.scan(from, rq.to, func(k, v []byte) bool {
		if !bytes.HasPrefix(k, rq.prefix) {
			return false // past the keys with the prefix: they are all together, from it on
		}
		return fn(rangeEntry(part, k, v), k)
	})
}

// getKeyWindows answers GET /v1/stores/{store}/keys/{key} for a window or session store: the
// windows or sessions of key in partition part, as a range answers them.
func (qs *queries) getKeyWindows(w http.ResponseWriter, req *http.Request, p *procView, spec changelog.StoreSpec, key []byte, part int32) {
	q := req.URL.Query()
	if q.Get("from") != "" || q.Get("to") != "" || q.Get("prefix") != "" {
		writeError(w, http.StatusBadRequest, fmt.Errorf("%w: from, to and prefix: a key's windows or sessions are bounded by from_time and to_time", errWrongKind))
		return
	}
	rq, err := parseRange(q)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	rq.key = key
	qs.answerRange(w, req, p, spec, []int32{part}, rq)
}
