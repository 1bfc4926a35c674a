package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/host/runtime"
	"github.com/statehost/statehost/internal/wordgen"
	"github.com/statehost/statehost/pluginsdk/wasmbuild"
	"github.com/statehost/statehost/store"
)

var (
	migrationModulesOnce sync.Once
	migrationModulesErr  error
	migrationModules     map[string]string
)

// buildMigrationModules builds, once, the modules of the migration tests: slowmigrate
// (countjson, whose migration spins for about a tenth of a millisecond per entry) and
// migratefail (declares countjson's version, and fails to migrate the count of "poison").
func buildMigrationModules(t testing.TB) map[string]string {
	t.Helper()
	buildBinary(t)
	migrationModulesOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		mods := map[string]string{}
		for name, pkg := range map[string]string{
			"slowmigrate": "../../plugins/countjson/testdata/slowmigrate",
			"migratefail": "../../host/runtime/testdata/migratefail",
			"countjson":   "../../plugins/countjson",
			"reversible":  "../../plugins/countjson/testdata/reversible",
		} {
			mods[name] = filepath.Join(binaryDir, name+".wasm")
			if err := wasmbuild.Go(ctx, pkg, mods[name]); err != nil {
				migrationModulesErr = fmt.Errorf("build %s: %w", name, err)
				return
			}
		}
		migrationModules = mods
	})
	if migrationModulesErr != nil {
		t.Fatal(migrationModulesErr)
	}
	return migrationModules
}

// distinctSentences returns n sentences of 10 words each, every word new ("m<i>"): many keys,
// so that a migration of the counts takes a while.
func distinctSentences(n int) ([]string, map[string]int) {
	ref := map[string]int{}
	lines := make([]string, n)
	for i := range lines {
		words := make([]string, 10)
		for j := range words {
			words[j] = fmt.Sprintf("m%06d", i*10+j)
			ref[words[j]]++
		}
		lines[i] = strings.Join(words, " ")
	}
	return lines, ref
}

// TestMigrationKilled runs the word count under exactly_once with its count module in a file
// of its own, under load, and:
//
//   - deploys with `statehost deploy` a module whose migration of the counts fails on one
//     entry: the deploy is refused (exit 1, naming the entry), nothing changes;
//   - replaces the module file with countjson (a variant whose migration is slow), which the
//     app deploys: its tasks migrate their counts to JSON, one after the other;
//   - SIGKILLs the app while its second task migrates (the first one's migration committed),
//     and starts it again on the same state: the two tasks whose migration had not committed
//     migrate at their start, from their committed state (version 1), and the first one runs
//     countjson over its migrated store at once;
//
// and checks that every input record was counted exactly once across it all (every word's
// outputs go 1, 2, ..., n, read_committed), that the changelog ends in the JSON form with the
// version record of version 2, and what the events and the status said.
func TestMigrationKilled(t *testing.T) {
	bin := buildBinary(t)
	mods := buildMigrationModules(t)
	broker := startBroker(t, brokerOptions{})
	dir := t.TempDir()
	cfg := writeAppConfigWith(t, dir, broker.addr, appOptions{guarantee: "exactly_once", admin: true})
	// The count processor's module is a file of the test's own, which it replaces.
	module := filepath.Join(dir, "count.wasm")
	count, err := os.ReadFile(buildModules(t)["count"])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(module, count, 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	src = []byte(strings.Replace(string(src), fmt.Sprintf("%q", buildModules(t)["count"]), fmt.Sprintf("%q", module), 1))
	if err := os.WriteFile(cfg, src, 0o644); err != nil {
		t.Fatal(err)
	}

	app := startApp(t, bin, cfg, "app")
	app.waitTasks(t, 90*time.Second)
	// Many keys, and the poison that migratefail cannot migrate; then sentences all along.
	lines, ref := distinctSentences(3000)
	lines = append(lines, "poison")
	ref["poison"]++
	produceLines(t, bin, broker.addr, "sentences", lines)
	seed := 0
	prod := startProducer(t, broker.addr, producerOptions{every: 100 * time.Millisecond}, func() []*kgo.Record {
		seed++
		more, _ := wordgen.Sentences(20, seed)
		return sentenceRecords(more)
	})
	crashWaitProcessed(t, broker.addr, e2eApp, 90*time.Second, "sentences", e2eRepart)

	// statehost deploy reads the admin address from a configuration: the app's, with the port
	// its listener took.
	deployCfg := filepath.Join(dir, "deploy.hcl")
	withAddr := strings.Replace(string(src), `listen = "127.0.0.1:0"`, fmt.Sprintf("listen = %q", app.adminAddr(t)), 1)
	if err := os.WriteFile(deployCfg, []byte(withAddr), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t.Context(), "", "deploy", "--config", deployCfg, "--processor", "count", mods["migratefail"])
	if r.code != 1 || !strings.Contains(r.stderr, `entry \"poison\"`) || !strings.Contains(r.stderr, "cannot migrate the count of poison") {
		t.Fatalf("statehost deploy of migratefail: %v\nwant exit 1 naming the entry and the module's error", r)
	}
	if n := len(app.events(runtime.EventMigrationStarted)); n != 0 {
		t.Fatalf("%d migrations started for a refused module", n)
	}

	// The watched file becomes countjson (slow to migrate): the app deploys it.
	slow, err := os.ReadFile(mods["slowmigrate"])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(module+".new", slow, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(module+".new", module); err != nil {
		t.Fatal(err)
	}
	// The kill lands in the second task's migration: the first one's is committed (a task
	// migrates once the one before it runs countjson), the third's has not begun.
	app.waitFor(t, 120*time.Second, "a second migration to start", func() bool {
		return len(app.events(runtime.EventMigrationStarted)) > 1
	})
	kill(t, app)
	started, done := app.events(runtime.EventMigrationStarted), app.events(runtime.EventMigrationDone)
	if len(started) != 2 || len(done) != 1 {
		t.Fatalf("killed after %d migrations started and %d were done, want 2 and 1: not in the middle of the second", len(started), len(done))
	}
	migratedBefore := len(done)
	t.Logf("killed while task count_%d migrated %d entries (%d tasks had migrated)", started[len(started)-1].Partition,
		started[len(started)-1].Records, migratedBefore)

	// The restart runs the module in the file: countjson. The tasks still at version 1 migrate.
	app2 := startApp(t, bin, cfg, "app2")
	app2.waitTasks(t, 180*time.Second)
	if n := len(app2.events(runtime.EventMigrationDone)); n != 3-migratedBefore {
		t.Errorf("the restart migrated %d tasks, want the %d that had not migrated", n, 3-migratedBefore)
	}
	for _, e := range app2.events(runtime.EventMigrationStarted) {
		if e.FromVersion != 1 || e.ToVersion != 2 || e.Store != "counts" {
			t.Errorf("migration_started %+v, want counts from version 1 to 2", e)
		}
	}
	for _, ts := range (&instance{appProcess: app2, admin: app2.adminAddr(t)}).status(t).Tasks {
		if ts.Processor == "count" && ts.StoreVersions["counts"] != 2 {
			t.Errorf("task count_%d: store versions %v after the restart, want counts at 2", ts.Partition, ts.StoreVersions)
		}
	}
	for _, rec := range prod.finish(t, 30*time.Second) {
		for _, w := range strings.Fields(string(rec.Value)) {
			ref[w]++
		}
	}
	crashWaitProcessed(t, broker.addr, e2eApp, 120*time.Second, "sentences", e2eRepart)
	stopClean(t, app2)
	checkMigratedCounts(t, broker.addr, ref)
}

// checkMigratedCounts checks the word count after its counts migrated to JSON: every word's
// outputs (read_committed) are 1, 2, ..., ref[word] in order, and the changelog's last
// committed value of every word is its count as JSON, beside the version record of version 2.
func checkMigratedCounts(t *testing.T, addr string, ref map[string]int) {
	t.Helper()
	crashWaitStable(t, addr, e2eChangelog, 70*time.Second)
	crashWaitStable(t, addr, "word-counts", 70*time.Second)
	outSeqs, outWhere := crashValueSeqs(t, "output word-counts", readChecked(t, addr, "word-counts", true))
	d := &crashDiffs{t: t, check: "output word-counts (read_committed)"}
	for _, w := range crashSortedKeys(ref) {
		s := outSeqs[w]
		if i := crashFirstBreak(s); i >= 0 {
			d.errorf("word %q (reference %d): value %d at %s is not %d: values %s", w, ref[w], s[i], outWhere[w][i], i+1, crashAround(s, i))
		} else if len(s) != ref[w] {
			d.errorf("word %q: counted to %d, want %d", w, len(s), ref[w])
		}
	}
	d.done(len(ref))
	latest := map[string]string{}
	for _, r := range readChecked(t, addr, e2eChangelog, true) {
		latest[string(r.Key)] = string(r.Value)
	}
	d = &crashDiffs{t: t, check: "changelog " + e2eChangelog + " (latest values, read_committed)"}
	if v := latest[store.VersionRecordKey]; v != "2" {
		d.errorf("version record %q, want 2", v)
	}
	for _, w := range crashSortedKeys(ref) {
		if want := fmt.Sprintf(`{"n":%d}`, ref[w]); latest[w] != want {
			d.errorf("word %q: %q, want %q", w, latest[w], want)
		}
	}
	if len(latest) != len(ref)+1 {
		d.errorf("%d keys, want %d words and the version record", len(latest), len(ref))
	}
	d.done(len(ref))
}
