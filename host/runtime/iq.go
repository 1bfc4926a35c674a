package runtime

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/statehost/statehost/changelog"
	"github.com/statehost/statehost/store"
)

// Interactive queries: the stores of an application answer reads on the admin listener of any
// instance.
//
//	GET /v1/stores/{store}/keys/{key}             the value of key (raw bytes), 404 when absent
//	GET /v1/stores/{store}/range?from=&to=&limit= the entries in [from, to] as JSON lines
//
// Prefixes, pages (a cursor), window and session stores and the list of stores are in
// iq_page.go.
//
// A key is looked for in the partition that Kafka's default partitioner (murmur2, as franz-go
// and the Java client use) gives it among the partitions of the store's input topics: the
// partition of the task that writes it, when the inputs are keyed by it. ?partition=N looks
// in partition N instead: a store keyed otherwise than its input records (say
// "<account>/<seq>", written by the task of "<account>") holds a key in the partition of the
// task that wrote it, which the key's own hash does not tell. The instance that runs that
// task answers from the store's committed state (as of the task's last commit: a read never
// sees the writes of a batch in progress). Another instance answers 307 to the admin address
// of the instance that runs the task (instances publish it in the group metadata, and each
// assignment tells every member who runs what); 503 with Retry-After while the task restores
// or moves, unless ?stale=true allows a read from a copy that is restoring or a standby. A
// redirected request that finds the task elsewhere again answers 503 rather than bouncing.
//
// A range reads the partitions that this instance runs (with ?stale=true, also those it
// restores or keeps standby copies of), in ascending partition order and each partition's
// keys in ascending byte order, from and to included (empty or absent: from the first key, to
// the last), limit entries in all (default defaultRangeLimit, at most maxRangeLimit): the
// lowest partitions fill an answer first. ?partition=N reads one partition, wherever it runs
// (307 as for a key). A limited answer with more entries left gives the cursor of the next
// page (iq_page.go). The header X-Statehost-Partitions lists the partitions read. Each line is
// {"partition":N,"key":"...","value":"..."}; bytes that are not UTF-8 come as key_base64 or
// value_base64 instead.
//
// A memory store is read while the loop is between batches (a memory standby's copy cannot be
// read).

// defaultRangeLimit and maxRangeLimit bound the entries of one range answer.
const (
	defaultRangeLimit = 1000
	maxRangeLimit     = 100000
)

// queries answers the interactive queries of a Runtime.
type queries struct {
	rt     *Runtime
	owners owners // who runs what
}

// owners is who runs what, from the latest assignment: admin address -> its partitions.
type owners struct {
	mu    sync.Mutex
	hosts map[string]map[string][]int32
}

func (o *owners) set(hosts map[string]map[string][]int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.hosts = hosts
}

// of returns the admin address of the instance that runs partition part of topic.
func (o *owners) of(topic string, part int32) (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for addr, tps := range o.hosts {
		if slices.Contains(tps[topic], part) {
			return addr, true
		}
	}
	return "", false
}

// state returns the state of a task on the status board: "running", "restoring", "standby",
// or "" when this instance does not hold it.
func (b *statusBoard) state(id taskID) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ts := b.tasks[id]; ts != nil {
		return ts.State
	}
	return ""
}

// queryError is an answer other than 200.
type queryError struct {
	code       int
	err        error
	location   string // 307
	retryAfter int    // seconds, 503
}

func (e *queryError) Error() string { return e.err.Error() }

func (e *queryError) write(w http.ResponseWriter) {
	if e.location != "" {
		w.Header().Set("Location", e.location)
	}
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.retryAfter))
	}
	writeError(w, e.code, e.err)
}

// queryStore resolves a store name to its processor and spec, in the processors as the loop
// last published them (view.go): the request reads that one view to its end.
func (qs *queries) queryStore(name string) (*procView, changelog.StoreSpec, *queryError) {
	if p, s, ok := qs.rt.view().store(name); ok {
		return p, s, nil
	}
	return nil, changelog.StoreSpec{}, &queryError{code: http.StatusNotFound, err: fmt.Errorf("no store %s in application %s", name, qs.rt.cfg.ApplicationID)}
}

// locate decides who answers for partition part of a store's processor: nil when this
// instance reads its copy, else the redirect or the 503.
func (qs *queries) locate(req *http.Request, p *procView, part int32, stale bool) *queryError {
	id := taskID{Processor: p.cfg.Name, Partition: part}
	switch state := qs.rt.status.state(id); {
	case state == "running", state == "waiting", stale && (state == "restoring" || state == "standby"):
		// A waiting task's stores are restored, and nothing writes them (waitForModule).
		return nil
	case state == "restoring":
		return &queryError{code: http.StatusServiceUnavailable, retryAfter: 1,
			err: fmt.Errorf("task %s is restoring its stores here (add stale=true to read what it has restored)", id)}
	}
	addr, ok := qs.owners.of(p.unitTopic, part)
	q := req.URL.Query()
	if !ok || addr == qs.rt.local.adminAddr() || q.Get("redirected") != "" {
		return &queryError{code: http.StatusServiceUnavailable, retryAfter: 1,
			err: fmt.Errorf("no instance runs task %s now (it is moving in a rebalance); retry", id)}
	}
	q.Set("redirected", "1")
	// The path as it came, escapes included: a key may hold '?', '#', '%' or '/'.
	loc := url.URL{Scheme: "http", Host: addr, Path: req.URL.Path, RawPath: req.URL.RawPath, RawQuery: q.Encode()}
	return &queryError{code: http.StatusTemporaryRedirect, location: loc.String(),
		err: fmt.Errorf("task %s runs on %s", id, addr)}
}

// getKey is GET /v1/stores/{store}/keys/{key}.
func (qs *queries) getKey(w http.ResponseWriter, req *http.Request) {
	p, spec, qerr := qs.queryStore(req.PathValue("store"))
	if qerr != nil {
		qerr.write(w)
		return
	}
	key := []byte(req.PathValue("key"))
	q := req.URL.Query()
	part, hashed := KeyPartition(key, p.partitions, 0), true
	if s := q.Get("partition"); s != "" {
		n, qerr := parsePartition(p, s)
		if qerr != nil {
			qerr.write(w)
			return
		}
		part, hashed = n, false
	}
	if qerr := qs.locate(req, p, part, q.Get("stale") == "true"); qerr != nil {
		qerr.write(w)
		return
	}
	if spec.Windowed() {
		qs.getKeyWindows(w, req, p, spec, key, part)
		return
	}
	var (
		value []byte
		found bool
	)
	err := qs.readCopy(req.Context(), p, spec, part, func(read copyReader) error {
		var err error
		value, found, err = read.get(key)
		return err
	})
	if err != nil {
		queryFailed(w, err)
		return
	}
	w.Header().Set("X-Statehost-Partition", strconv.Itoa(int(part)))
	if !found {
		err := fmt.Errorf("no key %q in store %s (partition %d)", key, spec.Name, part)
		if hashed && p.partitions > 1 {
			err = fmt.Errorf("%w: the partition of the key's own hash; a store keyed otherwise than its input records needs ?partition=N, the partition of the task that writes the key", err)
		}
		writeError(w, http.StatusNotFound, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(value)
}

// getRange is GET /v1/stores/{store}/range.
func (qs *queries) getRange(w http.ResponseWriter, req *http.Request) {
	p, spec, qerr := qs.queryStore(req.PathValue("store"))
	if qerr != nil {
		qerr.write(w)
		return
	}
	q := req.URL.Query()
	stale := q.Get("stale") == "true"
	rq, err := parseRange(q)
	if err == nil {
		err = rq.checkKind(spec)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	parts, qerr := qs.rangePartitions(req, p, q.Get("partition"), stale)
	if qerr != nil {
		qerr.write(w)
		return
	}
	qs.answerRange(w, req, p, spec, parts, rq)
}

// answerRange reads rq from parts of the store and writes the answer.
func (qs *queries) answerRange(w http.ResponseWriter, req *http.Request, p *procView, spec changelog.StoreSpec, parts []int32, rq rangeQuery) {
	entries, next, err := qs.readRange(req.Context(), p, spec, parts, rq)
	if err != nil && len(entries) == 0 {
		queryFailed(w, err)
		return
	}
	writeRange(w, parts, entries, next, err)
}

// rangeQuery is what a range reads in each partition: the keys in [from, to] (nil: from the
// first key, to the last) that start with prefix, after the cursor after (nil: from the
// start), limit entries in all; of a window or session store, the windows or sessions of key
// (nil: of every key) within fromTime and toTime (nil: unbounded).
type rangeQuery struct {
	from, to []byte
	limit    int

	prefix           []byte
	after            *rangeCursor
	key              []byte
	fromTime, toTime *int64
}

// parseRange reads the parameters of a range. It fails on a limit that is not a number from 1
// to maxRangeLimit, or a bad parameter of parsePage, with the message of the 400 answer.
func parseRange(q url.Values) (rangeQuery, error) {
	rq := rangeQuery{limit: defaultRangeLimit}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxRangeLimit {
			return rangeQuery{}, fmt.Errorf("limit %q: want a number from 1 to %d", s, maxRangeLimit)
		}
		rq.limit = n
	}
	if s := q.Get("from"); s != "" { // empty: from the first key
		rq.from = []byte(s)
	}
	if s := q.Get("to"); s != "" { // empty: to the last key
		rq.to = []byte(s)
	}
	err := parsePage(q, &rq)
	return rq, err
}

// rangePartitions returns the partitions of p that a range reads here: partition (the
// parameter) alone, or the 400 when it is not one of p's, or the redirect or the 503 when this
// instance does not read it (locate); without it, every partition this instance reads (with
// stale, also those it restores or keeps standby copies of).
func (qs *queries) rangePartitions(req *http.Request, p *procView, partition string, stale bool) ([]int32, *queryError) {
	if partition != "" {
		n, qerr := parsePartition(p, partition)
		if qerr != nil {
			return nil, qerr
		}
		if qerr := qs.locate(req, p, n, stale); qerr != nil {
			return nil, qerr
		}
		return []int32{n}, nil
	}
	var parts []int32
	for part := range p.partitions {
		if qs.locate(req, p, part, stale) == nil {
			parts = append(parts, part)
		}
	}
	return parts, nil
}

// parsePartition reads the partition parameter of a query of p's store: a number from 0 to
// p's partition count - 1, else the 400.
func parsePartition(p *procView, s string) (int32, *queryError) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n >= int(p.partitions) {
		return 0, &queryError{code: http.StatusBadRequest, err: fmt.Errorf("partition %q: want a number from 0 to %d", s, p.partitions-1)}
	}
	return int32(n), nil
}

// readRange reads rq from this instance's copies of parts of the store, in partition then key
// order, up to rq.limit entries, and the cursor of the next page when entries are left (""
// when none). The entries are gathered first and written after: a slow client never holds a
// store read (nor, for a memory store, the loop). A read that fails stops it: before any
// entry, readRange returns its error alone; after some, it logs it and returns it, with its
// partition, along with the entries, for a short answer.
func (qs *queries) readRange(ctx context.Context, p *procView, spec changelog.StoreSpec, parts []int32, rq rangeQuery) ([]entry, string, error) {
	var (
		entries []entry
		last    rangeCursor // of the last entry
		full    bool        // an entry beyond the limit was found
	)
	for _, part := range parts {
		after, skip := rq.after.from(part)
		if skip {
			continue
		}
		err := qs.readCopy(ctx, p, spec, part, func(read copyReader) error {
			return read.page(spec, part, &rq, after, func(e entry, pos []byte) bool {
				if full = len(entries) == rq.limit; full {
					return false
				}
				entries = append(entries, e)
				last = rangeCursor{partition: part, pos: append(last.pos[:0], pos...)}
				return true
			})
		})
		if err != nil {
			if len(entries) == 0 {
				return nil, "", err
			}
			qs.rt.log.Warn("interactive query failed", "store", spec.Name, "partition", part, "error", err)
			return entries, "", fmt.Errorf("partition %d: %w", part, err)
		}
		if full {
			return entries, last.String(), nil
		}
	}
	return entries, "", nil
}

// writeRange writes the answer of a range that read parts: the entries as JSON lines, and,
// when failure cut the answer short, a last line that says why; next is the cursor of the
// next page ("" for the last).
func writeRange(w http.ResponseWriter, parts []int32, entries []entry, next string, failure error) {
	names := make([]string, len(parts))
	for i, part := range parts {
		names[i] = strconv.Itoa(int(part))
	}
	w.Header().Set("X-Statehost-Partitions", strings.Join(names, ","))
	if next != "" {
		w.Header().Set("X-Statehost-Next", next)
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	for _, e := range entries {
		_ = enc.Encode(e)
	}
	if failure != nil { // the answer is short: its last line says why
		_ = enc.Encode(struct {
			Error string `json:"error"`
		}{failure.Error()})
	}
}

// entry is a line of a range answer.
type entry struct {
	Partition   int32   `json:"partition"`
	Key         *string `json:"key,omitempty"`
	KeyBase64   *string `json:"key_base64,omitempty"`
	Value       *string `json:"value,omitempty"`
	ValueBase64 *string `json:"value_base64,omitempty"`
	// Start and End are a window's start and (exclusive) end, or a session's start and
	// (inclusive) end, in milliseconds since the epoch: window and session stores only.
	Start *int64 `json:"start,omitempty"`
	End   *int64 `json:"end,omitempty"`
}

func rangeEntry(part int32, k, v []byte) entry {
	e := entry{Partition: part}
	text := func(b []byte) (*string, *string) {
		s := string(b)
		if utf8.Valid(b) {
			return &s, nil
		}
		s = base64.StdEncoding.EncodeToString(b)
		return nil, &s
	}
	e.Key, e.KeyBase64 = text(k)
	e.Value, e.ValueBase64 = text(v)
	return e
}

// copyReader reads this instance's copy of a store partition: get and scan a key-value
// store's, windows a window or session store's.
type copyReader struct {
	get     func(key []byte) ([]byte, bool, error)
	scan    func(from, to []byte, fn func(k, v []byte) bool) error
	windows func(q store.WindowQuery, fn func(store.WindowEntry) bool) error
}

// errCopyBusy: a memory store's copy cannot be read now.
var errCopyBusy = errors.New("the store's copy here cannot be read now")

// readCopy runs fn with a reader of this instance's copy of the store's partition part: a
// Pebble store's committed state straight from the database; a memory store's with the loop
// held between batches (at most memoryReadWait).
func (qs *queries) readCopy(ctx context.Context, p *procView, spec changelog.StoreSpec, part int32, fn func(copyReader) error) error {
	id := taskID{Processor: p.cfg.Name, Partition: part}
	if spec.Backend == store.Pebble {
		return fn(copyReader{
			get: func(key []byte) ([]byte, bool, error) { return qs.rt.stores.ReadCommitted(id, spec.Name, key) },
			scan: func(from, to []byte, f func(k, v []byte) bool) error {
				return qs.rt.stores.ScanCommitted(id, spec.Name, from, to, f)
			},
			windows: func(q store.WindowQuery, f func(store.WindowEntry) bool) error {
				return qs.rt.stores.ScanWindowsCommitted(id, spec.Name, spec.Kind, spec.Window, q, f)
			},
		})
	}
	if !qs.lockFor(ctx, memoryReadWait) {
		return fmt.Errorf("%w: the loop has been busy (a restore?) for %v", errCopyBusy, memoryReadWait)
	}
	defer qs.rt.tasks.mu.Unlock()
	t := qs.rt.tasks.active[id]
	if t == nil || t.cl == nil {
		return fmt.Errorf("%w: task %s has no open memory store here (a standby's copy is being applied)", errCopyBusy, id)
	}
	if t.busy() {
		return fmt.Errorf("%w: task %s is running its plugin", errCopyBusy, id)
	}
	sp := t.cl.StoreTask().Partition(spec.Name)
	return fn(copyReader{get: sp.ReadCommittedMemory, scan: sp.ScanCommittedMemory, windows: sp.ScanWindowsCommittedMemory})
}

// memoryReadWait bounds how long a query of a memory store waits for the loop.
const memoryReadWait = 2 * time.Second

// lockFor takes the table's lock, waiting at most d.
func (qs *queries) lockFor(ctx context.Context, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for !qs.rt.tasks.mu.TryLock() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// queryFailed answers a read that failed: 503 for a busy copy, 500 otherwise.
func queryFailed(w http.ResponseWriter, err error) {
	if errors.Is(err, errCopyBusy) {
		(&queryError{code: http.StatusServiceUnavailable, retryAfter: 1, err: err}).write(w)
		return
	}
	writeError(w, http.StatusInternalServerError, err)
}

// advertised is the admin address other instances reach this one at: addr, with the host name
// of the machine when the listener listens on every address.
func advertised(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
		return addr
	}
	if name, err := os.Hostname(); err == nil && name != "" {
		return net.JoinHostPort(name, port)
	}
	return addr
}

// snapshot returns the latest assignment's hosts.
func (o *owners) snapshot() map[string]map[string][]int32 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.hosts
}
