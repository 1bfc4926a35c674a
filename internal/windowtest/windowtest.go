// Package windowtest holds what the tests of plugins/windowcount and plugins/sessionize run
// against a broker share: timestamped events, reference results computed the way the
// plugins must compute them, and a reader of their output topics that fails on a window or
// session emitted twice or too early.
package windowtest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/internal/topictest"
)

// Event is an input record: a key at a time (ms since the Unix epoch).
type Event struct {
	Key string
	TS  int64
}

// Records returns the events as records of topic, each with its timestamp and the value
// "x", in partition part (-1: let the client's partitioner choose).
func Records(topic string, part int32, evs []Event) []*kgo.Record {
	recs := make([]*kgo.Record, len(evs))
	for i, e := range evs {
		recs[i] = &kgo.Record{Topic: topic, Partition: part, Key: []byte(e.Key), Value: []byte("x"), Timestamp: time.UnixMilli(e.TS)}
	}
	return recs
}

// Produce writes the events to topic in order, with their timestamps.
func Produce(t testing.TB, cl *kgo.Client, topic string, evs []Event) {
	t.Helper()
	if err := cl.ProduceSync(context.Background(), Records(topic, -1, evs)...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}

// WindowRef computes what windowcount emits for evs processed in order on one partition:
// per "key@start", "start,end,count" for every window closed at stream time at (window end
// + grace <= at), with late records (window end + grace <= stream time) dropped.
func WindowRef(evs []Event, size, advance, grace, at int64) map[string]string {
	counts := map[string]int{}
	streamTime := int64(-1)
	for _, e := range evs {
		streamTime = max(streamTime, e.TS)
		for s := e.TS - e.TS%advance; s > e.TS-size; s -= advance {
			if s+size+grace > streamTime {
				counts[fmt.Sprintf("%s@%d", e.Key, s)]++
			}
		}
	}
	out := map[string]string{}
	for k, n := range counts {
		start, _ := strconv.ParseInt(k[strings.LastIndexByte(k, '@')+1:], 10, 64)
		if start+size+grace <= at {
			out[k] = fmt.Sprintf("%d,%d,%d", start, start+size, n)
		}
	}
	return out
}

// SessionRef computes what sessionize emits for evs processed in order on one partition:
// sessions merged within gap, late events (ts + grace < stream time) dropped, and per
// "key@start" the "start,end,count" of every session final at stream time at (end + gap +
// grace < at).
func SessionRef(evs []Event, gap, grace, at int64) map[string]string {
	type session struct{ start, end, n int64 }
	byKey := map[string][]session{}
	streamTime := int64(-1)
	for _, e := range evs {
		streamTime = max(streamTime, e.TS)
		if e.TS+grace < streamTime {
			continue // late by its own time: nothing changes
		}
		merged := session{e.TS, e.TS, 1}
		var keep []session
		for _, s := range byKey[e.Key] {
			if s.end >= e.TS-gap && s.start <= e.TS+gap {
				merged = session{min(merged.start, s.start), max(merged.end, s.end), merged.n + s.n}
			} else {
				keep = append(keep, s)
			}
		}
		byKey[e.Key] = append(keep, merged)
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

// Emitted reads an output topic of windowcount or sessionize (read_committed) and returns
// "key@start" -> value. It fails the test on a malformed value, a window or session emitted
// twice, or one emitted before it was final at the record's timestamp (the punctuation's
// stream time) by final.
func Emitted(t testing.TB, brokers []string, topic string, final func(start, end, at int64) bool) map[string]string {
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

// Compare fails the test with the differences between emitted and reference results.
func Compare(t testing.TB, topic string, got, want map[string]string) {
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
	if len(diffs) > 0 {
		slices.Sort(diffs)
		t.Errorf("%s: %d of %d differ from the reference, e.g. %s", topic, len(diffs), len(want), strings.Join(diffs[:min(5, len(diffs))], "; "))
	}
}
