package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/changelog"
	"github.com/statehost/statehost/config"
	"github.com/statehost/statehost/host/runtime"
	"github.com/statehost/statehost/host/testdriver"
	"github.com/statehost/statehost/pluginsdk/wasmbuild"
)

var (
	stateModulesOnce sync.Once
	stateModulesErr  error
)

// stateModules builds, beside buildModules', the plugins of the state tests: countv2 (count,
// and the last offset of each word under "seen:<word>", a key of another partition than the
// word's) and sessionize.
func stateModules(t *testing.T) map[string]string {
	t.Helper()
	mods := buildModules(t)
	out := map[string]string{"countv2": filepath.Join(binaryDir, "countv2.wasm"), "sessionize": filepath.Join(binaryDir, "sessionize.wasm"),
		"windowcount": mods["windowcount"]}
	stateModulesOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		for name, dir := range map[string]string{"countv2": "../../host/runtime/testdata/countv2", "sessionize": "../../plugins/sessionize"} {
			if err := wasmbuild.Go(ctx, dir, out[name]); err != nil {
				stateModulesErr = fmt.Errorf("build %s: %w", name, err)
				return
			}
		}
	})
	if stateModulesErr != nil {
		t.Fatal(stateModulesErr)
	}
	return out
}

// writeStateConfig writes into dir/app the configuration of application app over the topic
// input (3 partitions): count (countv2) with the key-value store "counts", windowcount with
// the window store "windows" (1h windows) and sessionize with the session store "sessions"
// (10m gap), writing <app>-counts, <app>-windows and <app>-sessions. It returns its path.
func writeStateConfig(t *testing.T, dir, app, addr, input string) string {
	t.Helper()
	mods := stateModules(t)
	src := fmt.Sprintf(`application_id  = %[1]q
state_dir       = "state"
commit_interval = "200ms"
kafka {
  brokers = [%[2]q]
}
admin {
  listen = ""
}
topic %[3]q {
  partitions = 3
}
processor "count" {
  module  = %[4]q
  inputs  = [%[3]q]
  outputs = ["%[1]s-counts"]
  store "counts" {}
}
processor "windowcount" {
  module  = %[5]q
  inputs  = [%[3]q]
  outputs = ["%[1]s-windows"]
  store "windows" {
    type        = "window"
    window_size = "1h"
    grace       = "1m"
  }
}
processor "sessionize" {
  module  = %[6]q
  inputs  = [%[3]q]
  outputs = ["%[1]s-sessions"]
  store "sessions" {
    type           = "session"
    inactivity_gap = "10m"
    grace          = "1m"
  }
}
`, app, addr, input, mods["countv2"], mods["windowcount"], mods["sessionize"])
	if err := os.MkdirAll(filepath.Join(dir, app), 0o755); err != nil {
		t.Fatal(err)
	}
	return writeFile(t, filepath.Join(dir, app), "app.hcl", src)
}

// TestStateExportImport: the round trip of a store's state between two applications on one
// broker. Application a counts keyed words (one key not UTF-8), and keeps their windows and
// sessions, then stops. Its stores are exported from its local state and from its
// changelogs, to the same lines; the counts are the input's, the key that is not UTF-8 comes
// in base64, and the "seen:" keys stay in their word's partition. They are imported into
// application b, which never ran (its changelogs are created); a second import is refused
// while b holds data, and --force writes over it. b then runs and stops, and its stores
// export to a's lines, from its local state and its changelogs; run again, it counts on from
// a's counts.
func TestStateExportImport(t *testing.T) {
	bin := buildBinary(t)
	broker := startBroker(t, brokerOptions{})
	dir := t.TempDir()
	cfgA := writeStateConfig(t, dir, "a", broker.addr, "words")
	cfgB := writeStateConfig(t, dir, "b", broker.addr, "words-b")
	cl := testClient(t, broker.addr)
	defer cl.Close()
	ctx := testContext(t)
	if _, err := kadm.NewClient(cl).CreateTopics(ctx, 3, -1, nil, "words", "words-b"); err != nil {
		t.Fatal(err)
	}

	// Keyed words, a record every 20s of event time for about 3 hours, ending more than half
	// an hour ago: recent enough that Apache Kafka's retention of the window store's changelog
	// (compact,delete: the windows' retention plus a day) keeps them, as kfake would any time.
	t0 := time.Now().Add(-4 * time.Hour).Truncate(time.Hour).UnixMilli()
	ref := map[string]int{}
	var recs []*kgo.Record
	for i := range 600 {
		w := "w" + strconv.Itoa(i*7%23)
		if i%50 == 0 {
			w = "\xff\xfe" // not UTF-8
		}
		ref[w]++
		recs = append(recs, &kgo.Record{Topic: "words", Key: []byte(w), Value: []byte("x"), Timestamp: time.UnixMilli(t0 + int64(i)*20_000)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	a := startApp(t, bin, cfgA, "a")
	waitStateTasks(t, a)
	want := map[string]string{}
	for w, n := range ref {
		want[w] = strconv.Itoa(n)
	}
	waitCounts(t, broker.addr, "a-counts", want)
	crashWaitProcessed(t, broker.addr, "a", time.Minute, "words")
	stopClean(t, a)

	stores := []string{"counts", "windows", "sessions"}
	exported := map[string]string{}
	for _, s := range stores {
		exported[s] = stateExport(t, cfgA, s)
		if fromLog := stateExport(t, cfgA, s, "--from", "changelog"); fromLog != exported[s] {
			t.Errorf("store %s of a: the changelog exports\n%s\nthe local state\n%s", s, fromLog, exported[s])
		}
		if exported[s] == "" {
			t.Fatalf("store %s of a exports nothing", s)
		}
		t.Logf("store %s of a: %d entries, the first %s", s, strings.Count(exported[s], "\n"), strings.SplitN(exported[s], "\n", 2)[0])
	}
	checkCountsExport(t, exported["counts"], ref)

	files := map[string]string{}
	for _, s := range stores {
		files[s] = writeFile(t, dir, s+".jsonl", exported[s])
		if r := runCLI(ctx, "", "state", "import", "--config", cfgB, "--store", s, files[s]); r.code != 0 {
			t.Fatalf("import of %s into b: %s", s, r)
		}
	}
	r := runCLI(ctx, "", "state", "import", "--config", cfgB, "--store", "counts", files["counts"])
	if r.code != 1 || !strings.Contains(r.stderr, "holds data") || !strings.Contains(r.stderr, "--force") {
		t.Errorf("a second import without --force: %s\nwant exit 1: the store holds data", r)
	}
	if r := runCLI(ctx, "", "state", "import", "--config", cfgB, "--store", "counts", "--force", files["counts"]); r.code != 0 {
		t.Errorf("a second import with --force: %s", r)
	}

	b := startApp(t, bin, cfgB, "b")
	waitStateTasks(t, b)
	stopClean(t, b)
	for _, s := range stores {
		if got := stateExport(t, cfgB, s); got != exported[s] {
			t.Errorf("store %s of b exports\n%s\nwant a's\n%s", s, got, exported[s])
		}
		if got := stateExport(t, cfgB, s, "--from", "changelog"); got != exported[s] {
			t.Errorf("store %s of b exports from its changelog\n%s\nwant a's\n%s", s, got, exported[s])
		}
	}

	b = startApp(t, bin, cfgB, "b again")
	waitStateTasks(t, b)
	more := &kgo.Record{Topic: "words-b", Key: []byte("w0"), Value: []byte("x"), Timestamp: time.UnixMilli(t0 + 600*20_000)}
	if err := cl.ProduceSync(ctx, more).FirstErr(); err != nil {
		t.Fatal(err)
	}
	waitCounts(t, broker.addr, "b-counts", map[string]string{"w0": strconv.Itoa(ref["w0"] + 1)})
	stopClean(t, b)
}

// waitStateTasks waits until the 9 tasks of writeStateConfig's application run in p.
func waitStateTasks(t *testing.T, p *appProcess) {
	t.Helper()
	p.waitFor(t, time.Minute, "its 9 tasks running", func() bool {
		seen := map[string]bool{}
		for _, e := range p.events(runtime.EventTaskRunning) {
			seen[taskName(e.Processor, e.Partition)] = true
		}
		return len(seen) == 9
	})
}

// stateExport runs statehost state export of store with cfg and args, which must succeed,
// and returns what it printed.
func stateExport(t *testing.T, cfg, store string, args ...string) string {
	t.Helper()
	r := runCLI(t.Context(), "", append([]string{"state", "export", "--config", cfg, "--store", store}, args...)...)
	if r.code != 0 {
		t.Fatalf("state export --store %s %q: %s", store, args, r)
	}
	return r.stdout
}

// checkCountsExport checks the export of countv2's store: each word of ref with its count in
// the partition of its key, a key that is not UTF-8 in base64, and "seen:<word>" in the
// partition of its word, whatever the partition of its own hash.
func checkCountsExport(t *testing.T, out string, ref map[string]int) {
	t.Helper()
	entries, err := readImportFile(strings.NewReader(out), "export", stateStore{spec: changelog.StoreSpec{Name: "counts"}})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]string{}
	seen := 0
	for _, e := range entries {
		k := string(e.Key)
		word, isSeen := strings.CutPrefix(k, "seen:")
		if part := runtime.KeyPartition([]byte(word), 3, 0); e.Partition != part {
			t.Errorf("%s: key %q in partition %d, want %d, its word's", e.pos, k, e.Partition, part)
		}
		if isSeen {
			seen++
			continue
		}
		counts[k] = string(e.Value)
	}
	for w, n := range ref {
		if counts[w] != strconv.Itoa(n) {
			t.Errorf("export: %q = %q, want %d", w, counts[w], n)
		}
	}
	if len(counts) != len(ref) || seen != len(ref) {
		t.Errorf("export: %d counts and %d seen: keys, want %d of each", len(counts), seen, len(ref))
	}
	if !strings.Contains(out, `"key_base64":"//4="`) {
		t.Errorf("export: the key that is not UTF-8 is not in base64:\n%s", out)
	}
}

// TestStateImportChecksLines: import reads every line before it connects to anything, and
// refuses the first bad one with its file:line and what is wrong with it.
func TestStateImportChecksLines(t *testing.T) {
	dir := t.TempDir()
	cfg := writeStateConfig(t, dir, "lines", "127.0.0.1:1", "words")
	for _, tc := range []struct {
		store, line, want string
	}{
		{"counts", `{"store":"counts","partition":0,"key":"a","value":"1","extra":1}`, `unknown field "extra"`},
		{"counts", `{"store":"windows","partition":0,"key":"a","value":"1"}`, `an entry of store "windows", not of counts`},
		{"counts", `{"store":"counts","key":"a","value":"1"}`, "partition is required"},
		{"counts", `{"store":"counts","partition":-1,"key":"a","value":"1"}`, "partition -1: want a partition number"},
		{"counts", `{"store":"counts","partition":0,"key":"a"}`, "value is required"},
		{"counts", `{"store":"counts","partition":0,"key":"a","key_base64":"YQ==","value":"1"}`, "both key and key_base64"},
		{"counts", `{"store":"counts","partition":0,"key_base64":"!","value":"1"}`, "key_base64: illegal base64"},
		{"counts", `{"store":"counts","partition":0,"key":"a","start":1,"end":2,"value":"1"}`, "start and end given for an entry of counts, a key-value store"},
		{"windows", `{"store":"windows","partition":0,"key":"a","value":"1"}`, "store windows is a window store: its entries need start and end"},
		{"windows", `{"store":"windows","partition":0,"key":"a","start":0,"end":1000,"value":"1"}`, "window [0, 1000) is not 3600000 ms long"},
		{"sessions", `{"store":"sessions","partition":0,"key":"a","start":5,"end":4,"value":"1"}`, "session [5, 4] ends before it starts"},
		{"counts", `not json`, "not a line of statehost state export"},
	} {
		file := writeFile(t, dir, "in.jsonl", "# a comment, then a good line and a blank one\n"+
			`{"store":"`+tc.store+`","partition":1,"key":"k","value":"v"`+map[bool]string{true: `,"start":0,"end":3600000`, false: ""}[tc.store == "windows"]+
			map[bool]string{true: `,"start":0,"end":0`, false: ""}[tc.store == "sessions"]+"}\n\n"+tc.line+"\n")
		r := runCLI(t.Context(), "", "state", "import", "--config", cfg, "--store", tc.store, file)
		stderr := strings.ReplaceAll(r.stderr, `\"`, `"`) // the log line quotes the error
		if r.code != 1 || !strings.Contains(stderr, file+":4: ") || !strings.Contains(stderr, tc.want) {
			t.Errorf("import of %s into %s: %s\nwant exit 1 and %q at %s:4", tc.line, tc.store, r, tc.want, file)
		}
	}
}

// TestStateImportAssign: each entry goes to the partition its line names, unless
// --repartition puts it in its key's; a partition beyond the store's is refused with the
// line, unless --repartition.
func TestStateImportAssign(t *testing.T) {
	s := stateStore{spec: changelog.StoreSpec{Name: "counts"}, proc: &config.Processor{Name: "count"}}
	keys := []string{"a", "b", "c", "d", "e", "f"}
	var entries []importEntry
	for i, k := range keys {
		entries = append(entries, importEntry{StoreEntry: testdriver.StoreEntry{Key: []byte(k), Partition: 2}, pos: "f:" + strconv.Itoa(i+1)})
	}
	im := &importer{s: s, entries: entries, parts: 3}
	byPart, err := im.assign()
	if err != nil || len(byPart) != 1 || len(byPart[2]) != len(keys) {
		t.Errorf("assign = %v, %v; want every entry in partition 2, its line's", byPart, err)
	}
	im.repartition = true
	if byPart, err = im.assign(); err != nil {
		t.Fatal(err)
	}
	moved := 0
	for p, es := range byPart {
		for _, e := range es {
			if want := runtime.KeyPartition(e.Key, 3, 0); p != want {
				t.Errorf("--repartition: %s in partition %d, want %d", e.Key, p, want)
			}
			if p != 2 {
				moved++
			}
		}
	}
	if moved == 0 {
		t.Error("--repartition moved no entry: the keys all hash to partition 2")
	}
	im.repartition, im.parts = false, 2
	if _, err := im.assign(); err == nil || !strings.Contains(err.Error(), "f:1: partition 2: store counts has 2 partitions") {
		t.Errorf("assign over 2 partitions = %v, want the line and the partition count", err)
	}
}

// TestStateEmbeddedBroker: with the embedded broker. While the application runs, export
// refuses its local state (a running instance holds the state directory) and reads the
// changelog through the running broker, and import refuses to write (the application's group
// has members). Once it stopped, export reads the local state, checked against the changelog
// of an embedded broker it starts on the broker's data directory, to the same lines; and
// import writes them back over the store with --force.
func TestStateEmbeddedBroker(t *testing.T) {
	bin := buildBinary(t)
	mods := buildModules(t)
	dir, addr := t.TempDir(), freeAddr(t)
	cfg := writeFile(t, dir, "app.hcl", fmt.Sprintf(`application_id  = "embedded"
state_dir       = "state"
commit_interval = "200ms"
session_timeout = "1s"
embedded_broker {
  listen = %q
}
admin {
  listen = ""
}
topic "words" {
  partitions = 2
}
processor "count" {
  module  = %q
  inputs  = ["words"]
  outputs = ["word-counts"]
  store "counts" {}
}
`, addr, mods["count"]))
	app := startApp(t, bin, cfg, "app")
	app.waitFor(t, time.Minute, "its 2 tasks running", func() bool { return len(app.events(runtime.EventTaskRunning)) == 2 })
	cl := testClient(t, addr)
	defer cl.Close()
	want := map[string]string{}
	for i := range 40 {
		w := "w" + strconv.Itoa(i%9)
		if err := cl.ProduceSync(t.Context(), &kgo.Record{Topic: "words", Key: []byte(w), Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(want[w])
		want[w] = strconv.Itoa(n + 1)
	}
	waitCounts(t, addr, "word-counts", want)
	crashWaitProcessed(t, addr, "embedded", time.Minute, "words")

	r := runCLI(t.Context(), "", "state", "export", "--config", cfg, "--store", "counts")
	if r.code != 1 || !strings.Contains(r.stderr, "is locked") {
		t.Errorf("export of the local state while the application runs: %s\nwant exit 1: the state directory is locked", r)
	}
	running := stateExport(t, cfg, "counts", "--from", "changelog")
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(running), "\n") {
		e, err := parseImportLine([]byte(line), stateStore{spec: changelog.StoreSpec{Name: "counts"}})
		if err != nil {
			t.Fatal(err)
		}
		got[string(e.Key)] = string(e.Value)
	}
	if !maps.Equal(got, want) {
		t.Errorf("the changelog export while the application runs: %v, want %v", got, want)
	}
	file := writeFile(t, dir, "counts.jsonl", running)
	r = runCLI(t.Context(), "", "state", "import", "--config", cfg, "--store", "counts", "--force", file)
	if r.code != 1 || !strings.Contains(r.stderr, "application embedded runs: its consumer group has had 1 members") {
		t.Errorf("import while the application runs: %s\nwant exit 1: it runs", r)
	}
	stopClean(t, app)

	if stopped := stateExport(t, cfg, "counts"); stopped != running {
		t.Errorf("export of the stopped application's local state:\n%s\nwant what its changelog held:\n%s", stopped, running)
	}
	if r := runCLI(t.Context(), "", "state", "import", "--config", cfg, "--store", "counts", file); r.code != 1 || !strings.Contains(r.stderr, "holds data") {
		t.Errorf("import into the store that holds the same entries, without --force: %s\nwant exit 1", r)
	}
	if r := runCLI(t.Context(), "", "state", "import", "--config", cfg, "--store", "counts", "--force", file); r.code != 0 {
		t.Fatalf("import with --force: %s", r)
	}
	for _, from := range []string{"local", "changelog"} {
		if got := stateExport(t, cfg, "counts", "--from", from); got != running {
			t.Errorf("export --from %s after the import:\n%s\nwant\n%s", from, got, running)
		}
	}
}

// TestStateImportTTLStreamTime: import refuses to write into a store whose ttl counts in
// stream time through tasks that have no stream time (an application that never ran), and
// writes nothing; with ttl_clock = "wall_clock" it writes, and the entries export back.
func TestStateImportTTLStreamTime(t *testing.T) {
	dir, countsApp := stateCountsApps(t)
	file := writeFile(t, dir, "in.jsonl", `{"store":"counts","partition":1,"key":"a","value":"3"}`+"\n")
	for _, clock := range []string{"stream_time", "wall_clock"} {
		cfg := countsApp("ttl-"+clock, fmt.Sprintf("ttl       = \"1h\"\n    ttl_clock = %q", clock))
		r := runCLI(t.Context(), "", "state", "import", "--config", cfg, "--store", "counts", file)
		if clock == "wall_clock" {
			if r.code != 0 {
				t.Fatalf("import with ttl_clock = wall_clock: %s", r)
			}
			if got := stateExport(t, cfg, "counts"); got != `{"store":"counts","partition":1,"key":"a","value":"3"}`+"\n" {
				t.Errorf("export after the import: %q", got)
			}
			continue
		}
		if r.code != 1 || !strings.Contains(r.stderr, "ttl counted in stream time") {
			t.Errorf("import with ttl_clock = stream_time: %s\nwant exit 1: no stream time", r)
		}
		if got := stateExport(t, cfg, "counts", "--from", "changelog"); got != "" {
			t.Errorf("the refused import wrote %q", got)
		}
	}
}

// TestStateLoggingDisabled: a store with logging disabled has only its local state: import
// writes it there (creating the state directory), export reads it back, and export --from
// changelog is refused.
func TestStateLoggingDisabled(t *testing.T) {
	dir, countsApp := stateCountsApps(t)
	cfg := countsApp("unlogged", "logging {\n      enabled = false\n    }")
	lines := `{"store":"counts","partition":0,"key":"a","value":"1"}` + "\n" + `{"store":"counts","partition":1,"key":"b","value":"2"}` + "\n"
	if r := runCLI(t.Context(), "", "state", "import", "--config", cfg, "--store", "counts", writeFile(t, dir, "in.jsonl", lines)); r.code != 0 {
		t.Fatalf("import: %s", r)
	}
	if got := stateExport(t, cfg, "counts"); got != lines {
		t.Errorf("export after the import:\n%s\nwant\n%s", got, lines)
	}
	r := runCLI(t.Context(), "", "state", "export", "--config", cfg, "--store", "counts", "--from", "changelog")
	if r.code != 1 || !strings.Contains(r.stderr, "logging disabled") {
		t.Errorf("export --from changelog: %s\nwant exit 1: no changelog", r)
	}
}

// stateCountsApps starts a broker with the topic words (2 partitions) and returns a
// directory and a function that writes there the configuration of application app, whose
// processor count (plugins/count) reads words into the store counts, with the attributes
// store in the store's block; it returns the configuration's path.
func stateCountsApps(t *testing.T) (dir string, countsApp func(app, store string) string) {
	t.Helper()
	broker := startBroker(t, brokerOptions{})
	mods := buildModules(t)
	dir = t.TempDir()
	cl := testClient(t, broker.addr)
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopics(t.Context(), 2, -1, nil, "words"); err != nil {
		t.Fatal(err)
	}
	return dir, func(app, store string) string {
		return writeFile(t, dir, app+".hcl", fmt.Sprintf(`application_id = %q
state_dir      = "state"
kafka {
  brokers = [%q]
}
admin {
  listen = ""
}
processor "count" {
  module  = %q
  inputs  = ["words"]
  store "counts" {
    %s
  }
}
`, app, broker.addr, mods["count"], store))
	}
}
