package engine

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
)

// TestWordCount runs the two halves of the word-count demo as real wasm modules, the
// output of tokenize feeding count, and checks the contract of both.
func TestWordCount(t *testing.T) {
	e, _ := testEngine(t, Config{})
	ctx := context.Background()
	tokRig, countRig := newRig(t), newRig(t, "counts")
	tok := instantiate(t, e, "tokenize", tokRig.task("tokenize", "words"))
	cnt := instantiate(t, e, "count", countRig.task("count", "counts-out"))

	lines := recs("the cat  the\that", "", "-the dog -", "cat")
	lines = append(lines, Record{Topic: "in", Offset: 200, Key: []byte("x")}) // a tombstone line: no words
	if err := tok.ProcessBatch(ctx, lines); err != nil {
		t.Fatal(err)
	}
	want := []string{"words:the=1", "words:cat=1", "words:the=1", "words:hat=1", "words:the=<nil>", "words:dog=1", "words:-=1", "words:cat=1"}
	if got := tokRig.emitted.strings(); !slices.Equal(got, want) {
		t.Fatalf("tokenize emitted\n%q\nwant\n%q", got, want)
	}
	for _, r := range tokRig.emitted.recs {
		if r.Timestamp.IsZero() {
			t.Errorf("emitted record %q has no timestamp", r.Key)
		}
	}

	// Feed tokenize's output to count, in two batches.
	words := make([]Record, len(tokRig.emitted.recs))
	for i, r := range tokRig.emitted.recs {
		words[i] = Record{Topic: "words", Offset: int64(i), Key: r.Key, Value: r.Value}
	}
	if err := cnt.ProcessBatch(ctx, words[:3]); err != nil {
		t.Fatal(err)
	}
	if err := cnt.ProcessBatch(ctx, words[3:]); err != nil {
		t.Fatal(err)
	}
	want = []string{"counts-out:the=1", "counts-out:cat=1", "counts-out:the=2", "counts-out:hat=1",
		"counts-out:the=<nil>", "counts-out:dog=1", "counts-out:-=1", "counts-out:cat=2"}
	if got := countRig.emitted.strings(); !slices.Equal(got, want) {
		t.Fatalf("count emitted\n%q\nwant\n%q", got, want)
	}
	wantStore := map[string]string{"cat": "2", "hat": "1", "dog": "1", "-": "1"}
	if got := dump(t, countRig.stores["counts"]); !maps.Equal(got, wantStore) {
		t.Fatalf("counts = %v, want %v", got, wantStore)
	}
}

// TestCountInC runs the same records through count (Go) and count_c (C, written from the
// ABI's documentation) and checks they emit and store the same.
func TestCountInC(t *testing.T) {
	e, logs := testEngine(t, Config{})
	ctx := context.Background()
	input := []Record{
		kv([]byte("a"), []byte("1")), kv([]byte("b"), []byte("1")), kv([]byte("a"), []byte("x")),
		kv([]byte(""), []byte("1")), kv([]byte("a"), nil), kv([]byte("a"), []byte{}), kv(nil, []byte("1")),
		kv([]byte(strings.Repeat("k", 5000)), []byte("1")), kv([]byte("b"), []byte("1")),
	}
	for i := range input {
		input[i].Offset = int64(i)
	}
	results := map[string]*rig{}
	for _, guest := range []string{"count", "count_c"} {
		r := newRig(t, "counts")
		in := instantiate(t, e, guest, r.task(guest, "out"))
		if err := in.ProcessBatch(ctx, input); err != nil {
			t.Fatalf("%s: %v", guest, err)
		}
		results[guest] = r
	}
	goOut, cOut := results["count"].emitted.strings(), results["count_c"].emitted.strings()
	if !slices.Equal(goOut, cOut) {
		t.Fatalf("count emitted\n%.300q\ncount_c emitted\n%.300q", goOut, cOut)
	}
	if len(goOut) != 8 || goOut[2] != "out:a=2" || goOut[4] != "out:a=<nil>" || goOut[5] != "out:a=1" {
		t.Fatalf("count emitted %.300q", goOut)
	}
	for _, r := range results["count_c"].emitted.recs[:3] {
		if r.Key == nil || r.Value == nil {
			t.Errorf("count_c emitted null key or value for %q", r.Key)
		}
	}
	if !maps.Equal(dump(t, results["count"].stores["counts"]), dump(t, results["count_c"].stores["counts"])) {
		t.Fatalf("stores differ")
	}
	if got := strings.Count(logs.String(), "null key"); got != 2 {
		t.Errorf("%d warnings about a null key, want 2 (one per guest):\n%s", got, logs)
	}
}

// TestInitUnknownStore checks that a guest whose statehost_init cannot open its store fails
// instantiation with a *GuestError that says which store, for Go and C guests.
func TestInitUnknownStore(t *testing.T) {
	e, _ := testEngine(t, Config{})
	for _, guest := range []string{"count", "count_c"} {
		m := compile(t, e, guest)
		_, err := m.Instantiate(context.Background(), newRig(t, "other").task(guest, "out"))
		ge := guestError(t, err, ErrGuestFailed)
		if ge.Offset != -1 || ge.Code != -5 || !strings.Contains(ge.Detail, `"counts"`) {
			t.Errorf("%s: error %v: want code -5 (unknown store), offset -1 and the store's name", guest, err)
		}
	}
}

// TestLeaderboard checks the two-store plugin with range and prefix scans.
func TestLeaderboard(t *testing.T) {
	e, _ := testEngine(t, Config{})
	r := newRig(t, "latest", "ranking")
	in := instantiate(t, e, "leaderboard", r.task("leaderboard", "board"))
	input := []Record{
		kv([]byte("ann"), []byte("10")), kv([]byte("bob"), []byte("30")), kv([]byte("cy"), []byte("20")),
		kv([]byte("al"), []byte("-5")), kv([]byte("ann"), []byte("40")), kv([]byte("bob"), nil),
		kv([]byte("cy"), []byte("?")), kv([]byte("zed"), []byte("?")), kv([]byte("a"), []byte("?*")),
	}
	if err := in.ProcessBatch(context.Background(), input); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"board:top3=ann=10", "board:top3=bob=30,ann=10", "board:top3=bob=30,cy=20,ann=10",
		"board:top3=bob=30,cy=20,ann=10", "board:top3=ann=40,bob=30,cy=20", "board:top3=ann=40,cy=20,al=-5",
		"board:cy=2/3", "board:zed=<nil>", "board:a=al=-5,ann=40",
	}
	if got := r.emitted.strings(); !slices.Equal(got, want) {
		t.Fatalf("emitted\n%q\nwant\n%q", got, want)
	}
	if got := dump(t, r.stores["latest"]); !maps.Equal(got, map[string]string{"ann": "40", "cy": "20", "al": "-5"}) {
		t.Errorf("latest = %v", got)
	}
	if n := len(dump(t, r.stores["ranking"])); n != 3 {
		t.Errorf("ranking has %d keys, want 3", n)
	}
}
