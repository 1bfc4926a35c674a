package runtime

// Regression tests for defects found in review: each failed before its fix.

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/statehost/statehost/config"
	"github.com/statehost/statehost/restore"
)

// TestSiblingDoesNotCommitPastFailedRecord: two processors read the same partition. The probe
// task panics on a record in its first batch after a commit; the count task processed the
// same record. The partition's offset must stay before the failed record, whatever the
// sibling did, so that the failed processor sees it again.
func TestSiblingDoesNotCommitPastFailedRecord(t *testing.T) {
	brokers := cluster(t)
	cl, _ := client(t, brokers)
	cfg := loadConfig(t, t.TempDir(), `
application_id  = "sib"
commit_interval = "100ms"
admin { listen = "" }
topic "cmds" {
  partitions = 1
}
processor "count" {
  module  = "{{count}}"
  inputs  = ["cmds"]
  outputs = ["counts"]
  store "counts" {}
}
processor "probe" {
  module = "{{probe}}"
  inputs = ["cmds"]
}
`)
	in := start(t, cfg, brokers)
	ctx := context.Background()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "cmds", Key: []byte("k"), Value: []byte("log fine")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the first record to be committed", func() bool {
		return committed(t, brokers, "sib", "cmds")[0] == 1
	})
	time.Sleep(500 * time.Millisecond) // a few empty commit rounds: probe's t.last is nil now
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "cmds", Key: []byte("k"), Value: []byte("panic")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var err error
	select {
	case err = <-in.done:
	case <-time.After(60 * time.Second):
		t.Fatal("the runtime did not stop on a plugin panic")
	}
	in.done <- err
	if err == nil {
		t.Fatal("Run returned nil after a plugin panic")
	}
	if got := committed(t, brokers, "sib", "cmds")[0]; got != 1 {
		t.Errorf("cmds partition 0: committed offset %d, want 1: the record that failed processor probe (offset 1) was committed by its sibling count and will never reach probe again", got)
	}
}

// TestBalancerKeepsTasksWhole: a processor with inputs ["a", "b"] run by two instances must
// get a-N and b-N on the same member (cooperative-sticky, a topic-partition balancer, splits
// them, and both instances then run task join_N on the same changelog partition).
func TestBalancerKeepsTasksWhole(t *testing.T) {
	bal := newTaskBalancer([]*procView{{cfg: &config.Processor{Name: "join", Inputs: []string{"a", "b"}}}})
	topics := []string{"a", "b"}
	members := []kmsg.JoinGroupResponseMember{
		{MemberID: "m1", ProtocolMetadata: bal.JoinGroupMetadata(topics, nil, -1)},
		{MemberID: "m2", ProtocolMetadata: bal.JoinGroupMetadata(topics, nil, -1)},
	}
	mb, _, err := bal.MemberBalancer(members)
	if err != nil {
		t.Fatal(err)
	}
	into, err := mb.(kgo.GroupMemberBalancerOrError).BalanceOrError(map[string]int32{"a": 2, "b": 2})
	if err != nil {
		t.Fatal(err)
	}
	owner := map[string]map[int32]string{} // topic -> partition -> member
	for _, a := range into.IntoSyncAssignment() {
		got, err := bal.ParseSyncAssignment(a.MemberAssignment)
		if err != nil {
			t.Fatal(err)
		}
		for topic, parts := range got {
			for _, p := range parts {
				if owner[topic] == nil {
					owner[topic] = map[int32]string{}
				}
				owner[topic][p] = a.MemberID
			}
		}
	}
	t.Logf("assignment: %v", owner)
	for p := int32(0); p < 2; p++ {
		if owner["a"][p] != owner["b"][p] {
			t.Errorf("task join_%d: a-%d goes to %s and b-%d to %s: two instances run the same task", p, p, owner["a"][p], p, owner["b"][p])
		}
	}
}

// TestTaskRunsOnOneInstance is the end-to-end form: three instances of an application whose
// processor reads two co-partitioned topics must never both run task join_N for long, and a
// key read from a-N and b-N is counted by one store.
func TestTaskRunsOnOneInstance(t *testing.T) {
	brokers := cluster(t)
	src := `
application_id  = "split"
commit_interval = "200ms"
admin { listen = "" }
topic "a" {
  partitions = 2
}
topic "b" {
  partitions = 2
}
processor "join" {
  module  = "{{count}}"
  inputs  = ["a", "b"]
  outputs = ["joined"]
  store "counts" {}
}
`
	x := start(t, loadConfig(t, t.TempDir(), src), brokers)
	y := start(t, loadConfig(t, t.TempDir(), src), brokers)
	z := start(t, loadConfig(t, t.TempDir(), src), brokers)
	all := []*instance{x, y, z}
	// settled reports whether each task runs on exactly one live instance.
	settled := func() bool {
		owners := map[string]int{}
		for _, in := range all {
			if in.rt == nil {
				continue
			}
			for _, ts := range in.rt.Status().Tasks {
				if ts.State == "running" {
					owners[taskID{Processor: ts.Processor, Partition: ts.Partition}.String()]++
				}
			}
		}
		return len(owners) == 2 && owners["join_0"] == 1 && owners["join_1"] == 1
	}
	mcl, _ := client(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	// Each round reads key kN once from a-N and once from b-N: one store counts both.
	round := func(phase string, want int) {
		t.Helper()
		waitFor(t, 60*time.Second, phase+": each task on one instance", settled)
		var recs []*kgo.Record
		for p := int32(0); p < 2; p++ {
			k := []byte(fmt.Sprintf("k%d", p))
			recs = append(recs, &kgo.Record{Topic: "a", Partition: p, Key: k, Value: []byte("x")},
				&kgo.Record{Topic: "b", Partition: p, Key: k, Value: []byte("x")})
		}
		if err := mcl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		w := strconv.Itoa(want)
		waitCounts(t, brokers, "joined", map[string]string{"k0": w, "k1": w})
		if !settled() {
			t.Errorf("%s: a task ran on two instances", phase)
		}
	}
	round("three instances", 2)
	if err := y.stop(t); err != nil {
		t.Fatal(err)
	}
	round("after the second instance stopped", 4)
	if err := x.stop(t); err != nil {
		t.Fatal(err)
	}
	round("after the first instance stopped", 6)
}

// startCounter counts restore starts per store partition.
type startCounter struct {
	mu     sync.Mutex
	starts map[string][]int64 // "store/partition" -> start offsets
	ends   int
	gate   chan struct{} // when not nil, restored batches wait until it is closed
}

func (s *startCounter) OnRestoreStart(e restore.StartEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := fmt.Sprintf("%s/%d", e.Store, e.Partition)
	s.starts[k] = append(s.starts[k], e.StartOffset)
}
func (s *startCounter) OnBatchRestored(restore.BatchEvent) {
	if s.gate != nil {
		<-s.gate
	}
}
func (s *startCounter) OnRestoreEnd(restore.EndEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ends++
}

// TestRebalanceKeepsUnrevokedRestore: every cooperative rebalance calls onRevoked at the end
// of the session, with an empty map when nothing is taken from this member (franz-go
// consumer_group.go). A member joining the group must not make the first instance throw away
// the restore of a task it keeps (a memory store would start again from offset 0, and under
// churn a long restore would never complete).
func TestRebalanceKeepsUnrevokedRestore(t *testing.T) {
	brokers := cluster(t)
	src := `
application_id  = "churn"
commit_interval = "200ms"
admin { listen = "" }
topic "words" {
  partitions = 1
}
processor "count" {
  module  = "{{count}}"
  inputs  = ["words"]
  outputs = ["word-counts"]
  store "counts" {
    backend = "memory"
  }
}
`
	// A changelog of 400k records for partition 0 (the only partition: the group keeps it on
	// the first member).
	_, adm := client(t, brokers)
	if _, err := adm.CreateTopic(context.Background(), 1, -1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, "churn-counts-changelog"); err != nil {
		t.Fatal(err)
	}
	mcl, _ := client(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MaxBufferedRecords(1<<20))
	var recs []*kgo.Record
	for i := range 400000 {
		recs = append(recs, &kgo.Record{Topic: "churn-counts-changelog", Key: []byte(strconv.Itoa(i)), Value: []byte("1")})
	}
	if err := mcl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	// The second member is prepared first (New compiles the modules, which takes seconds).
	rtB, err := New(context.Background(), Options{Config: loadConfig(t, t.TempDir(), src), Brokers: brokers, SessionTimeout: 6 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// The restore is held after its first batch until the other member has joined, so the
	// rebalance always meets it.
	sc := &startCounter{starts: map[string][]int64{}, gate: make(chan struct{})}
	rt, err := New(context.Background(), Options{Config: loadConfig(t, t.TempDir(), src), Brokers: brokers,
		RestoreListener: sc, SessionTimeout: 6 * time.Second,
		Logger: hclog.New(&hclog.LoggerOptions{Name: "first", Level: hclog.Info, Output: testWriter{t}})})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx) }()
	defer func() { cancel(); <-done; rt.Close() }()
	waitFor(t, 30*time.Second, "the restore to start", func() bool {
		sc.mu.Lock()
		defer sc.mu.Unlock()
		return len(sc.starts) > 0
	})
	// Another member joins (and is assigned nothing: there is one partition).
	ctxB, cancelB := context.WithCancel(context.Background())
	doneB := make(chan error, 1)
	go func() { doneB <- rtB.Run(ctxB) }()
	defer func() { cancelB(); <-doneB; rtB.Close() }()
	waitFor(t, 30*time.Second, "the second member to join", func() bool {
		resp, err := adm.DescribeGroups(context.Background(), "churn")
		if err != nil {
			return false
		}
		g := resp["churn"]
		return len(g.Members) == 2 && g.State == "Stable"
	})
	close(sc.gate)
	waitFor(t, 60*time.Second, "the restore to finish", func() bool {
		sc.mu.Lock()
		defer sc.mu.Unlock()
		return sc.ends > 0
	})
	sc.mu.Lock()
	defer sc.mu.Unlock()
	t.Logf("restore starts: %v", sc.starts)
	if n := len(sc.starts["counts/0"]); n > 1 {
		t.Errorf("the restore of counts partition 0, which this instance never lost, started %d times (from %v): a rebalance that revoked nothing cancelled it", n, sc.starts["counts/0"])
	}
}
