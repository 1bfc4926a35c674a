package runtime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/statehost/statehost/internal/topictest"
	"github.com/statehost/statehost/internal/windowtest"
	"github.com/statehost/statehost/store"
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

// windowEvents returns n events over keys a..e, 300ms apart from base with a pause of 12s
// (more than twice the gap: no event can bridge two sessions) every 60, and a late event
// every 7th: 3s late (in grace for some of its windows, after it for others) or 20s late
// (beyond grace and gap).
func windowEvents(base int64, n int) []windowtest.Event {
	keys := []string{"a", "b", "c", "d", "e"}
	evs := make([]windowtest.Event, 0, n)
	for i := range n {
		ts := base + int64(i)*300 + int64(i/60)*12000
		switch {
		case i%14 == 7:
			ts -= 3000
		case i%14 == 13:
			ts -= 20000
		}
		evs = append(evs, windowtest.Event{Key: keys[(i*7)%len(keys)], TS: ts})
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
			hop := (evs[199].TS/5000 + 1) * 5000
			first := append(evs[:200:200], windowtest.Event{Key: "e", TS: hop + 2500})
			late := windowtest.Event{Key: "a", TS: hop - 10000 + 100}
			second := []windowtest.Event{late}
			for _, e := range evs[200:] { // after a pause: no event bridges two sessions
				second = append(second, windowtest.Event{Key: e.Key, TS: e.TS + 20000})
			}
			evs = append(append([]windowtest.Event{}, first...), second...)
			// The last event closes every window and session of the others, so that the final
			// punctuation emits them all.
			last := evs[len(evs)-1].TS
			for _, e := range evs {
				last = max(last, e.TS)
			}
			second = append(second, windowtest.Event{Key: "z", TS: last + 30000})
			evs = append(evs[:len(evs):len(evs)], windowtest.Event{Key: "z", TS: last + 30000})
			windowtest.Produce(t, cl, "clicks", first)
			windowtest.Produce(t, cl, "events", first)
			windowFinal := func(start, end, at int64) bool { return end+2000 <= at }
			sessionFinal := func(start, end, at int64) bool { return end+5000+1000 < at }
			// The punctuation runs every second of stream time: by the end of the first half
			// it has run at a stream time within a second of the last.
			firstEnd := first[len(first)-1].TS - 1000
			wantW, wantS := windowtest.WindowRef(first, 10000, 5000, 2000, firstEnd), windowtest.SessionRef(first, 5000, 1000, firstEnd)
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
			windowtest.Produce(t, cl, "clicks", second)
			windowtest.Produce(t, cl, "events", second)
			end := last + 30000
			wantW, wantS = windowtest.WindowRef(evs, 10000, 5000, 2000, end), windowtest.SessionRef(evs, 5000, 1000, end)
			waitFor(t, 60*time.Second, "all windows and sessions", func() bool {
				return len(topictest.Read(t, brokers, "window-counts", true)) >= len(wantW) &&
					len(topictest.Read(t, brokers, "sessions", true)) >= len(wantS)
			})
			time.Sleep(500 * time.Millisecond) // anything emitted twice would show up now
			if err := in.stop(t); err != nil {
				t.Fatalf("Run: %v", err)
			}
			windowtest.Compare(t, "window-counts", windowtest.Emitted(t, brokers, "window-counts", windowFinal), wantW)
			windowtest.Compare(t, "sessions", windowtest.Emitted(t, brokers, "sessions", sessionFinal), wantS)
			if r := in.events.restored(); r["windows"] == 0 || r["sessions"] == 0 {
				t.Errorf("restored %v after the state directory was deleted, want records of both stores", r)
			}
		})
	}
}

// TestIdlePunctuationCommits: under at-least-once, the writes and emits of wall-clock
// punctuations on a task that receives no records are committed all the same: the store's
// checkpoint follows the changelog, and a restart goes on from the committed count.
func TestIdlePunctuationCommits(t *testing.T) {
	brokers := cluster(t)
	dir := t.TempDir()
	cfg := loadConfig(t, dir, `
application_id  = "idle"
state_dir       = "state"
commit_interval = "100ms"
admin { listen = "" }
topic "cmds" {
  partitions = 1
}
processor "probe" {
  module  = "{{probe}}"
  inputs  = ["cmds"]
  outputs = ["ticks-out"]
  store "ticks" {}
}
`)
	in := start(t, cfg, brokers)
	waitFor(t, 30*time.Second, "ten ticks", func() bool { return len(topictest.Read(t, brokers, "ticks-out", false)) >= 10 })
	if err := in.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	// The checkpoint of the store followed its changelog: the exported file, brought up to
	// the store when the task closed, names the ten ticks' records at least.
	ckpt := filepath.Join(dir, "state", "idle", "tasks", "probe_0", store.CheckpointFileName)
	if entries, err := store.ReadCheckpointFile(ckpt); err != nil || len(entries) != 1 || entries[0].Offset < 9 {
		t.Fatalf("checkpoint file after the stop: %+v, %v; want an offset of 9 or more", entries, err)
	}
	before := len(topictest.Read(t, brokers, "ticks-out", false))
	in = start(t, cfg, brokers)
	waitFor(t, 30*time.Second, "more ticks", func() bool { return len(topictest.Read(t, brokers, "ticks-out", false)) > before+2 })
	if err := in.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	// Counts go on from where they were: 1, 2, 3, ... with no restart at 1.
	for i, r := range topictest.Read(t, brokers, "ticks-out", false) {
		if string(r.Value) != strconv.Itoa(i+1) {
			t.Fatalf("tick %d has count %s, want %d: the counts did not go on after the restart", i, r.Value, i+1)
		}
	}
}
