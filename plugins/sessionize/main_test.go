package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/statehost/statehost/abi"
	"github.com/statehost/statehost/pluginsdk/sdktest"
)

// newDriver runs sessionize with an inactivity gap of 5s and a grace of 1s.
func newDriver(t *testing.T) *sdktest.Driver {
	t.Helper()
	sessions := sdktest.Sessions(5*time.Second, time.Second)
	sessions.Retention = time.Hour.Milliseconds()
	d, err := sdktest.New(sdktest.Config{Outputs: []string{"sessions-out"},
		SessionStores: map[string]abi.StoreInfo{Store: sessions}})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// event returns an event of user at time ms.
func event(user string, ms int64) sdktest.Record { return sdktest.KV(user, "click").At(ms) }

func process(t *testing.T, d *sdktest.Driver, recs ...sdktest.Record) {
	t.Helper()
	if err := d.Process(recs...); err != nil {
		t.Fatal(err)
	}
}

// emitted returns the records emitted since the last call as "key=value@timestamp".
func emitted(d *sdktest.Driver) []string {
	var out []string
	for _, e := range d.TakeEmitted() {
		out = append(out, fmt.Sprintf("%s=%s@%d", e.Key, e.Value, e.Timestamp.UnixMilli()))
	}
	return out
}

func sessions(d *sdktest.Driver) []string {
	var out []string
	for _, s := range d.SessionStore(Store).All() {
		out = append(out, fmt.Sprintf("%s[%d,%d]=%s", s.Key, s.Start, s.End, s.Value))
	}
	return out
}

func check(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got %q\nwant %q", what, got, want)
	}
}

// TestMergeRules checks how events form sessions: within the gap (inclusive) they merge,
// an event bridging two sessions merges all three, a larger gap starts a new session. All
// events come in one batch, none late (within the 1s grace of the stream time), which ends
// at stream time 17001, when no session is final yet.
func TestMergeRules(t *testing.T) {
	d := newDriver(t)
	process(t, d,
		event("u2", 7000), event("u3", 7000),
		event("u2", 12100),                     // 5.1s after u2's session: a new one
		event("u2", 11500),                     // within 5s of both: bridges them
		event("u3", 12000),                     // exactly the gap: merges
		event("u1", 12000), event("u1", 15000), // 3s apart: one session
		event("u4", 14500), event("u4", 14000), event("u4", 14200), // out of order
		sdktest.Record{Value: []byte("click")}.At(13000), // null key: skipped
		event("u3", 17001)) // 1ms more than the gap after u3's session: a new one
	check(t, "sessions", sessions(d),
		"u1[12000,15000]=2", "u2[7000,12100]=3", "u3[7000,12000]=2", "u3[17001,17001]=1", "u4[14000,14500]=3")
	check(t, "emitted before any session is final", emitted(d))
	if logs := d.Logs(); len(logs) != 1 || !strings.Contains(logs[0].Message, "null key") {
		t.Errorf("logs = %+v, want one warning about the null key", logs)
	}
	if got := d.SessionStore(Store).Dropped(); got != (sdktest.DropCounts{}) {
		t.Errorf("dropped = %+v, want none", got)
	}
}

// TestFinalSessions checks that a session is emitted once it is final (end + gap + grace <
// stream time), at the next stream-time punctuation (every second), exactly once, and that
// late events are dropped.
func TestFinalSessions(t *testing.T) {
	d := newDriver(t)
	process(t, d, event("u1", 1000), event("u1", 4000), event("u2", 5000), event("u2", 9000))
	check(t, "emitted at 9000", emitted(d))
	// A punctuation at 10000: u1's session ends at 4000, final only when 4000 + 6000 <
	// stream time.
	process(t, d, event("u3", 10000))
	check(t, "emitted at 10000", emitted(d))
	// At 10001 u1's session is final, but the next punctuation is due at 11000.
	process(t, d, event("u3", 10001))
	check(t, "emitted at 10001", emitted(d))
	process(t, d, event("u3", 11000))
	check(t, "emitted at 11000", emitted(d), "u1=1000,4000,2@11000")
	check(t, "sessions at 11000", sessions(d), "u2[5000,9000]=2", "u3[10000,11000]=3")

	// Late events, at stream time 11000: one in u1's emitted session does not bring it
	// back; two that would extend u2's closed session (9000 + 1000 < 11000) to 9000 and 9500
	// are dropped; one at 10500 extends it to an open session (10500 + 1000 >= 11000).
	process(t, d, event("u1", 3000), event("u2", 8000), event("u2", 9500), event("u2", 10500))
	check(t, "emitted after late events", emitted(d))
	check(t, "sessions after late events", sessions(d), "u2[5000,10500]=3", "u3[10000,11000]=3")
	if got := d.SessionStore(Store).Dropped(); got != (sdktest.DropCounts{Late: 3}) {
		t.Errorf("dropped = %+v, want 3 late", got)
	}

	process(t, d, event("u4", 17000))
	check(t, "emitted at 17000", emitted(d), "u2=5000,10500,3@17000") // u3 ends at 11000: not final
	process(t, d, event("u4", 18001))
	check(t, "emitted at 18001", emitted(d), "u3=10000,11000,3@18001")
	process(t, d, event("u4", 30000), event("u2", 6000), event("u3", 10500))
	check(t, "emitted at 30000", emitted(d), "u4=17000,18001,2@30000")
	check(t, "sessions at the end", sessions(d), "u4[30000,30000]=1")
	if got := d.SessionStore(Store).Dropped(); got != (sdktest.DropCounts{Late: 5}) {
		t.Errorf("dropped = %+v, want 5 late", got)
	}
}

func TestCorruptCount(t *testing.T) {
	d := newDriver(t)
	d.SessionStore(Store).Put("u", 1000, 1000, []byte("x"))
	err := d.Process(event("u", 2000))
	if err == nil || !strings.Contains(err.Error(), `store "sessions": merge: stored count "x" is not a decimal number`) {
		t.Fatalf("corrupt count: %v", err)
	}
}

func TestNeedsSessionStore(t *testing.T) {
	_, err := sdktest.New(sdktest.Config{Outputs: []string{"o"},
		WindowStores: map[string]abi.StoreInfo{Store: sdktest.TumblingWindows(time.Second, 0)}})
	if err == nil || !strings.Contains(err.Error(), `store "sessions": open: wrong store type (code -13): it is a window store`) {
		t.Fatalf("New with a window store %q: %v", Store, err)
	}
}
