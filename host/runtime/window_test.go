package runtime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/internal/topictest"
)

// windowHCL runs plugins/windowcount over a hopping window store (10s windows every 5s,
// 2s grace) and plugins/sessionize over a session store (5s gap, 1s grace), one partition
// each so that stream time is the same for the test's reference as for the task.
const windowHCL = `
application_id       = "win"
state_dir            = "state"
processing_guarantee = "exactly_once"
commit_interval      = "100ms"
admin { listen = "" }
topic "clicks" {
  partitions = 1
}
topic "events" {
  partitions = 1
}
processor "wc" {
  module  = "{{windowcount}}"
  inputs  = ["clicks"]
  outputs = ["window-counts"]
  store "windows" {
    type        = "window"
    backend     = "%[1]s"
    window_size = "10s"
    advance     = "5s"
    grace       = "2s"
    changelog_additional_retention = "1h"
    logging {
      topic_config = { "segment.ms" = "600000" }
    }
  }
}
processor "sess" {
  module  = "{{sessionize}}"
  inputs  = ["events"]
  outputs = ["sessions"]
  store "sessions" {
    type           = "session"
    backend        = "%[1]s"
    inactivity_gap = "5s"
    grace          = "1s"
    retention      = "10m" # the whole input may arrive in one batch: sessions must outlive it
  }
}
`

// event is an input record of the window tests: a key at a time (ms).
type event struct {
	key string
	ts  int64
}

// produceEvents writes the events in order, each with its timestamp.
func produceEvents(t testing.TB, cl *kgo.Client, topic string, evs []event) {
	t.Helper()
	recs := make([]*kgo.Record, len(evs))
	for i, e := range evs {
		recs[i] = &kgo.Record{Topic: topic, Key: []byte(e.key), Value: []byte("x"), Timestamp: time.UnixMilli(e.ts)}
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}

// windowRef computes what windowcount must emit for evs processed in order: per key and
// window start, the final count of each window closed at stream time at (window end +
// grace <= at), with late records (window end + grace <= stream time) dropped.
func windowRef(evs []event, size, advance, grace, at int64) map[string]string {
	counts := map[string]int{}
	streamTime := int64(-1)
	for _, e := range evs {
		streamTime = max(streamTime, e.ts)
		for s := e.ts - e.ts%advance; s > e.ts-size; s -= advance {
			if s+size+grace > streamTime {
				counts[fmt.Sprintf("%s@%d", e.key, s)]++
			}
		}
	}
	out := map[string]string{}
	for k, n := range counts {
		start, _ := strconv.ParseInt(k[strings.IndexByte(k, '@')+1:], 10, 64)
		if start+size+grace <= at {
			out[k] = fmt.Sprintf("%d,%d,%d", start, start+size, n)
		}
	}
	return out
}

// sessionRef computes what sessionize must emit: sessions merged within gap, late events
// (whose merged session ends before stream time - grace) dropped, and the sessions final
// at stream time at (end + gap + grace < at).
func sessionRef(evs []event, gap, grace, at int64) map[string]string {
	type session struct{ start, end, n int64 }
	byKey := map[string][]session{}
	streamTime := int64(-1)
	for _, e := range evs {
		streamTime = max(streamTime, e.ts)
		merged := session{e.ts, e.ts, 1}
		var keep []session
		for _, s := range byKey[e.key] {
			if s.end >= e.ts-gap && s.start <= e.ts+gap {
				merged = session{min(merged.start, s.start), max(merged.end, s.end), merged.n + s.n}
			} else {
				keep = append(keep, s)
			}
		}
		if merged.end+grace < streamTime {
			continue // late: nothing changes
		}
		byKey[e.key] = append(keep, merged)
	}
	out := map[string]string{}
	for k, ss := range byKey {
		for _, s := range ss {
			if s.end+gap+grace < at {
				out[fmt.Sprintf("%s@%d", k, s.start)] = fmt.Sprintf("%d,%d,%d", s.start, s.end, s.n)
			}
		}
	}
	return out
}

// windowOutputs reads an output topic of windowcount or sessionize (read_committed): each
// record's key@start -> value, failing on a window or session emitted twice or emitted before
// it was final at the record's timestamp (the punctuation's stream time).
func windowOutputs(t testing.TB, brokers []string, topic string, final func(start, end, at int64) bool) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, r := range topictest.Read(t, brokers, topic, true) {
		parts := strings.Split(string(r.Value), ",")
		if len(parts) != 3 {
			t.Fatalf("%s offset %d: value %q is not start,end,count", topic, r.Offset, r.Value)
		}
		start, _ := strconv.ParseInt(parts[0], 10, 64)
		end, _ := strconv.ParseInt(parts[1], 10, 64)
		k := fmt.Sprintf("%s@%d", r.Key, start)
		if prev, dup := out[k]; dup {
			t.Errorf("%s: %s emitted twice: %q, then %q at offset %d", topic, k, prev, r.Value, r.Offset)
		}
		if !final(start, end, r.Timestamp.UnixMilli()) {
			t.Errorf("%s: %s emitted at stream time %d before it was final", topic, r.Value, r.Timestamp.UnixMilli())
		}
		out[k] = string(r.Value)
	}
	return out
}

// windowEvents returns n events over keys a..e, 300ms apart from base with a pause of 12s
// (more than twice the gap: no event can bridge two sessions) every 60, and a late event
// every 7th: 3s late (in grace for some of its windows, after it for others) or 20s late
// (beyond grace and gap).
func windowEvents(base int64, n int) []event {
	keys := []string{"a", "b", "c", "d", "e"}
	evs := make([]event, 0, n)
	for i := range n {
		ts := base + int64(i)*300 + int64(i/60)*12000
		switch {
		case i%14 == 7:
			ts -= 3000
		case i%14 == 13:
			ts -= 20000
		}
		evs = append(evs, event{keys[(i*7)%len(keys)], ts})
	}
	return evs
}

// TestWindowAndSessionStores runs windowed counts and sessionization under exactly-once: the
// changelog topics are created with cleanup.policy=compact,delete and retention.ms =
// retention + changelog_additional_retention (topic_config on top); every closed window and
// final session is emitted exactly once, with the reference's count, never before it closed,
// and late records are dropped. Midway the application stops and its state directory is
// deleted: the window and session stores restore from their changelogs (stream time
// included), and nothing is emitted twice or lost across the restart.
func TestWindowAndSessionStores(t *testing.T) {
	for _, backend := range []string{"pebble", "memory"} {
		t.Run(backend, func(t *testing.T) {
			brokers := cluster(t)
			dir := t.TempDir()
			cfg := loadConfig(t, dir, fmt.Sprintf(windowHCL, backend))
			in := start(t, cfg, brokers)
			cl, adm := client(t, brokers)

			// The changelog topics' configs, read back from the broker.
			waitFor(t, 30*time.Second, "changelog topics", func() bool {
				td, err := adm.ListTopics(context.Background(), "win-windows-changelog", "win-sessions-changelog")
				return err == nil && len(td.TopicsSet()) == 2
			})
			rcs, err := adm.DescribeTopicConfigs(context.Background(), "win-windows-changelog", "win-sessions-changelog")
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]map[string]string{
				// the default retention, a day, + 1h
				"win-windows-changelog": {"cleanup.policy": "compact,delete", "retention.ms": "90000000", "segment.ms": "600000"},
				// retention 10m + the default 24h
				"win-sessions-changelog": {"cleanup.policy": "compact,delete", "retention.ms": "87000000"},
			}
			for _, rc := range rcs {
				if rc.Err != nil {
					t.Fatalf("describe %s: %v", rc.Name, rc.Err)
				}
				got := map[string]string{}
				for _, c := range rc.Configs {
					if c.Value != nil {
						got[c.Key] = *c.Value
					}
				}
				for k, v := range want[rc.Name] {
					if got[k] != v {
						t.Errorf("%s: %s = %q, want %q", rc.Name, k, got[k], v)
					}
				}
			}

			base := int64(1_700_000_000_000)
			evs := windowEvents(base, 400)
			// The first half ends with an event at 2.5s into a 5s hop: the window that started
			// 10s before that hop closed 0.5s earlier (start + 12s) and is emitted. The first
			// record after the restart is late for it, and is dropped only if the restore
			// brought back the stream time, not just the latest window start.
			hop := (evs[199].ts/5000 + 1) * 5000
			first := append(evs[:200:200], event{"e", hop + 2500})
			late := event{"a", hop - 10000 + 100}
			second := []event{late}
			for _, e := range evs[200:] { // after a pause: no event bridges two sessions
				second = append(second, event{e.key, e.ts + 20000})
			}
			evs = append(append([]event{}, first...), second...)
			// The last event closes every window and session of the others, so that the final
			// punctuation emits them all.
			last := evs[len(evs)-1].ts
			for _, e := range evs {
				last = max(last, e.ts)
			}
			second = append(second, event{"z", last + 30000})
			evs = append(evs[:len(evs):len(evs)], event{"z", last + 30000})
			produceEvents(t, cl, "clicks", first)
			produceEvents(t, cl, "events", first)
			windowFinal := func(start, end, at int64) bool { return end+2000 <= at }
			sessionFinal := func(start, end, at int64) bool { return end+5000+1000 < at }
			// The punctuation runs every second of stream time: by the end of the first half
			// it has run at a stream time within a second of the last.
			firstEnd := first[len(first)-1].ts - 1000
			wantW, wantS := windowRef(first, 10000, 5000, 2000, firstEnd), sessionRef(first, 5000, 1000, firstEnd)
			waitFor(t, 60*time.Second, "the first half's windows and sessions", func() bool {
				return len(topictest.Read(t, brokers, "window-counts", true)) >= len(wantW) &&
					len(topictest.Read(t, brokers, "sessions", true)) >= len(wantS)
			})
			if err := in.stop(t); err != nil {
				t.Fatalf("Run: %v", err)
			}

			// Delete the state: the next start restores both stores from their changelogs.
			if err := os.RemoveAll(filepath.Join(dir, "state", "win")); err != nil {
				t.Fatal(err)
			}
			in = start(t, cfg, brokers)
			produceEvents(t, cl, "clicks", second)
			produceEvents(t, cl, "events", second)
			end := last + 30000
			wantW, wantS = windowRef(evs, 10000, 5000, 2000, end), sessionRef(evs, 5000, 1000, end)
			waitFor(t, 60*time.Second, "all windows and sessions", func() bool {
				return len(topictest.Read(t, brokers, "window-counts", true)) >= len(wantW) &&
					len(topictest.Read(t, brokers, "sessions", true)) >= len(wantS)
			})
			time.Sleep(500 * time.Millisecond) // anything emitted twice would show up now
			if err := in.stop(t); err != nil {
				t.Fatalf("Run: %v", err)
			}
			checkOutputs(t, "window-counts", windowOutputs(t, brokers, "window-counts", windowFinal), wantW)
			checkOutputs(t, "sessions", windowOutputs(t, brokers, "sessions", sessionFinal), wantS)
			if r := in.events.restored(); r["windows"] == 0 || r["sessions"] == 0 {
				t.Errorf("restored %v after the state directory was deleted, want records of both stores", r)
			}
		})
	}
}

// checkOutputs compares emitted windows or sessions with the reference.
func checkOutputs(t testing.TB, topic string, got, want map[string]string) {
	t.Helper()
	var diffs []string
	for k, v := range want {
		if got[k] != v {
			diffs = append(diffs, fmt.Sprintf("%s: got %q, want %q", k, got[k], v))
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s: got %q, want nothing", k, v))
		}
	}
	sort.Strings(diffs)
	if len(diffs) > 0 {
		t.Errorf("%s: %d of %d differ from the reference, e.g. %s", topic, len(diffs), len(want), strings.Join(diffs[:min(5, len(diffs))], "; "))
	}
}
