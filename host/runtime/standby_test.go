package runtime

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/statehost/statehost/restore"

	"github.com/statehost/statehost/internal/wordgen"
)

// TestStandbyTakeover: with standby_replicas = 1, each of two instances keeps standby copies of
// the other's count tasks, following their changelogs. When one stops, the other takes its
// tasks over and restores only what its standbys had not applied: far below the changelog.
// Memory stores too: the promoted standby hands its open stores to the active task.
func TestStandbyTakeover(t *testing.T) {
	for _, tc := range []struct{ backend, guarantee string }{
		{"pebble", "at_least_once"}, {"memory", "at_least_once"}, {"pebble", "exactly_once"},
	} {
		t.Run(tc.backend+"/"+tc.guarantee, func(t *testing.T) { testStandbyTakeover(t, tc.backend, tc.guarantee) })
	}
}

func testStandbyTakeover(t *testing.T, backend, guarantee string) {
	brokers := cluster(t)
	src := fmt.Sprintf("standby_replicas = 1\nprocessing_guarantee = %q\n", guarantee) + fmt.Sprintf(wordcountHCL, backend, true)
	cfgA := loadConfig(t, t.TempDir(), src)
	cfgB := loadConfig(t, t.TempDir(), src)
	cl, adm := client(t, brokers)

	a := start(t, cfgA, brokers)
	b := start(t, cfgB, brokers)
	lines, ref := wordgen.Sentences(3000, 3)
	produce(t, cl, "sentences", lines...)
	waitCounts(t, brokers, "word-counts", wordgen.Strings(ref))
	waitFor(t, 60*time.Second, "the 7 tasks shared and every count task with a caught-up standby", func() bool {
		ra, rb := running(a.rt), running(b.rt)
		return ra > 0 && rb > 0 && ra+rb == 7 && standbysCaughtUp(a.rt, b.rt) == 3
	})
	ends, err := adm.ListEndOffsets(context.Background(), "wc-counts-changelog")
	if err != nil {
		t.Fatal(err)
	}
	var changelog int64
	ends.Each(func(o kadm.ListedOffset) { changelog += o.Offset })
	// The instance that runs count tasks stops; the other takes them over.
	victim, survivor := a, b
	if runningCount(b.rt) > runningCount(a.rt) {
		victim, survivor = b, a
	}
	if runningCount(victim.rt) == 0 {
		t.Fatal("no instance runs a count task")
	}
	before := survivor.events.restored()["counts"]
	if err := victim.stop(t); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "the other instance to take every task", func() bool { return running(survivor.rt) == 7 })
	tail := survivor.events.restored()["counts"] - before
	t.Logf("changelog %d records; the takeover restored %d", changelog, tail)
	if tail*10 > changelog {
		t.Errorf("the takeover restored %d records of a changelog of %d: the standbys did not keep up", tail, changelog)
	}
	feed(t, cl, ref, 300, 9)
	waitCounts(t, brokers, "word-counts", wordgen.Strings(ref))
}

// runningCount counts the count tasks that rt runs.
func runningCount(rt *Runtime) int {
	n := 0
	for _, ts := range rt.Status().Tasks {
		if ts.Processor == "count" && ts.State == "running" {
			n++
		}
	}
	return n
}

// standbysCaughtUp counts the count tasks that one of the instances runs and the other follows
// as a caught-up standby (lag 0 against the ends it saw, or 1: a commit marker).
func standbysCaughtUp(rts ...*Runtime) int {
	n := 0
	for p := range int32(3) {
		id := taskID{Processor: "count", Partition: p}
		for _, rt := range rts {
			rt.tasks.mu.Lock()
			open := rt.tasks.standby[id] != nil
			rt.tasks.mu.Unlock()
			// Under exactly-once a transaction's commit marker follows its last record.
			if lag, known := rt.local.lag(id); open && known && lag <= 1 {
				n++
			}
		}
	}
	return n
}

// TestWarmupThenMove: a second instance joins an instance whose tasks have 2000 changelog
// records each, with acceptable_recovery_lag = 100. Balance wants one task on the newcomer,
// which is not caught up: the task stays, a warmup restores it on the newcomer, which then
// asks for a rebalance and gets the task, restoring only a short tail. The first instance
// deletes its copy of the moved task after state_cleanup_delay.
func TestWarmupThenMove(t *testing.T) {
	brokers := cluster(t)
	src := `
application_id          = "warm"
commit_interval         = "100ms"
acceptable_recovery_lag = 100
state_cleanup_delay     = "2s"
admin { listen = "" }
topic "keys" {
  partitions = 2
}
processor "count" {
  module  = "{{count}}"
  inputs  = ["keys"]
  outputs = ["key-counts"]
  store "counts" {}
}
`
	cfgA := loadConfig(t, t.TempDir(), src)
	cfgB := loadConfig(t, t.TempDir(), src)
	cl, _ := client(t, brokers)

	a := start(t, cfgA, brokers)
	ref := map[string]int{}
	keys := make([]string, 4000)
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i) // distinct keys: the changelog does not compact away
		ref[keys[i]]++
	}
	produceKeyed(t, cl, "keys", keys)
	waitCounts(t, brokers, "key-counts", wordgen.Strings(ref))

	b := start(t, cfgB, brokers)
	sawWarmup := false
	waitFor(t, 90*time.Second, "the newcomer to run a task", func() bool {
		for _, ts := range b.rt.Status().Tasks {
			sawWarmup = sawWarmup || ts.State == "standby"
		}
		return running(b.rt) == 1
	})
	if !sawWarmup {
		t.Error("the task moved without a warmup on the newcomer")
	}
	if got := b.events.restored()["counts"]; got > 200 {
		t.Errorf("the newcomer restored %d records when the task moved, want at most about acceptable_recovery_lag (100)", got)
	}
	if running(a.rt) != 1 {
		t.Errorf("the first instance runs %d tasks, want 1", running(a.rt))
	}
	moved := taskID{Processor: "count", Partition: 0}
	if a.rt.Status().Tasks[0].Partition == 0 {
		moved.Partition = 1
	}
	waitFor(t, 30*time.Second, "the first instance to delete its copy of the moved task", func() bool {
		held, err := a.rt.stores.LocalTasks()
		if err != nil {
			t.Fatal(err)
		}
		for _, lt := range held {
			if lt.ID.Processor == moved.Processor && lt.ID.Partition == moved.Partition {
				return false
			}
		}
		return true
	})
	more := []string{"k1", "k2", "k3", "k4"}
	for _, k := range more {
		ref[k]++
	}
	produceKeyed(t, cl, "keys", more)
	waitCounts(t, brokers, "key-counts", wordgen.Strings(ref))
}

// TestStandbysWaitForRestores: a second instance joins with standby_replicas = 1 and gets
// one of the two count tasks, whose restore is held as it begins, and a standby of the
// other. While its active task restores, its standby applies nothing of its changelog, which
// the first instance goes on writing (the restore has the machine to itself); once the
// restore is done, the standby catches up.
func TestStandbysWaitForRestores(t *testing.T) {
	brokers := cluster(t)
	src := `
application_id   = "hold"
commit_interval  = "100ms"
standby_replicas = 1
admin { listen = "" }
topic "keys" {
  partitions = 2
}
processor "count" {
  module  = "{{count}}"
  inputs  = ["keys"]
  outputs = ["key-counts"]
  store "counts" {}
}
`
	cl, _ := client(t, brokers)
	a := start(t, loadConfig(t, t.TempDir(), src), brokers)
	ref := map[string]int{}
	keys := func(from, to int) []string {
		ks := make([]string, 0, to-from)
		for i := from; i < to; i++ {
			ks = append(ks, "k"+strconv.Itoa(i)) // distinct keys: the changelog does not compact away
			ref[ks[len(ks)-1]]++
		}
		return ks
	}
	produceKeyed(t, cl, "keys", keys(0, 4000))
	waitCounts(t, brokers, "key-counts", wordgen.Strings(ref))

	gate := &restoreGate{began: make(chan struct{}), open: make(chan struct{})}
	b := start(t, loadConfig(t, t.TempDir(), src), brokers, func(o *Options) { o.RestoreListener = gate })
	defer gate.release()
	select {
	case <-gate.began:
	case <-time.After(60 * time.Second):
		t.Fatal("the newcomer began no restore of an active task")
	}
	// standbyApplied sums what b's standby tasks applied of their changelogs.
	standbyApplied := func() int64 {
		var n int64
		for _, ts := range b.rt.Status().Tasks {
			if ts.State == "standby" {
				for _, rs := range ts.Restores {
					n += rs.Restored
				}
			}
		}
		return n
	}
	// The first instance counts more keys of both partitions meanwhile, and logs them: a
	// standby that followed would apply those of the task the first instance kept.
	before := standbyApplied()
	produceKeyed(t, cl, "keys", keys(4000, 4400))
	time.Sleep(2 * time.Second)
	if after := standbyApplied(); after != before {
		t.Errorf("while its active task restored, the newcomer's standbys applied %d changelog records, want none", after-before)
	}
	gate.release()
	waitFor(t, 60*time.Second, "the newcomer to run a task and the other's standby to catch up", func() bool {
		return running(b.rt) == 1 && running(a.rt) == 1 && standbysCaughtUp(a.rt, b.rt) == 2
	})
	waitCounts(t, brokers, "key-counts", wordgen.Strings(ref))
}

// restoreGate holds the first restore of an active task as it begins, until release.
type restoreGate struct {
	once, released sync.Once
	began, open    chan struct{}
}

func (g *restoreGate) OnRestoreStart(restore.StartEvent) {
	g.once.Do(func() {
		close(g.began)
		<-g.open
	})
}
func (g *restoreGate) OnBatchRestored(restore.BatchEvent) {}
func (g *restoreGate) OnRestoreEnd(restore.EndEvent)      {}
func (g *restoreGate) release()                           { g.released.Do(func() { close(g.open) }) }
