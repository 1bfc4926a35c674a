package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestConsumeHeaders checks consume --headers: each line is KEY<TAB>VALUE<TAB>HEADERS, the
// headers a JSON array after the last tab that gives back every header in its order, with
// tabs, newlines, null and empty values, repeated keys and bytes that are not UTF-8 (as
// U+FFFD); and that without --headers the lines are as before.
func TestConsumeHeaders(t *testing.T) {
	b := startBroker(t, brokerOptions{kfake: true})
	createTopics(t, b.addr, map[string]int{"h": 1})
	ctx := testContext(t)
	cl := testClient(t, b.addr, kgo.DefaultProduceTopic("h"))
	defer cl.Close()
	recs := []*kgo.Record{
		{Key: []byte("k1"), Value: []byte("v1"), Headers: []kgo.RecordHeader{
			{Key: "statehost.error", Value: []byte("engine: failed\nsecond line\twith a tab <and> \"quotes\"")},
			{Key: "null", Value: nil},
			{Key: "empty", Value: []byte{}},
			{Key: "twice", Value: []byte("1")},
			{Key: "twice", Value: []byte("2")},
			{Key: "binary", Value: []byte{'a', 0xff, 'b'}},
		}},
		{Key: []byte("k2"), Value: nil},
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	r := runCLI(ctx, "", "consume", "--headers", "--brokers", b.addr, "h")
	if r.code != 0 {
		t.Fatalf("consume --headers: %v", r)
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("consume --headers printed %q, want 2 lines", r.stdout)
	}
	want := [][]jsonHeader{{
		{"statehost.error", ptr("engine: failed\nsecond line\twith a tab <and> \"quotes\"")},
		{"null", nil}, {"empty", ptr("")}, {"twice", ptr("1")}, {"twice", ptr("2")},
		{"binary", ptr("a\uFFFDb")},
	}, {}}
	for i, line := range lines {
		cut := strings.LastIndexByte(line, '\t')
		if cut < 0 {
			t.Fatalf("line %q has no tab", line)
		}
		var got []jsonHeader
		if err := json.Unmarshal([]byte(line[cut+1:]), &got); err != nil {
			t.Fatalf("line %q: headers: %v", line, err)
		}
		if !slices.EqualFunc(got, want[i], func(a, b jsonHeader) bool {
			return a.Key == b.Key && (a.Value == nil) == (b.Value == nil) && (a.Value == nil || *a.Value == *b.Value)
		}) {
			t.Errorf("line %d headers %s, want %+v", i, line[cut+1:], want[i])
		}
		if kv := strings.SplitN(line[:cut], "\t", 2); kv[0] != string(recs[i].Key) {
			t.Errorf("line %q: key %q, want %q", line, kv[0], recs[i].Key)
		}
	}
	if !strings.HasPrefix(lines[0], "k1\tv1\t[{") || lines[1] != "k2\t<null>\t[]" {
		t.Errorf("lines %q: want k1<TAB>v1<TAB>[{... and k2<TAB><null><TAB>[]", lines)
	}

	r = runCLI(ctx, "", "consume", "--brokers", b.addr, "h")
	if r.code != 0 || r.stdout != "k1\tv1\nk2\t<null>\n" {
		t.Errorf("consume without --headers: %v, want the two KEY<TAB>VALUE lines", r)
	}
}
