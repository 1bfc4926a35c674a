package runtime

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/statehost/statehost/internal/windowtest"
	"github.com/statehost/statehost/internal/wordgen"
)

// TestParsePage: cursors round-trip and bad ones are refused; times are milliseconds or RFC
// 3339; a parameter of the other kind of store is refused.
func TestParsePage(t *testing.T) {
	for _, c := range []rangeCursor{{0, nil}, {2, []byte("a/b")}, {41, []byte{0, 0xff, '.', '-'}}} {
		got, err := parseCursor(c.String())
		if err != nil || got.partition != c.partition || string(got.pos) != string(c.pos) {
			t.Errorf("cursor %+v: %s parsed as %+v, %v", c, c.String(), got, err)
		}
	}
	for _, bad := range []string{"x", "1", "-1.YQ", "1.Y Q", "a.YQ", "99999999999.YQ"} {
		if _, err := parseCursor(bad); err == nil {
			t.Errorf("cursor %q parsed", bad)
		}
	}
	q, _ := url.ParseQuery("from_time=1700000000000&to_time=2023-11-14T22:13:21Z&prefix=ab")
	var rq rangeQuery
	if err := parsePage(q, &rq); err != nil || *rq.fromTime != 1700000000000 || *rq.toTime != 1700000001000 || string(rq.prefix) != "ab" {
		t.Errorf("parsePage(%v) = %+v, %v", q, rq, err)
	}
	q, _ = url.ParseQuery("to_time=yesterday")
	if err := parsePage(q, &rq); err == nil {
		t.Error("to_time=yesterday parsed")
	}
}

// getRange GETs a range or windowed key path and returns its entries and its next cursor; any
// answer but 200 fails the test.
func getRange(t *testing.T, in *instance, path string) ([]entry, string) {
	t.Helper()
	code, body, resp := query(t, http.DefaultClient, in, path)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, code, body)
	}
	return rangeLines(t, body), resp.Header.Get("X-Statehost-Next")
}

// pages reads path (with its query) page by page, limit entries each, and returns the
// entries of every page; a page is full unless it is the last.
func pages(t *testing.T, in *instance, path string, limit int) []entry {
	t.Helper()
	var all []entry
	after := ""
	for range 10000 {
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		p := path + sep + "limit=" + strconv.Itoa(limit)
		if after != "" {
			p += "&after=" + url.QueryEscape(after)
		}
		page, next := getRange(t, in, p)
		all = append(all, page...)
		if next == "" {
			return all
		}
		if len(page) != limit {
			t.Fatalf("GET %s: %d entries and a next page, want %d", p, len(page), limit)
		}
		after = next
	}
	t.Fatalf("GET %s: no last page", path)
	return nil
}

func entryStrings(es []entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = fmt.Sprintf("%d/%s=%s", e.Partition, *e.Key, *e.Value)
		if e.Start != nil {
			out[i] += fmt.Sprintf("[%d,%d]", *e.Start, *e.End)
		}
	}
	return out
}

// TestRangePagesAndPrefixes: a range read in pages of any size, each page continuing from the
// cursor of the previous one, gives the entries of one whole range in the same order, across
// partitions and within one; a prefix gives exactly the keys with it; the parameters of
// window stores are refused for key-value stores; GET /v1/stores lists the store.
func TestRangePagesAndPrefixes(t *testing.T) {
	brokers := cluster(t)
	in := start(t, loadConfig(t, t.TempDir(), withAdmin(fmt.Sprintf(wordcountHCL, "pebble", true))), brokers)
	cl, _ := client(t, brokers)
	lines, ref := wordgen.Sentences(300, 3)
	produce(t, cl, "sentences", lines...)
	waitCounts(t, brokers, "word-counts", wordgen.Strings(ref))
	waitFor(t, 30*time.Second, "every count committed", func() bool {
		all, next := getRange(t, in, "/v1/stores/counts/range?limit=100000")
		if next != "" || len(all) != len(ref) {
			return false
		}
		for _, e := range all {
			if *e.Value != strconv.Itoa(ref[*e.Key]) {
				return false
			}
		}
		return true
	})
	whole, _ := getRange(t, in, "/v1/stores/counts/range?limit=100000")
	for _, limit := range []int{1, 7, len(ref) - 1, len(ref)} {
		if got := pages(t, in, "/v1/stores/counts/range", limit); !slices.Equal(entryStrings(got), entryStrings(whole)) {
			t.Errorf("pages of %d: %d entries, want the %d of the whole range in its order", limit, len(got), len(whole))
		}
	}
	var part1 []string
	for _, e := range entryStrings(whole) {
		if strings.HasPrefix(e, "1/") {
			part1 = append(part1, e)
		}
	}
	if got := pages(t, in, "/v1/stores/counts/range?partition=1", 5); !slices.Equal(entryStrings(got), part1) {
		t.Errorf("partition 1 in pages of 5: %v, want %v", entryStrings(got), part1)
	}

	prefix := (*whole[len(whole)/2].Key)[:1]
	var want []string
	for w := range ref {
		if strings.HasPrefix(w, prefix) {
			want = append(want, w)
		}
	}
	got := pages(t, in, "/v1/stores/counts/range?prefix="+url.QueryEscape(prefix), 3)
	var keys []string
	for _, e := range got {
		keys = append(keys, *e.Key)
	}
	slices.Sort(keys)
	slices.Sort(want)
	if !slices.Equal(keys, want) {
		t.Errorf("prefix %q: %v, want %v", prefix, keys, want)
	}
	if got, _ := getRange(t, in, "/v1/stores/counts/range?prefix="+url.QueryEscape(prefix)+"&from="+url.QueryEscape(prefix+"~")); len(got) != 0 {
		t.Errorf("prefix %q from %q: %v, want none", prefix, prefix+"~", entryStrings(got))
	}

	for _, path := range []string{"/v1/stores/counts/range?from_time=0", "/v1/stores/counts/range?after=nope"} {
		if code, body, _ := query(t, http.DefaultClient, in, path); code != http.StatusBadRequest {
			t.Errorf("GET %s: %d %s, want 400", path, code, body)
		}
	}
	code, body, _ := query(t, http.DefaultClient, in, "/v1/stores")
	var stores []StoreInfo
	if err := json.Unmarshal([]byte(body), &stores); code != http.StatusOK || err != nil || len(stores) != 1 ||
		stores[0] != (StoreInfo{Name: "counts", Processor: "count", Type: "keyvalue", Backend: "pebble", Partitions: 3, Logged: true}) {
		t.Errorf("GET /v1/stores: %d %s (%v)", code, body, err)
	}
}

// TestWindowQueries: window and session stores answer their committed windows and sessions
// by key and time, from /keys/{key} and /range, in pages, with exact counts; key-value
// parameters are refused; GET /v1/stores gives their time specs, defaults filled in.
func TestWindowQueries(t *testing.T) {
	for _, backend := range []string{"pebble", "memory"} {
		t.Run(backend, func(t *testing.T) { testWindowQueries(t, backend) })
	}
}

func testWindowQueries(t *testing.T, backend string) {
	brokers := cluster(t)
	in := start(t, loadConfig(t, t.TempDir(), withAdmin(fmt.Sprintf(windowHCL, backend))), brokers)
	cl, _ := client(t, brokers)
	// Events within 3s of a window start: no window (10s every 5s, 2s grace) and no session
	// (5s gap, 1s grace) closes, so the stores hold them all. Each event lies in the windows
	// that start at base-5000 and at base.
	const base = int64(1_700_000_000_000)
	var evs []windowtest.Event
	n, first, last := map[string]int{}, map[string]int64{}, map[string]int64{}
	for i := range 40 {
		e := windowtest.Event{Key: string(rune('a' + i%4)), TS: base + int64(i)*70}
		if n[e.Key] == 0 {
			first[e.Key] = e.TS
		}
		n[e.Key]++
		last[e.Key] = e.TS
		evs = append(evs, e)
	}
	windowtest.Produce(t, cl, "clicks", evs)
	windowtest.Produce(t, cl, "events", evs)

	win := func(key string, start int64) string {
		return fmt.Sprintf("0/%s=%d[%d,%d]", key, n[key], start, start+10000)
	}
	waitFor(t, 60*time.Second, "the windows and sessions of a committed", func() bool {
		wcode, w, _ := query(t, http.DefaultClient, in, "/v1/stores/windows/keys/a")
		scode, s, _ := query(t, http.DefaultClient, in, "/v1/stores/sessions/keys/a")
		return wcode == http.StatusOK && scode == http.StatusOK && // not 503: restoring
			slices.Equal(entryStrings(rangeLines(t, w)), []string{win("a", base-5000), win("a", base)}) &&
			slices.Equal(entryStrings(rangeLines(t, s)), []string{fmt.Sprintf("0/a=%d[%d,%d]", n["a"], first["a"], last["a"])})
	})
	if got, _ := getRange(t, in, fmt.Sprintf("/v1/stores/windows/keys/b?from_time=%d", base-4999)); !slices.Equal(entryStrings(got), []string{win("b", base)}) {
		t.Errorf("the windows of b from %d: %v", base-4999, entryStrings(got))
	}
	rfc := time.UnixMilli(base - 5000).UTC().Format(time.RFC3339Nano)
	if got, _ := getRange(t, in, "/v1/stores/windows/keys/b?to_time="+url.QueryEscape(rfc)); !slices.Equal(entryStrings(got), []string{win("b", base-5000)}) {
		t.Errorf("the windows of b to %s: %v", rfc, entryStrings(got))
	}
	all := pages(t, in, "/v1/stores/windows/range", 3)
	if len(all) != 8 {
		t.Errorf("every window in pages of 3: %v, want 8", entryStrings(all))
	}
	for _, e := range all {
		if *e.Value != strconv.Itoa(n[*e.Key]) {
			t.Errorf("window %v: count %s, want %d", entryStrings([]entry{e}), *e.Value, n[*e.Key])
		}
	}
	// Sessions overlap [from_time, to_time]: c's ends at last[c].
	for _, tc := range []struct {
		query string
		want  int
	}{
		{fmt.Sprintf("from_time=%d", last["c"]), 1},
		{fmt.Sprintf("from_time=%d", last["c"]+1), 0},
		{fmt.Sprintf("to_time=%d", first["c"]), 1},
		{fmt.Sprintf("to_time=%d", first["c"]-1), 0},
	} {
		if got, _ := getRange(t, in, "/v1/stores/sessions/keys/c?"+tc.query); len(got) != tc.want {
			t.Errorf("the sessions of c with %s: %v, want %d", tc.query, entryStrings(got), tc.want)
		}
	}
	if got := pages(t, in, "/v1/stores/sessions/range", 1); len(got) != 4 {
		t.Errorf("every session in pages of 1: %v, want 4", entryStrings(got))
	}
	for _, path := range []string{"/v1/stores/windows/range?from=a", "/v1/stores/windows/range?prefix=a", "/v1/stores/sessions/keys/a?to=b", "/v1/stores/windows/keys/a?from_time=soon"} {
		if code, body, _ := query(t, http.DefaultClient, in, path); code != http.StatusBadRequest {
			t.Errorf("GET %s: %d %s, want 400", path, code, body)
		}
	}

	_, body, _ := query(t, http.DefaultClient, in, "/v1/stores")
	var stores []StoreInfo
	if err := json.Unmarshal([]byte(body), &stores); err != nil || len(stores) != 2 {
		t.Fatalf("GET /v1/stores: %s (%v)", body, err)
	}
	wantW := WindowInfo{Size: 10000, Advance: 5000, Grace: 2000, Retention: 24 * 3600 * 1000}
	wantS := WindowInfo{InactivityGap: 5000, Grace: 1000, Retention: 600000}
	if w, s := stores[0], stores[1]; w.Type != "window" || w.Window == nil || *w.Window != wantW ||
		s.Type != "session" || s.Window == nil || *s.Window != wantS || w.Backend != backend {
		t.Errorf("GET /v1/stores: %s, want windows %+v and sessions %+v", body, wantW, wantS)
	}
}
