package changelog

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/statehost/statehost/store"
)

// TestTTLChangelog checks the changelog of a key-value store with a TTL on the broker: its
// records hold the user's bytes with the entries' write times as their timestamps (the
// stream time at each write), its tombstones (a delete, and the sweep's) the time they were
// written, and its topic is created with message.timestamp.type=CreateTime.
func TestTTLChangelog(t *testing.T) {
	e := newEnv(t, 3)
	spec := StoreSpec{Name: "ttl", Options: store.Options{TTL: store.TTL{Millis: 100}}}
	if got := spec.TopicDefaults(); !maps.Equal(got, map[string]string{"message.timestamp.type": "CreateTime"}) {
		t.Fatalf("TopicDefaults = %v", got)
	}
	task := e.open(t, 2, spec)
	defer task.Close(ctx)
	st, kv := task.StoreTask(), task.Store("ttl")
	put := func(k, v string) {
		t.Helper()
		if err := kv.Put([]byte(k), []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	st.ObserveTime(1000)
	put("a", "1")
	put("b", "2")
	st.ObserveTime(1070)
	put("c", "3")
	if err := kv.Delete([]byte("b")); err != nil {
		t.Fatal(err)
	}
	st.ObserveTime(1100) // a expires
	if err := st.SweepExpired(0, nil); err != nil {
		t.Fatal(err)
	}
	if err := task.Commit(ctx, nil); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range e.readRecords(t, TopicName(app, "ttl")) {
		v := "<tombstone>"
		if r.Value != nil {
			v = string(r.Value)
		}
		got = append(got, fmt.Sprintf("p%d %s=%s@%d", r.Partition, r.Key, v, r.Timestamp.UnixMilli()))
	}
	want := []string{"p2 a=1@1000", "p2 b=2@1000", "p2 c=3@1070", "p2 b=<tombstone>@1070", "p2 a=<tombstone>@1100"}
	if !slices.Equal(got, want) {
		t.Fatalf("changelog:\n got %v\nwant %v", got, want)
	}
	rcs, err := e.adm.DescribeTopicConfigs(ctx, TopicName(app, "ttl"))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(TopicName(app, "ttl"), nil)
	if err != nil {
		t.Fatal(err)
	}
	tsType := "<none>"
	for _, c := range rc.Configs {
		if c.Key == "message.timestamp.type" && c.Value != nil {
			tsType = *c.Value
		}
	}
	if tsType != "CreateTime" {
		t.Fatalf("message.timestamp.type = %s", tsType)
	}
}
