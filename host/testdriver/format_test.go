package testdriver

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/statehost/statehost/host/engine"
)

func TestReadInputs(t *testing.T) {
	input := `# a comment, then a blank line

{"topic":"t","key":"a","value":"","timestamp":1000,"headers":[{"key":"h","value":null},{"key":"b","value_base64":"AP8="}]}
{"key_base64":"AP8=","value":null,"partition":2,"timestamp":"2026-12-05T10:00:00.5Z"}
{"advance_wall_clock":"1m30s"}
`
	ins, err := ReadInputs(strings.NewReader(input), "in.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	want := []Input{
		{Pos: "in.jsonl:3", Record: &Record{Topic: "t", Partition: -1, Key: []byte("a"), Value: []byte{}, Timestamp: 1000, HasTimestamp: true,
			Headers: []engine.Header{{Key: "h"}, {Key: "b", Value: []byte{0, 0xff}}}}},
		{Pos: "in.jsonl:4", Record: &Record{Partition: 2, Key: []byte{0, 0xff},
			Timestamp: time.Date(2026, 12, 5, 10, 0, 0, 5e8, time.UTC).UnixMilli(), HasTimestamp: true}},
		{Pos: "in.jsonl:5", AdvanceWallClock: 90 * time.Second},
	}
	if !reflect.DeepEqual(ins, want) {
		t.Errorf("got %+v\nwant %+v", ins, want)
	}
	if ins[0].Record.Value == nil || ins[1].Record.Value != nil {
		t.Error(`"" must be empty bytes and null nil`)
	}
}

func TestReadInputsErrors(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{`not json`, "in:3: not a JSON object"},
		{`null`, "in:3: not a JSON object: null"},
		{`{"key":"a","key_base64":"YQ=="}`, "in:3: both key and key_base64 are given"},
		{`{"topic":"t","ky":"a"}`, "in:3: unknown field ky (known: topic, partition, key"},
		{`{"value_base64":"***"}`, "in:3: value_base64: illegal base64"},
		{`{"key":1}`, "in:3: key: want a string or null, got 1"},
		{`{"timestamp":1.5}`, "in:3: timestamp: want Unix milliseconds or an RFC 3339 string, got 1.5"},
		{`{"partition":-1}`, "in:3: partition -1 is out of range"},
		{`{"headers":[{"key":"h","valu":"v"}]}`, "in:3: headers[0]: unknown field valu"},
		{`{"headers":{"h":"v"}}`, "in:3: headers: want an array"},
		{`{"advance_wall_clock":"10s","key":"a"}`, "in:3: unknown field key (known: advance_wall_clock alone)"},
		{`{"advance_wall_clock":"-1s"}`, "in:3: advance_wall_clock: the wall clock does not go back"},
		{`{"advance_wall_clock":10}`, `in:3: advance_wall_clock: want a duration such as "10s", got 10`},
	} {
		_, err := ReadInputs(strings.NewReader("{\"key\":\"ok\"}\n\n"+tc.line+"\n"), "in")
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %s...", tc.line, err, tc.want)
		}
	}
}

// TestOutputsAndStoresRoundTrip checks that what the driver writes reads back the same, text
// and bytes, null and empty alike, and that an expected file may give RFC 3339 timestamps.
func TestOutputsAndStoresRoundTrip(t *testing.T) {
	outs := []Output{
		{Topic: "o", Partition: 1, Key: []byte("the <key> & \"quotes\""), Value: []byte{}, Timestamp: -5},
		{Topic: "o", Key: nil, Value: []byte{0xff, 0}, Timestamp: 7,
			Headers: []engine.Header{{Key: "null"}, {Key: "text", Value: []byte("é")}, {Key: "bin", Value: []byte{0x80}}}},
	}
	var text strings.Builder
	for _, o := range outs {
		text.Write(o.AppendJSON(nil))
		text.WriteByte('\n')
	}
	wantText := `{"topic":"o","partition":1,"key":"the <key> & \"quotes\"","value":"","timestamp":-5}
{"topic":"o","partition":0,"key":null,"value_base64":"/wA=","timestamp":7,"headers":[{"key":"null","value":null},{"key":"text","value":"é"},{"key":"bin","value_base64":"gA=="}]}
`
	if text.String() != wantText {
		t.Errorf("outputs written as\n%s\nwant\n%s", text.String(), wantText)
	}
	back, err := ReadOutputs(strings.NewReader(text.String()), "o")
	if err != nil || !reflect.DeepEqual(back, outs) {
		t.Errorf("read back %+v, %v\nwant %+v", back, err, outs)
	}
	rfc, err := ReadOutputs(strings.NewReader(`{"topic":"o","partition":0,"key":"k","value":"v","timestamp":"1970-01-01T00:00:01Z"}`), "o")
	if err != nil || rfc[0].Timestamp != 1000 {
		t.Errorf("RFC 3339 timestamp read as %+v, %v", rfc, err)
	}

	entries := []StoreEntry{
		{Store: "counts", Partition: 2, Key: []byte("k"), Value: []byte("1")},
		{Store: "windows", Key: []byte{0xfe}, Value: []byte{}, Windowed: true, Start: -60000, End: 0},
	}
	text.Reset()
	for _, e := range entries {
		text.Write(e.AppendJSON(nil))
		text.WriteByte('\n')
	}
	wantText = `{"store":"counts","partition":2,"key":"k","value":"1"}
{"store":"windows","partition":0,"key_base64":"/g==","start":-60000,"end":0,"value":""}
`
	if text.String() != wantText {
		t.Errorf("store entries written as\n%s\nwant\n%s", text.String(), wantText)
	}
	backEntries, err := ReadStoreEntries(strings.NewReader(text.String()), "s")
	if err != nil || !reflect.DeepEqual(backEntries, entries) {
		t.Errorf("read back %+v, %v\nwant %+v", backEntries, err, entries)
	}
	for _, tc := range []struct{ line, want string }{
		{`{"topic":"o","key":"k","value":"v","timestamp":1}`, "o:1: partition is required"},
		{`{"store":"s","partition":0,"key":"k"}`, "s:1: key and value are required"},
		{`{"store":"s","partition":0,"key":"k","value":"v","start":1}`, "s:1: start and end go together"},
	} {
		var err error
		if strings.Contains(tc.line, `"store"`) {
			_, err = ReadStoreEntries(strings.NewReader(tc.line), "s")
		} else {
			_, err = ReadOutputs(strings.NewReader(tc.line), "o")
		}
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %s", tc.line, err, tc.want)
		}
	}
}

func TestDiff(t *testing.T) {
	if d := Diff("w", "g", []string{"a", "b"}, []string{"a", "b"}); d != "" {
		t.Errorf("equal lines: diff %q", d)
	}
	got := Diff("w", "g", []string{"a", "b", "c", "d", "e"}, []string{"a", "b", "X", "d", "e", "f"})
	want := `--- w
+++ g
@@ -1,5 +1,6 @@
 a
 b
-c
+X
 d
 e
+f
`
	if got != want {
		t.Errorf("diff:\n%s\nwant:\n%s", got, want)
	}
	// Changes far apart make two hunks; lines only removed or only added have an empty side.
	var long []string
	for i := range 20 {
		long = append(long, string(rune('a'+i)))
	}
	changed := append([]string{"a"}, long[2:]...)
	changed = append(changed, "z")
	got = Diff("w", "g", long, changed)
	want = `--- w
+++ g
@@ -1,4 +1,3 @@
 a
-b
 c
 d
@@ -19,2 +18,3 @@
 s
 t
+z
`
	if got != want {
		t.Errorf("diff:\n%s\nwant:\n%s", got, want)
	}
	if got := Diff("w", "g", nil, []string{"x"}); got != "--- w\n+++ g\n@@ -0,0 +1,1 @@\n+x\n" {
		t.Errorf("diff from nothing: %q", got)
	}
}
