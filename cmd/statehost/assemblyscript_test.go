package main

import (
	"bufio"
	"fmt"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/host/runtime"
	"github.com/statehost/statehost/internal/astest"
	"github.com/statehost/statehost/internal/wordgen"
)

// The AssemblyScript guest plugins/count_as, built by npm ci and asc (astest); without
// Node.js these tests skip, saying what to install.

// asModule builds the AssemblyScript plugin plugins/<name> once for the tests of the package,
// into the directory of the test binary.
func asModule(t *testing.T, name string) string {
	t.Helper()
	astest.Skip(t) // before building the program
	buildBinary(t)
	return astest.Build(t, filepath.Join("..", "..", "plugins", name), binaryDir)
}

// TestTestCountInAssemblyScript runs count_as through statehost test on count's fixture: it
// gives the checked-in outputs and final stores, and prints the same lines as count (Go).
func TestTestCountInAssemblyScript(t *testing.T) {
	countAS := asModule(t, "count_as")
	checkCountFixture(t, countAS)
	printed := map[string]string{}
	for name, mod := range map[string]string{"count": goModule(t, "plugins/count"), "count_as": countAS} {
		r := runCLI(t.Context(), "", countArgs(mod)...)
		if r.code != exitOK {
			t.Fatalf("%s: %v", name, r)
		}
		printed[name] = r.stdout
	}
	if printed["count"] != printed["count_as"] {
		t.Errorf("count and count_as printed different lines:\ncount:\n%s\ncount_as:\n%s", printed["count"], printed["count_as"])
	}
}

// TestTestWindowCountInAssemblyScript runs windowcount_as through statehost test on
// windowcount's fixture, as one --module with the fixture's window store: the same outputs
// and final stores as windowcount's.
func TestTestWindowCountInAssemblyScript(t *testing.T) {
	fixture := filepath.Join("testdata", "test", "windowcount")
	r := runCLI(t.Context(), "", "test", "--module", asModule(t, "windowcount_as"), "--processor", "windowcount",
		"--input", "clicks", "--output", "click-counts", "--partitions", "2",
		"--store", "windows:type=window,window_size=10s,grace=2s", filepath.Join(fixture, "input.jsonl"),
		"--expect-outputs", filepath.Join(fixture, "outputs.jsonl"), "--expect-stores", filepath.Join(fixture, "stores.jsonl"))
	if r.code != exitOK || !strings.Contains(r.stdout, "ok: 2 outputs") || !strings.Contains(r.stdout, "ok: 2 store entries") {
		t.Fatalf("statehost test of windowcount_as: %v", r)
	}
}

// TestE2ECountInAssemblyScript runs count (Go) and count_as (AssemblyScript) as two
// applications, each a `statehost run` process, on the same input topic of the broker: counts
// of words, tombstones, an empty key and null keys. Both must emit the same records (per key,
// in order, null values included) and leave the same changelog and the same final store, as
// the admin API reads it.
func TestE2ECountInAssemblyScript(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the statehost program")
	}
	bin := buildBinary(t)
	countAS := asModule(t, "count_as")
	count := buildModules(t)["count"]
	broker := startBroker(t, brokerOptions{})
	createTopics(t, broker.addr, map[string]int{"words": 3})
	produceCountInput(t, broker.addr)

	apps := map[string]string{"count-go": count, "count-as": countAS}
	procs := map[string]*appProcess{}
	admins := map[string]string{}
	for id, module := range apps {
		a := hostileApp{id: id, commitInterval: 200 * time.Millisecond,
			procs: []hostileProc{{name: "count", input: "words", output: id + "-out", module: module, store: "counts"}}}
		cfg := a.write(t, t.TempDir(), broker.addr)
		procs[id] = startApp(t, bin, cfg, id)
		admins[id] = a.admin
	}
	for id, app := range procs {
		app.waitFor(t, 60*time.Second, "its 3 count tasks running", func() bool {
			return len(app.events(runtime.EventTaskRunning)) >= 3
		})
		waitCommitted(t, broker.addr, id, "words")
	}
	goOut, asOut := keyHistories(t, broker.addr, "count-go-out"), keyHistories(t, broker.addr, "count-as-out")
	if len(goOut) < 100 || !maps.EqualFunc(goOut, asOut, slices.Equal) {
		t.Errorf("count emitted the histories of %d keys, count_as of %d: they differ%s", len(goOut), len(asOut), firstDiff(goOut, asOut))
	}
	goLog, asLog := keyHistories(t, broker.addr, "count-go-counts-changelog"), keyHistories(t, broker.addr, "count-as-counts-changelog")
	if !maps.EqualFunc(goLog, asLog, slices.Equal) {
		t.Errorf("the changelogs of count and count_as differ%s", firstDiff(goLog, asLog))
	}
	goStore, asStore := adminStoreLines(t, admins["count-go"]), adminStoreLines(t, admins["count-as"])
	if len(goStore) < 100 || !slices.Equal(goStore, asStore) {
		t.Errorf("the final store of count has %d entries, of count_as %d: they differ", len(goStore), len(asStore))
	}
	for _, app := range procs {
		stopClean(t, app)
	}
}

// produceCountInput writes the input of TestE2ECountInAssemblyScript to "words": the words
// of wordgen's sentences as keys, with tombstones for some words, records with an empty key
// and with a null key among them.
func produceCountInput(t *testing.T, addr string) {
	t.Helper()
	lines, _ := wordgen.Sentences(400, 30)
	var recs []*kgo.Record
	for i, line := range lines {
		for _, w := range strings.Fields(line) {
			recs = append(recs, &kgo.Record{Topic: "words", Key: []byte(w), Value: []byte("1")})
		}
		switch i % 10 {
		case 3: // a tombstone for the line's first word: its count is deleted, and starts again
			recs = append(recs, &kgo.Record{Topic: "words", Key: []byte(strings.Fields(line)[0])})
		case 5:
			recs = append(recs, &kgo.Record{Topic: "words", Key: []byte{}, Value: []byte("1")})
		case 7: // skipped by both
			recs = append(recs, &kgo.Record{Topic: "words", Value: []byte("1")})
		}
	}
	cl := testClient(t, addr)
	defer cl.Close()
	if err := cl.ProduceSync(testContext(t), recs...).FirstErr(); err != nil {
		t.Fatalf("produce to words: %v", err)
	}
}

// keyHistories reads topic and returns each key's values in offset order, a null value as
// <nil> (a key lives in one partition).
func keyHistories(t *testing.T, addr, topic string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, r := range readChecked(t, addr, topic, false) {
		v := string(r.Value)
		if r.Value == nil {
			v = "<nil>"
		}
		out[string(r.Key)] = append(out[string(r.Key)], v)
	}
	return out
}

// firstDiff describes the first key, in order, whose history differs between a and b.
func firstDiff(a, b map[string][]string) string {
	keys := slices.Sorted(maps.Keys(a))
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		if !slices.Equal(a[k], b[k]) {
			return fmt.Sprintf(": key %q: %q, %q", k, a[k], b[k])
		}
	}
	return ""
}

// adminStoreLines reads the whole store counts through the admin API of the instance at admin
// (GET /v1/stores/counts/range) and returns its JSON lines, sorted.
func adminStoreLines(t *testing.T, admin string) []string {
	t.Helper()
	resp, err := http.Get("http://" + admin + "/v1/stores/counts/range?limit=100000")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET range of counts from %s: %s", admin, resp.Status)
	}
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(lines)
	return lines
}
