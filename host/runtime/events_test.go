package runtime

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/statehost/statehost/internal/wordgen"
)

// eventRecorder collects the events of a Runtime (Options.OnEvent).
type eventRecorder struct {
	mu     sync.Mutex
	events []Event
}

func (r *eventRecorder) add(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *eventRecorder) all() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// TestEventsOfARun runs the word count (with an admin listener) until it processed some
// input, stops it, and checks its events: their order, from admin_listening and running to
// stopped, and their fields.
func TestEventsOfARun(t *testing.T) {
	for _, guarantee := range []string{"at_least_once", "exactly_once"} {
		t.Run(guarantee, func(t *testing.T) {
			src := strings.Replace(fmt.Sprintf(wordcountHCL, "pebble", true), `admin { listen = "" }`, `admin { listen = "127.0.0.1:0" }`, 1)
			if guarantee == "exactly_once" {
				src = strings.Replace(src, `commit_interval = "200ms"`, `processing_guarantee = "exactly_once"`, 1)
			}
			brokers := cluster(t)
			cfg := loadConfig(t, t.TempDir(), src)
			rec := &eventRecorder{}
			in := start(t, cfg, brokers, func(o *Options) { o.OnEvent = rec.add })
			cl, _ := client(t, brokers)
			lines, ref := wordgen.Sentences(500, 1)
			produce(t, cl, "sentences", lines...)
			waitCounts(t, brokers, "word-counts", wordgen.Strings(ref))
			if err := in.stop(t); err != nil {
				t.Fatalf("Run: %v", err)
			}
			checkRunEvents(t, rec.all(), guarantee == "exactly_once")
		})
	}
}

// checkRunEvents checks the events of a run of the word count that ran its 7 tasks once
// and was stopped.
func checkRunEvents(t *testing.T, events []Event, eos bool) {
	t.Helper()
	var kinds []EventKind
	for i, e := range events {
		kinds = append(kinds, e.Kind)
		if e.Time.IsZero() || (i > 0 && e.Time.Before(events[i-1].Time)) {
			t.Errorf("event %d (%s) at %v, after %v", i, e.Kind, e.Time, events[max(i-1, 0)].Time)
		}
	}
	// The order: the restores of the empty changelog end as they start; under exactly-once
	// the transactional producer comes first, and the consumer's leave revokes the partitions
	// of the closed tasks before the end.
	want := []EventKind{EventAdminListening}
	if eos {
		want = append(want, EventProducerReady)
	}
	want = append(want, EventRunning, EventPartitionsAssigned)
	for range 3 {
		want = append(want, EventRestoreStarted, EventRestoreDone)
	}
	for _, k := range []EventKind{EventTaskRunning, EventTaskClosed} {
		for range 7 {
			want = append(want, k)
		}
	}
	if eos {
		want = append(want, EventPartitionsRevoked)
	}
	want = append(want, EventStopped)
	if !slices.Equal(kinds, want) {
		t.Errorf("events %v\nwant %v", kinds, want)
	}

	at := map[string]int{} // "task_running count_1" -> its index
	tasks := map[string]bool{}
	for i, e := range events {
		switch e.Kind {
		case EventAdminListening:
			if !strings.HasPrefix(e.Addr, "127.0.0.1:") || strings.HasSuffix(e.Addr, ":0") {
				t.Errorf("admin_listening addr %q", e.Addr)
			}
		case EventProducerReady:
			if !strings.HasPrefix(e.TransactionalID, "wc-") {
				t.Errorf("producer_ready transactional id %q, want wc-<process id>", e.TransactionalID)
			}
		case EventPartitionsAssigned:
			want := map[string][]int32{"sentences": {0, 1, 2, 3}, "wc-words-repartition": {0, 1, 2}}
			for _, ps := range e.Partitions {
				slices.Sort(ps)
			}
			if !reflect.DeepEqual(e.Partitions, want) {
				t.Errorf("partitions_assigned %v, want %v", e.Partitions, want)
			}
		case EventRestoreStarted, EventRestoreDone, EventTaskRunning, EventTaskClosed:
			id := fmt.Sprintf("%s %s_%d", e.Kind, e.Processor, e.Partition)
			if _, dup := at[id]; dup {
				t.Errorf("two events %s", id)
			}
			at[id] = i
			tasks[fmt.Sprintf("%s_%d", e.Processor, e.Partition)] = true
			if (e.Kind == EventRestoreStarted || e.Kind == EventRestoreDone) &&
				(e.Processor != "count" || e.Store != "counts" || e.Topic != "wc-counts-changelog" || e.Standby) {
				t.Errorf("restore event %+v, want one of count/counts on wc-counts-changelog, not of a standby", e)
			}
			if e.Kind == EventRestoreStarted && (e.Offset != 0 || e.EndOffset != 0) {
				t.Errorf("restore of an empty changelog from %d to %d", e.Offset, e.EndOffset)
			}
		case EventStopped:
			if e.Error != "" {
				t.Errorf("stopped with error %q, want none", e.Error)
			}
		}
	}
	if want := []string{"count_0", "count_1", "count_2", "tokenize_0", "tokenize_1", "tokenize_2", "tokenize_3"}; !slices.Equal(slices.Sorted(maps.Keys(tasks)), want) {
		t.Errorf("tasks of the events %v, want %v", slices.Sorted(maps.Keys(tasks)), want)
	}
	for p := range 3 {
		started, ok1 := at[fmt.Sprintf("%s count_%d", EventRestoreStarted, p)]
		done, ok2 := at[fmt.Sprintf("%s count_%d", EventRestoreDone, p)]
		running, ok3 := at[fmt.Sprintf("%s count_%d", EventTaskRunning, p)]
		if !ok1 || !ok2 || !ok3 || started > done || done > running {
			t.Errorf("count_%d: restore_started at %d (%v), restore_done at %d (%v), task_running at %d (%v): want them in that order",
				p, started, ok1, done, ok2, running, ok3)
		}
	}
}

// TestEventJSON checks the JSON form of events: the fields a kind has, 0 included, and no
// other; and that it reads back as it was.
func TestEventJSON(t *testing.T) {
	at := time.Date(2026, 12, 3, 10, 15, 2, 123456789, time.UTC)
	for _, tc := range []struct {
		e    Event
		want string
	}{
		{Event{Time: at, Kind: EventRunning}, `{"time":"2026-12-03T10:15:02.123456789Z","kind":"running"}`},
		{Event{Time: at, Kind: EventTaskRunning, Processor: "count", Partition: 0},
			`{"time":"2026-12-03T10:15:02.123456789Z","kind":"task_running","processor":"count","partition":0}`},
		{Event{Time: at, Kind: EventRestoreStarted, Processor: "count", Store: "counts", Topic: "wc-counts-changelog", Partition: 2, Offset: 0, EndOffset: 17},
			`{"time":"2026-12-03T10:15:02.123456789Z","kind":"restore_started","processor":"count","store":"counts","topic":"wc-counts-changelog","partition":2,"offset":0,"end_offset":17}`},
		{Event{Time: at, Kind: EventRestoreDone, Processor: "count", Store: "counts", Topic: "wc-counts-changelog", Partition: 1, Records: 0, Standby: true},
			`{"time":"2026-12-03T10:15:02.123456789Z","kind":"restore_done","processor":"count","store":"counts","topic":"wc-counts-changelog","standby":true,"partition":1,"records":0}`},
		{Event{Time: at, Kind: EventPartitionsLost, Partitions: map[string][]int32{"in": {0, 3}}},
			`{"time":"2026-12-03T10:15:02.123456789Z","kind":"partitions_lost","partitions":{"in":[0,3]}}`},
		{Event{Time: at, Kind: EventTransactionAborted, Reason: "interval", Error: "fenced", ProducerReset: true},
			`{"time":"2026-12-03T10:15:02.123456789Z","kind":"transaction_aborted","reason":"interval","error":"fenced","producer_reset":true}`},
		{Event{Time: at, Kind: EventModuleDeployed, Processor: "count", ModuleHash: "ab12"},
			`{"time":"2026-12-03T10:15:02.123456789Z","kind":"module_deployed","processor":"count","module_hash":"ab12"}`},
	} {
		b, err := json.Marshal(tc.e)
		if err != nil || string(b) != tc.want {
			t.Errorf("json.Marshal(%+v) = %s, %v\nwant %s", tc.e, b, err, tc.want)
			continue
		}
		var back Event
		if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, tc.e) {
			t.Errorf("json.Unmarshal(%s) = %+v, %v; want %+v", b, back, err, tc.e)
		}
	}
}

// TestEventKindsDocumented checks that the README's reference of the events file names every
// EventKind constant of events.go.
func TestEventKindsDocumented(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "events.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "EventKind" {
				continue
			}
			for _, v := range vs.Values {
				kind := strings.Trim(v.(*ast.BasicLit).Value, `"`)
				n++
				if !strings.Contains(string(readme), "`"+kind+"`") {
					t.Errorf("the README does not name the event kind `%s`", kind)
				}
			}
		}
	}
	if n < 15 {
		t.Errorf("found %d EventKind constants in events.go, want at least 15", n)
	}
}
