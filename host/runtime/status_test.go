package runtime

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestAdminStatusQueries checks the query parameters of GET /v1/status: a summary without the
// task list, pages that follow one another to the last, filters by state and processor, and
// a 400 for a bad parameter.
func TestAdminStatusQueries(t *testing.T) {
	brokers := cluster(t)
	cfg := loadConfig(t, t.TempDir(), strings.Replace(fmt.Sprintf(adminHCL, modules["count"]), "partitions = 2", "partitions = 5", 1))
	in := start(t, cfg, brokers, func(o *Options) { o.NoWatch = true })
	srv := httptest.NewServer(in.rt.Handler())
	t.Cleanup(srv.Close)
	waitFor(t, 30*time.Second, "the 5 tasks of count to run", func() bool {
		var st Status
		adminGet(t, srv, "/v1/status?state=running", &st)
		return st.Page != nil && st.Page.Total == 5
	})

	var st Status
	adminGet(t, srv, "/v1/status?summary=true", &st)
	if s := st.Summary; s == nil || len(st.Tasks) != 0 || st.Page != nil || s.Tasks != 5 || s.States["running"] != 5 ||
		s.States["restoring"] != 0 || s.Processors["count"]["running"] != 5 || s.Restores != 0 || s.ETASeconds != 0 {
		t.Fatalf("summary: %+v, tasks %v; want 5 running tasks of count, no restore, no task list", st.Summary, st.Tasks)
	}
	if st.ApplicationID != "deploy" || len(st.Processors) != 1 {
		t.Errorf("summary: application %q, processors %+v; want them as without a query", st.ApplicationID, st.Processors)
	}

	// Pages of 2: partitions 0-1, 2-3, 4.
	var got []int32
	after := ""
	for page := 0; ; page++ {
		var st Status
		path := "/v1/status?limit=2"
		if after != "" {
			path += "&after=" + url.QueryEscape(after)
		}
		adminGet(t, srv, path, &st)
		if st.Page == nil || st.Page.Total != 5 || len(st.Tasks) > 2 || st.Summary != nil {
			t.Fatalf("page %d: %+v, %d tasks; want 2 at most of 5", page, st.Page, len(st.Tasks))
		}
		for _, ts := range st.Tasks {
			got = append(got, ts.Partition)
		}
		if after = st.Page.Next; after == "" {
			break
		}
		if page > 3 {
			t.Fatalf("more than 3 pages of 2 for 5 tasks: next %q", after)
		}
	}
	if fmt.Sprint(got) != "[0 1 2 3 4]" {
		t.Fatalf("pages of 2 listed partitions %v, want [0 1 2 3 4]", got)
	}

	for _, q := range []string{"state=restoring", "processor=nope"} {
		var st Status
		adminGet(t, srv, "/v1/status?"+q, &st)
		if st.Page == nil || st.Page.Total != 0 || len(st.Tasks) != 0 || st.Tasks == nil {
			t.Errorf("%s: page %+v, tasks %v; want an empty list", q, st.Page, st.Tasks)
		}
	}
	for _, q := range []string{"limit=0", "limit=x", "after=count", "after=count/-1", "state=sleeping", "summary=maybe"} {
		resp, err := http.Get(srv.URL + "/v1/status?" + q)
		if err != nil {
			t.Fatal(err)
		}
		var e struct{ Error string }
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(e.Error, "bad status query") {
			t.Errorf("GET /v1/status?%s: %s %q, want 400 naming the bad query", q, resp.Status, e.Error)
		}
	}
}

// BenchmarkStatusSize reports the bytes of GET /v1/status at 4,096 tasks (2 processors of
// 2,048 partitions, one store each, its restore done), whole and with the query parameters.
//
//	go test ./host/runtime -run '^$' -bench StatusSize -benchtime 1x
func BenchmarkStatusSize(b *testing.B) {
	board := newStatusBoard()
	for _, proc := range []string{"count", "enrich"} {
		for p := range int32(2048) {
			id := taskID{Processor: proc, Partition: p}
			board.setState(id, "running")
			board.mu.Lock()
			*board.store(id, proc+"-store") = StoreStatus{Store: proc + "-store", StartOffset: 1000, EndOffset: 250000,
				Restored: 249000, Done: true, began: time.Now().Add(-time.Minute), position: 250000}
			board.mu.Unlock()
		}
	}
	whole := Status{ApplicationID: "scale", Tasks: board.snapshot()}
	for _, tc := range []struct{ name, query string }{
		{"whole", ""}, {"summary", "summary=true"}, {"page-100", "limit=100"}, {"restoring", "state=restoring"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			v, _ := url.ParseQuery(tc.query)
			q, err := parseStatusQuery(v)
			if err != nil {
				b.Fatal(err)
			}
			var n int
			for range b.N {
				rec := httptest.NewRecorder()
				st := whole
				st.Tasks = append([]TaskStatus(nil), whole.Tasks...)
				writeJSON(rec, http.StatusOK, narrowStatus(st, q))
				n = rec.Body.Len()
			}
			b.ReportMetric(float64(n), "bytes")
		})
	}
}
