package main

import (
	"context"
	"fmt"
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
	"github.com/statehost/statehost/host/runtime"
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

	// Keyed words, a record every 20s of event time for about 3 hours.
	const t0 = 1_700_000_000_000
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
