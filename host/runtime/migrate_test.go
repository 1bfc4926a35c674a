package runtime

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/statehost/statehost/internal/topictest"
	"github.com/statehost/statehost/store"
)

// kindCount returns how many events of kind rec holds.
func kindCount(rec *eventRecorder, kind EventKind) int {
	n := 0
	for _, ev := range rec.all() {
		if ev.Kind == kind {
			n++
		}
	}
	return n
}

// checkJSONCounts checks the committed outputs and changelog of the word count after count's
// store migrated to countjson's: every word's outputs are 1, 2, ..., ref[word] in order
// (exactly once across the migration), and the changelog's last committed value of every
// word is its count as JSON, with the version record of version 2.
func checkJSONCounts(t *testing.T, brokers []string, ref map[string]int) {
	t.Helper()
	checkOutputsOnce(t, brokers, "word-counts", ref)
	got, _ := topictest.LatestCommitted(t, brokers, "wc-counts-changelog")
	want := map[string]string{store.VersionRecordKey: "2"}
	for w, n := range ref {
		want[w] = fmt.Sprintf(`{"n":%d}`, n)
	}
	if !maps.Equal(got, want) {
		diff := 0
		for k, v := range want {
			if got[k] != v && diff < 5 {
				t.Errorf("changelog %q = %q, want %q", k, got[k], v)
				diff++
			}
		}
		t.Fatalf("the committed changelog differs from the reference: %d keys, want %d", len(got), len(want))
	}
}

// storeVersions returns the store versions the instance's status shows for the tasks of
// processor, by partition.
func storeVersions(rt *Runtime, processor string) map[int32]uint32 {
	out := map[int32]uint32{}
	for _, ts := range rt.Status().Tasks {
		if ts.Processor == processor && ts.State == "running" {
			out[ts.Partition] = ts.StoreVersions["counts"]
		}
	}
	return out
}

// TestMigratingDeployUnderLoad deploys countjson over count's store while sentences flow in,
// under both guarantees: each task migrates its counts to JSON, task by task, and switches at the
// commit after its migration; every input record is counted exactly once across it (each
// word's outputs go 1, 2, ..., n), the changelog ends in the JSON form with the version record,
// the status shows version 2, and the queries read JSON. A restart over the migrated state, and
// a cold restore of it from the changelog, run countjson on without migrating again; at a start
// with count, which declares version 1, count's tasks wait (the instance runs on) until a
// deploy of countjson starts them.
func TestMigratingDeployUnderLoad(t *testing.T) { eachGuarantee(t, migratingDeployUnderLoad) }

// migratingDeployUnderLoad is TestMigratingDeployUnderLoad for the configuration src.
func migratingDeployUnderLoad(t *testing.T, src string) {
	brokers := cluster(t)
	dir := t.TempDir()
	cfg := loadConfig(t, dir, src)
	rec := &eventRecorder{}
	in := start(t, cfg, brokers, func(o *Options) { o.OnEvent = rec.add })
	cl, _ := client(t, brokers)
	v2, err := os.ReadFile(modules["countjson"])
	if err != nil {
		t.Fatal(err)
	}
	stopFeed := produceContinuously(t, cl, 40, 50*time.Millisecond)
	waitFor(t, 60*time.Second, "counts from count", func() bool { return len(topictest.Read(t, brokers, "word-counts", true)) > 500 })
	if v := storeVersions(in.rt, "count"); !maps.Equal(v, map[int32]uint32{0: 1, 1: 1, 2: 1}) {
		t.Fatalf("store versions before the deploy = %v", v)
	}
	res, err := in.rt.Deploy(context.Background(), "count", "deploy", v2)
	if err != nil {
		t.Fatalf("Deploy: %v", err)
	}
	if res.Tasks != 3 {
		t.Errorf("Deploy = %+v, want 3 tasks switched", res)
	}
	if n := kindCount(rec, EventMigrationDone); n != 3 {
		t.Errorf("%d migration_done events, want 3 (one per task)", n)
	}
	if v := storeVersions(in.rt, "count"); !maps.Equal(v, map[int32]uint32{0: 2, 1: 2, 2: 2}) {
		t.Errorf("store versions after the deploy = %v, want 2 everywhere", v)
	}
	for _, ts := range in.rt.Status().Tasks {
		if ts.Processor == "count" && ts.Module != res.Version.Hash {
			t.Errorf("task count_%d runs module %s, want %s", ts.Partition, ts.Module, res.Version.Hash)
		}
	}
	time.Sleep(time.Second) // countjson under load
	ref := stopFeed()
	awaitEveryWord(t, brokers, ref)
	for w, n := range ref {
		// The outputs are read once produced; the store holds them from the commit that
		// follows (at least once: its batch is applied after its records are acknowledged).
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			v, found, err := in.rt.stores.ReadCommitted(taskID{Processor: "count", Partition: KeyPartition([]byte(w), 3, 0)}, "counts", []byte(w))
			if err == nil && found && string(v) == fmt.Sprintf(`{"n":%d}`, n) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("store counts[%q] = %q %v %v, want {\"n\":%d}", w, v, found, err, n)
			}
		}
		break
	}
	if err := in.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkJSONCounts(t, brokers, ref)

	// The configured module is countjson from now on.
	jsonSrc := strings.Replace(src, "{{count}}", "{{countjson}}", 1)
	for _, cold := range []bool{false, true} {
		if cold {
			if err := os.RemoveAll(StateDir(cfg)); err != nil {
				t.Fatal(err)
			}
		}
		rec := &eventRecorder{}
		in := start(t, loadConfig(t, dir, jsonSrc), brokers, func(o *Options) { o.OnEvent = rec.add })
		more := map[string]int{}
		feed(t, cl, more, 30, 1000+len(ref))
		for w, n := range more {
			ref[w] += n
		}
		awaitEveryWord(t, brokers, ref)
		if v := storeVersions(in.rt, "count"); !maps.Equal(v, map[int32]uint32{0: 2, 1: 2, 2: 2}) {
			t.Errorf("cold=%v: store versions = %v, want 2 everywhere", cold, v)
		}
		if err := in.stop(t); err != nil {
			t.Fatalf("cold=%v: Run: %v", cold, err)
		}
		if n := kindCount(rec, EventMigrationStarted); n != 0 {
			t.Errorf("cold=%v: %d migrations over a store of version 2", cold, n)
		}
		checkJSONCounts(t, brokers, ref)
	}

	// count declares version 1: it cannot read the store. The tasks wait for a module that
	// does, the instance runs on, and a deploy of countjson starts them.
	rec = &eventRecorder{}
	back := start(t, loadConfig(t, dir, src), brokers, func(o *Options) { o.OnEvent = rec.add })
	waitFor(t, 60*time.Second, "count's tasks to wait for a module", func() bool { return kindCount(rec, EventTaskWaitsForModule) == 3 })
	for _, ev := range rec.all() {
		if ev.Kind == EventTaskWaitsForModule && !strings.Contains(ev.Error, "holds entries of version 2") {
			t.Errorf("%s event of task count_%d: error %q, want it to name the versions", ev.Kind, ev.Partition, ev.Error)
		}
	}
	for _, ts := range back.rt.Status().Tasks {
		if ts.Processor == "count" && (ts.State != "waiting" || !strings.Contains(ts.Waiting, "deploy a module of version 2 or later")) {
			t.Errorf("status of task count_%d: state %q, waiting %q; want waiting, saying what to deploy", ts.Partition, ts.State, ts.Waiting)
		}
	}
	more := map[string]int{}
	feed(t, cl, more, 30, 5000)
	time.Sleep(time.Second) // the sentences are tokenized; count holds the words
	select {
	case err := <-back.done:
		t.Fatalf("Run with count over version 2 returned %v, want it to run on", err)
	default:
	}
	for w, h := range topictest.Histories(t, brokers, "word-counts") {
		if len(h) != ref[w] {
			t.Errorf("word %q: %d counts in the output while count waits, want %d: nothing counted", w, len(h), ref[w])
		}
	}
	if _, err := back.rt.Deploy(context.Background(), "count", "deploy", v2); err != nil {
		t.Fatalf("Deploy of countjson to the waiting tasks: %v", err)
	}
	for w, n := range more {
		ref[w] += n
	}
	awaitEveryWord(t, brokers, ref)
	if err := back.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := kindCount(rec, EventMigrationStarted); n != 0 {
		t.Errorf("%d migrations over a store of version 2", n)
	}
	checkJSONCounts(t, brokers, ref)
}

// TestMigrationRefused deploys a module whose migration fails on one entry: the deploy is
// refused before any task switches, naming the task, the store and the entry; count runs on,
// its store untouched (decimal counts, version 1, no version record), and counts on.
func TestMigrationRefused(t *testing.T) {
	brokers := cluster(t)
	in := start(t, loadConfig(t, t.TempDir(), eosHCL()), brokers)
	cl, _ := client(t, brokers)
	ref := map[string]int{"poison": 1, "pill": 1}
	produce(t, cl, "sentences", "poison pill")
	feed(t, cl, ref, 50, 1)
	waitCounts(t, brokers, "word-counts", wordcountStrings(ref))
	bad, err := os.ReadFile(modules["migratefail"])
	if err != nil {
		t.Fatal(err)
	}
	before := in.rt.Processors()[1].Current
	_, err = in.rt.Deploy(context.Background(), "count", "deploy", bad)
	if !errors.Is(err, ErrInvalidModule) || !strings.Contains(err.Error(), `"poison"`) || !strings.Contains(err.Error(), `store "counts"`) {
		t.Fatalf("Deploy = %v, want ErrInvalidModule naming the store and the entry", err)
	}
	if now := in.rt.Processors()[1].Current; now != before {
		t.Fatalf("the processor runs %+v, want %+v still", now, before)
	}
	feed(t, cl, ref, 50, 2)
	waitCounts(t, brokers, "word-counts", wordcountStrings(ref))
	if err := in.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkExactlyOnce(t, brokers, ref) // decimal counts in the changelog, and no version record
}

// wordcountStrings returns ref's counts in decimal.
func wordcountStrings(ref map[string]int) map[string]string {
	out := make(map[string]string, len(ref))
	for w, n := range ref {
		out[w] = strconv.Itoa(n)
	}
	return out
}
