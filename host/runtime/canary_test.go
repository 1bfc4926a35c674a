package runtime

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/statehost/statehost/internal/topictest"
	"github.com/statehost/statehost/store"
)

// readModule reads the built plugin name.
func readModule(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(modules[name])
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// processorStatus returns the status of the processor name.
func processorStatus(t *testing.T, rt *Runtime, name string) ProcessorStatus {
	t.Helper()
	for _, ps := range rt.Processors() {
		if ps.Name == name {
			return ps
		}
	}
	t.Fatalf("no processor %q in %+v", name, rt.Processors())
	return ProcessorStatus{}
}

// taskModules returns the module each running task of ps runs, by partition.
func taskModules(ps ProcessorStatus) map[int32]string {
	out := map[int32]string{}
	for _, tm := range ps.TaskModules {
		out[tm.Partition] = tm.Module
	}
	return out
}

// awaitEveryWord waits until the output holds ref's counts of every word.
func awaitEveryWord(t *testing.T, brokers []string, ref map[string]int) {
	t.Helper()
	waitFor(t, 60*time.Second, "every word counted", func() bool {
		h := topictest.Histories(t, brokers, "word-counts")
		for w, n := range ref {
			if len(h[w]) < n {
				return false
			}
		}
		return true
	})
}

// TestCanaryThenPromote deploys countjson as a canary on partition 1 of count while sentences
// flow in, under exactly_once: only that task migrates and runs it, /v1/processors shows which
// task runs which module and the canary in progress, a full deploy is refused meanwhile; then
// the promotion migrates and switches the others. Every record is counted exactly once across
// both, and the changelog ends in JSON.
func TestCanaryThenPromote(t *testing.T) {
	brokers := cluster(t)
	in := start(t, loadConfig(t, t.TempDir(), eosHCL()), brokers)
	cl, _ := client(t, brokers)
	v1 := processorStatus(t, in.rt, "count").Current
	v2 := readModule(t, "countjson")
	stopFeed := produceContinuously(t, cl, 40, 50*time.Millisecond)
	waitFor(t, 60*time.Second, "counts from count", func() bool { return len(topictest.Read(t, brokers, "word-counts", true)) > 300 })

	if _, err := in.rt.DeployCanary(context.Background(), "count", "deploy", v2, []int32{3}); !errors.Is(err, ErrBadPartitions) {
		t.Fatalf("DeployCanary on partition 3 of 3 = %v, want ErrBadPartitions", err)
	}
	res, err := in.rt.DeployCanary(context.Background(), "count", "deploy", v2, []int32{1})
	if err != nil {
		t.Fatalf("DeployCanary: %v", err)
	}
	if res.Tasks != 1 || res.Action != "canary" || !slices.Equal(res.Partitions, []int32{1}) {
		t.Errorf("DeployCanary = %+v, want 1 task switched on partition 1", res)
	}
	ps := processorStatus(t, in.rt, "count")
	want := map[int32]string{0: v1.Hash, 1: res.Version.Hash, 2: v1.Hash}
	if got := taskModules(ps); !maps.Equal(got, want) {
		t.Errorf("task modules during the canary = %v, want %v", got, want)
	}
	if ps.Current != v1 || ps.Canary == nil || ps.Canary.Version.Hash != res.Version.Hash || !slices.Contains(ps.InProgress, "canary") || ps.Switched != 3 {
		t.Errorf("processor during the canary = %+v", ps)
	}
	if v := storeVersions(in.rt, "count"); !maps.Equal(v, map[int32]uint32{0: 1, 1: 2, 2: 1}) {
		t.Errorf("store versions during the canary = %v", v)
	}
	if _, err := in.rt.Deploy(context.Background(), "count", "deploy", v2); !errors.Is(err, ErrCanaryPending) {
		t.Errorf("Deploy during a canary = %v, want ErrCanaryPending", err)
	}
	time.Sleep(time.Second) // the canary under load

	pres, err := in.rt.Promote(context.Background(), "count")
	if err != nil {
		t.Fatalf("Promote: %v", err)
	}
	if pres.Tasks != 3 || pres.Version.Hash != res.Version.Hash || pres.Previous != v1 {
		t.Errorf("Promote = %+v", pres)
	}
	ps = processorStatus(t, in.rt, "count")
	if ps.Current.Hash != res.Version.Hash || ps.Previous == nil || *ps.Previous != v1 || ps.Canary != nil || len(ps.InProgress) != 0 {
		t.Errorf("processor after the promotion = %+v", ps)
	}
	if v := storeVersions(in.rt, "count"); !maps.Equal(v, map[int32]uint32{0: 2, 1: 2, 2: 2}) {
		t.Errorf("store versions after the promotion = %v", v)
	}
	if _, err := in.rt.Promote(context.Background(), "count"); !errors.Is(err, ErrNoCanary) {
		t.Errorf("a second Promote = %v, want ErrNoCanary", err)
	}
	time.Sleep(500 * time.Millisecond)
	ref := stopFeed()
	awaitEveryWord(t, brokers, ref)
	if err := in.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkJSONCounts(t, brokers, ref)
}

// TestRollbackUnderLoad rolls back, under exactly_once with sentences flowing in, first a
// canary of a module whose migration is reversible (its task migrates back), then the same
// module deployed to every task, read back from the copy kept on disk: each task migrates its
// counts back to decimal and runs count again. Every record is counted exactly once across
// the four switches, and the changelog ends in count's form, with the version record of 1.
func TestRollbackUnderLoad(t *testing.T) {
	brokers := cluster(t)
	cfg := loadConfig(t, t.TempDir(), eosHCL())
	in := start(t, cfg, brokers)
	cl, _ := client(t, brokers)
	v1 := processorStatus(t, in.rt, "count").Current
	rev := readModule(t, "reversible")
	stopFeed := produceContinuously(t, cl, 40, 50*time.Millisecond)
	waitFor(t, 60*time.Second, "counts from count", func() bool { return len(topictest.Read(t, brokers, "word-counts", true)) > 300 })
	if _, err := in.rt.Rollback(context.Background(), "count"); !errors.Is(err, ErrNoPrevious) {
		t.Fatalf("Rollback before any deploy = %v, want ErrNoPrevious", err)
	}

	if _, err := in.rt.DeployCanary(context.Background(), "count", "deploy", rev, []int32{0, 2}); err != nil {
		t.Fatalf("DeployCanary: %v", err)
	}
	if v := storeVersions(in.rt, "count"); !maps.Equal(v, map[int32]uint32{0: 2, 1: 1, 2: 2}) {
		t.Errorf("store versions during the canary = %v", v)
	}
	time.Sleep(500 * time.Millisecond)
	res, err := in.rt.Rollback(context.Background(), "count")
	if err != nil {
		t.Fatalf("Rollback of the canary: %v", err)
	}
	if res.Tasks != 3 || res.Version != v1 {
		t.Errorf("Rollback of the canary = %+v", res)
	}
	if v := storeVersions(in.rt, "count"); !maps.Equal(v, map[int32]uint32{0: 1, 1: 1, 2: 1}) {
		t.Errorf("store versions after the canary's rollback = %v", v)
	}
	if ps := processorStatus(t, in.rt, "count"); ps.Canary != nil || ps.Current != v1 || ps.Previous != nil {
		t.Errorf("processor after the canary's rollback = %+v", ps)
	}

	dres, err := in.rt.Deploy(context.Background(), "count", "deploy", rev)
	if err != nil {
		t.Fatalf("Deploy: %v", err)
	}
	if _, err := os.Stat(fmt.Sprintf("%s/modules/%s.wasm", StateDir(cfg), v1.Hash)); err != nil {
		t.Fatalf("count is not kept on disk: %v", err)
	}
	time.Sleep(500 * time.Millisecond)
	res, err = in.rt.Rollback(context.Background(), "count")
	if err != nil {
		t.Fatalf("Rollback: %v", err)
	}
	if res.Tasks != 3 || res.Version.Hash != v1.Hash || res.Previous.Hash != dres.Version.Hash {
		t.Errorf("Rollback = %+v", res)
	}
	ps := processorStatus(t, in.rt, "count")
	if ps.Current.Hash != v1.Hash || ps.Previous == nil || ps.Previous.Hash != dres.Version.Hash {
		t.Errorf("processor after the rollback = %+v", ps)
	}
	for p, hash := range taskModules(ps) {
		if hash != v1.Hash {
			t.Errorf("task count_%d runs %s after the rollback, want count", p, hash)
		}
	}
	if v := storeVersions(in.rt, "count"); !maps.Equal(v, map[int32]uint32{0: 1, 1: 1, 2: 1}) {
		t.Errorf("store versions after the rollback = %v", v)
	}
	time.Sleep(500 * time.Millisecond)
	ref := stopFeed()
	awaitEveryWord(t, brokers, ref)
	if err := in.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkOutputsOnce(t, brokers, "word-counts", ref)
	got, _ := topictest.LatestCommitted(t, brokers, "wc-counts-changelog")
	want := wordcountStrings(ref)
	want[store.VersionRecordKey] = "1"
	if !maps.Equal(got, want) {
		t.Fatalf("the committed changelog differs from count's form: %d keys, want %d", len(got), len(want))
	}
}

// TestRollbackAfterRestart deploys a module with a reversible migration over count, under
// exactly_once with sentences flowing in, and restarts the instance with that module in its
// module file: the restarted instance still knows count as the previous module (the lineage
// kept in the state directory) and rolls back to it, its tasks migrating their counts back.
// Every record is counted exactly once. A restart with another module than the lineage's
// has no previous module.
func TestRollbackAfterRestart(t *testing.T) {
	brokers := cluster(t)
	dir := t.TempDir()
	module := filepath.Join(dir, "count.wasm")
	if err := os.WriteFile(module, readModule(t, "count"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := strings.Replace(eosHCL(), `"{{count}}"`, strconv.Quote(module), 1)
	cfg := loadConfig(t, dir, src)
	cl, _ := client(t, brokers)
	in := start(t, cfg, brokers)
	v1 := processorStatus(t, in.rt, "count").Current
	stopFeed := produceContinuously(t, cl, 40, 50*time.Millisecond)
	waitFor(t, 60*time.Second, "counts from count", func() bool { return len(topictest.Read(t, brokers, "word-counts", true)) > 300 })
	rev := readModule(t, "reversible")
	dres, err := in.rt.Deploy(context.Background(), "count", "deploy", rev)
	if err != nil {
		t.Fatalf("Deploy: %v", err)
	}
	if err := in.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}

	// The module file now holds the deployed module, as a user keeps it.
	if err := os.WriteFile(module, rev, 0o644); err != nil {
		t.Fatal(err)
	}
	in = start(t, loadConfig(t, dir, src), brokers)
	waitFor(t, 60*time.Second, "the restarted instance to run its tasks", func() bool { return running(in.rt) == 7 })
	ps := processorStatus(t, in.rt, "count")
	if ps.Current.Hash != dres.Version.Hash || ps.Previous == nil || ps.Previous.Hash != v1.Hash {
		t.Fatalf("processor after the restart = %+v, want module %s with previous %s", ps, short(dres.Version.Hash), short(v1.Hash))
	}
	res, err := in.rt.Rollback(context.Background(), "count")
	if err != nil {
		t.Fatalf("Rollback after the restart: %v", err)
	}
	if res.Tasks != 3 || res.Version.Hash != v1.Hash {
		t.Errorf("Rollback = %+v, want 3 tasks on %s", res, short(v1.Hash))
	}
	if v := storeVersions(in.rt, "count"); !maps.Equal(v, map[int32]uint32{0: 1, 1: 1, 2: 1}) {
		t.Errorf("store versions after the rollback = %v", v)
	}
	time.Sleep(500 * time.Millisecond) // count under load again
	ref := stopFeed()
	awaitEveryWord(t, brokers, ref)
	if err := in.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkOutputsOnce(t, brokers, "word-counts", ref)

	// The lineage is now count's, over the reversible module: a start with that module (the
	// file as after the deploy) has no previous module.
	in = start(t, loadConfig(t, dir, src), brokers)
	waitFor(t, 60*time.Second, "the instance to run its tasks", func() bool { return running(in.rt) == 7 })
	if ps := processorStatus(t, in.rt, "count"); ps.Previous != nil {
		t.Errorf("processor started with the module the rollback left = %+v, want no previous module", ps)
	}
	if err := in.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestRollbackRefused deploys countjson, whose migration is one way, over count under load:
// a rollback to count is refused naming the store, the versions and the missing declaration,
// and countjson runs on, counting exactly once.
func TestRollbackRefused(t *testing.T) {
	brokers := cluster(t)
	in := start(t, loadConfig(t, t.TempDir(), eosHCL()), brokers)
	cl, _ := client(t, brokers)
	stopFeed := produceContinuously(t, cl, 40, 50*time.Millisecond)
	waitFor(t, 60*time.Second, "counts from count", func() bool { return len(topictest.Read(t, brokers, "word-counts", true)) > 300 })
	res, err := in.rt.Deploy(context.Background(), "count", "deploy", readModule(t, "countjson"))
	if err != nil {
		t.Fatalf("Deploy: %v", err)
	}
	before := processorStatus(t, in.rt, "count")
	_, err = in.rt.Rollback(context.Background(), "count")
	if !errors.Is(err, ErrRollbackRefused) || !strings.Contains(err.Error(), `store "counts" holds entries of version 2`) ||
		!strings.Contains(err.Error(), "statehost_store_reversible") {
		t.Fatalf("Rollback = %v, want ErrRollbackRefused naming the store, its version and the declaration", err)
	}
	after := processorStatus(t, in.rt, "count")
	if after.Current != before.Current || after.Current.Hash != res.Version.Hash || len(after.InProgress) != 0 {
		t.Errorf("processor after the refused rollback = %+v, want %+v", after, before)
	}
	if v := storeVersions(in.rt, "count"); !maps.Equal(v, map[int32]uint32{0: 2, 1: 2, 2: 2}) {
		t.Errorf("store versions after the refused rollback = %v", v)
	}
	time.Sleep(500 * time.Millisecond)
	ref := stopFeed()
	awaitEveryWord(t, brokers, ref)
	if err := in.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkJSONCounts(t, brokers, ref)
}
