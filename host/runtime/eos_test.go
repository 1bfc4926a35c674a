package runtime

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/statehost/statehost/internal/topictest"
	"github.com/statehost/statehost/internal/wordgen"
)

// eosHCL is the word count under exactly-once.
func eosHCL() string {
	return strings.Replace(fmt.Sprintf(wordcountHCL, "pebble", true),
		`commit_interval = "200ms"`, `processing_guarantee = "exactly_once"`, 1)
}

// eachGuarantee runs fn as a subtest under each processing guarantee, with the word count's
// configuration under it.
func eachGuarantee(t *testing.T, fn func(t *testing.T, src string)) {
	for _, guarantee := range []string{"exactly_once", "at_least_once"} {
		t.Run(guarantee, func(t *testing.T) {
			src := eosHCL()
			if guarantee == "at_least_once" {
				src = fmt.Sprintf(wordcountHCL, "pebble", true)
			}
			fn(t, src)
		})
	}
}

// checkExactlyOnce checks the committed output of the word count against ref: every word's
// counts in offset order are exactly 1, 2, ..., ref[word] (no duplicate, no gap), and the
// changelog's last committed value of every word is its count.
func checkExactlyOnce(t *testing.T, brokers []string, ref map[string]int) {
	t.Helper()
	checkOutputsOnce(t, brokers, "word-counts", ref)
	if got, _ := topictest.LatestCommitted(t, brokers, "wc-counts-changelog"); !maps.Equal(got, wordgen.Strings(ref)) {
		t.Fatalf("the committed changelog differs from the reference: %d keys, want %d", len(got), len(ref))
	}
}

// checkOutputsOnce checks the committed counts in topic (the word count's word-counts, or
// another count's) against ref: every key's counts in offset order are exactly 1, 2, ...,
// ref[key] (no duplicate, no gap).
func checkOutputsOnce(t *testing.T, brokers []string, topic string, ref map[string]int) {
	t.Helper()
	hist := topictest.Histories(t, brokers, topic)
	bad := 0
	for w, n := range ref {
		got := hist[w]
		ok := len(got) == n
		for i := 0; ok && i < n; i++ {
			ok = got[i] == strconv.Itoa(i+1)
		}
		if !ok {
			if bad < 5 {
				t.Errorf("word %q: output counts %v, want 1..%d", w, got, n)
			}
			bad++
		}
	}
	if bad > 0 || len(hist) != len(ref) {
		t.Fatalf("%d of %d words differ; %d words in the output", bad, len(ref), len(hist))
	}
}

// TestWordCountExactlyOnce runs the word count under exactly-once, stops and restarts it,
// and checks that every count was emitted exactly once and that the restart restored only
// the changelog's tail.
func TestWordCountExactlyOnce(t *testing.T) {
	brokers := cluster(t)
	cfg := loadConfig(t, t.TempDir(), eosHCL())
	if cfg.CommitInterval != 100*time.Millisecond {
		t.Fatalf("commit_interval %v, want the exactly-once default 100ms", cfg.CommitInterval)
	}
	cl, _ := client(t, brokers)
	in := start(t, cfg, brokers)
	lines, ref := wordgen.Sentences(2000, 1)
	produce(t, cl, "sentences", lines...)
	waitCounts(t, brokers, "word-counts", wordgen.Strings(ref))
	if err := in.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}

	in = start(t, cfg, brokers)
	feed(t, cl, ref, 500, 2)
	waitCounts(t, brokers, "word-counts", wordgen.Strings(ref))
	if n := in.events.restored()["counts"]; n != 0 {
		t.Errorf("the clean restart restored %d records, want 0", n)
	}
	if err := in.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkExactlyOnce(t, brokers, ref)
}

// TestRebalanceExactlyOnce shares the word count between two instances and back while input
// flows: the rebalances abort open transactions and revive their tasks, and still every count
// is emitted exactly once.
func TestRebalanceExactlyOnce(t *testing.T) {
	brokers := cluster(t)
	src := eosHCL()
	cfgA := loadConfig(t, t.TempDir(), src)
	cfgB := loadConfig(t, t.TempDir(), src)
	cl, _ := client(t, brokers)

	ref := map[string]int{}
	a := start(t, cfgA, brokers)
	feed(t, cl, ref, 500, 5)
	b := start(t, cfgB, brokers)
	for i := range 10 {
		feed(t, cl, ref, 100, 10+i)
		time.Sleep(100 * time.Millisecond)
	}
	waitFor(t, 60*time.Second, "the second instance to run tasks", func() bool { return running(b.rt) > 0 })
	waitCounts(t, brokers, "word-counts", wordgen.Strings(ref))
	if err := b.stop(t); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		feed(t, cl, ref, 100, 30+i)
		time.Sleep(100 * time.Millisecond)
	}
	waitFor(t, 60*time.Second, "the first instance to take all tasks back", func() bool { return running(a.rt) == 7 })
	waitCounts(t, brokers, "word-counts", wordgen.Strings(ref))
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}
	checkExactlyOnce(t, brokers, ref)
}

// TestAbortRevivesExactlyOnce makes the broker refuse the input offsets of commits in which
// the count tasks processed records (an abortable error, as a coordinator in trouble
// answers), so that their transactions abort with work in them: the tasks must drop that work
// (their store batches were not applied) and process the records again, and every count is
// still emitted exactly once. A store applied before its transaction commits, or a task that
// kept its aborted writes, would count twice.
func TestAbortRevivesExactlyOnce(t *testing.T) {
	c, brokers := kfakeCluster(t)
	cfg := loadConfig(t, t.TempDir(), eosHCL())
	cl, adm := client(t, brokers)
	in := start(t, cfg, brokers)
	ref := map[string]int{}
	feed(t, cl, ref, 300, 40)
	topics, err := adm.ListTopics(context.Background(), "wc-words-repartition")
	if err != nil {
		t.Fatal(err)
	}
	words := topics["wc-words-repartition"].ID // the request names topics by ID (v6) or name
	waitCounts(t, brokers, "word-counts", wordgen.Strings(ref))

	const refusals = 3
	var refused atomic.Int32
	c.ControlKey(int16(kmsg.TxnOffsetCommit), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		req := kreq.(*kmsg.TxnOffsetCommitRequest)
		counted := slices.ContainsFunc(req.Topics, func(rt kmsg.TxnOffsetCommitRequestTopic) bool {
			return rt.Topic == "wc-words-repartition" || rt.TopicID == words
		})
		if !counted || refused.Load() >= refusals {
			return nil, nil, false
		}
		if refused.Add(1) < refusals {
			c.KeepControl()
		}
		resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewTxnOffsetCommitResponseTopic()
			st.Topic, st.TopicID = rt.Topic, rt.TopicID
			for _, rp := range rt.Partitions {
				sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = kerr.ConcurrentTransactions.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	for i := range 10 {
		feed(t, cl, ref, 100, 50+i)
		time.Sleep(50 * time.Millisecond)
	}
	waitCounts(t, brokers, "word-counts", wordgen.Strings(ref))
	if err := in.stop(t); err != nil {
		t.Fatal(err)
	}
	if n := refused.Load(); n != refusals {
		t.Fatalf("the broker refused %d commits, want %d", n, refusals)
	}
	checkExactlyOnce(t, brokers, ref)
}

// TestMembershipCheck: a transaction without input offsets (a plugin's init wrote, nothing was
// consumed) is not checked against the group generation by the offset commit, so the runtime
// checks its membership first. Once the coordinator has forgotten the member (as after its
// session timed out while it was paused), the check fails and nothing may commit.
func TestMembershipCheck(t *testing.T) {
	brokers := cluster(t)
	cfg := loadConfig(t, t.TempDir(), eosHCL())
	in := start(t, cfg, brokers)
	waitFor(t, 60*time.Second, "the tasks to run", func() bool { return running(in.rt) == 7 })
	ctx := context.Background()
	if err := in.rt.eos.checkMembership(ctx); err != nil {
		t.Fatalf("a member of the current generation fails the check: %v", err)
	}
	member, _ := in.rt.kafka.consumer.GroupMetadata()
	cl, _ := client(t, brokers)
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Group = "wc"
	m := kmsg.NewLeaveGroupRequestMember()
	m.MemberID = member
	leave.Members = append(leave.Members, m)
	resp, err := leave.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		t.Fatalf("remove the member from the group: %v", err)
	}
	err = in.rt.eos.checkMembership(ctx)
	if !errors.Is(err, kerr.UnknownMemberID) && !errors.Is(err, kerr.IllegalGeneration) {
		t.Fatalf("check after the member was removed: %v, want UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION", err)
	}
	// The instance notices, rejoins and runs its tasks again.
	waitFor(t, 60*time.Second, "the instance to rejoin", func() bool {
		return running(in.rt) == 7 && in.rt.eos.checkMembership(ctx) == nil
	})
	if err := in.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestStaleTaskRestores: franz-go's transactional session drops a second revocation that
// comes before the transaction ends, so a partition can be assigned again while this instance
// still holds its task, which may be behind what another owner committed meanwhile. The task
// must close and restore before it processes again.
func TestStaleTaskRestores(t *testing.T) {
	brokers := cluster(t)
	cfg := loadConfig(t, t.TempDir(), eosHCL())
	cl, _ := client(t, brokers)
	in := start(t, cfg, brokers)
	ref := map[string]int{}
	feed(t, cl, ref, 300, 60)
	waitCounts(t, brokers, "word-counts", wordgen.Strings(ref))
	restores := func() int {
		in.events.mu.Lock()
		defer in.events.mu.Unlock()
		n := 0
		for _, ev := range in.events.ends {
			if ev.Store == "counts" && ev.Partition == 1 {
				n++
			}
		}
		return n
	}
	before := restores()
	// The group hands partition 1 of the repartition topic over again, without a revocation.
	in.rt.onAssigned(context.Background(), in.rt.kafka.consumer, map[string][]int32{"wc-words-repartition": {1}})
	waitFor(t, 30*time.Second, "the stale task to restore again", func() bool { return restores() > before })
	waitFor(t, 30*time.Second, "the tasks to run", func() bool { return running(in.rt) == 7 })
	feed(t, cl, ref, 300, 61)
	waitCounts(t, brokers, "word-counts", wordgen.Strings(ref))
	if err := in.stop(t); err != nil {
		t.Fatal(err)
	}
	checkExactlyOnce(t, brokers, ref)
}

// TestSharedInputRebalancesExactlyOnce: under exactly_once, slowcount reads x, count reads x
// and z, probe reads z: the three tasks of a partition are linked through the partitions they
// share, so they start together and commit together, at the same record of each (else one
// that committed alone would process records again after an abort). Some records make
// slowcount's or probe's jobs slow (the loop polls meanwhile, and the others hold what comes),
// and instances join and leave while records flow: each rebalance waits for a commit of the
// open work, which must come even when it arrives while the tasks hold records (it once never
// came: the waiting loop started no job, and tasks holding records were never settled). Every
// count is emitted exactly once.
func TestSharedInputRebalancesExactlyOnce(t *testing.T) {
	brokers := cluster(t)
	src := `
application_id       = "shared"
state_dir            = "state"
processing_guarantee = "exactly_once"
admin { listen = "" }
topic "x" {
  partitions = 4
}
topic "z" {
  partitions = 4
}
processor "slowcount" {
  module  = "{{slowcount}}"
  inputs  = ["x"]
  outputs = ["x-counts"]
  store "tallies" {}
}
processor "count" {
  module  = "{{count}}"
  inputs  = ["x", "z"]
  outputs = ["xz-counts"]
  store "counts" {}
}
processor "probe" {
  module = "{{probe}}"
  inputs = ["z"]
  store "s" {}
}
`
	cl, _ := client(t, brokers)
	a := start(t, loadConfig(t, t.TempDir(), src), brokers)
	waitFor(t, 60*time.Second, "the first instance to run its tasks", func() bool { return running(a.rt) == 12 })

	xRef, xzRef := map[string]int{}, map[string]int{}
	done, fed := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(fed)
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-time.After(10 * time.Millisecond):
			}
			var recs []*kgo.Record
			for j := range 10 {
				xv, zv := "x", "z"
				if j == 0 && i%7 == 0 {
					xv = "slow" // a slow job of slowcount's
				}
				if j == 1 && i%11 == 0 {
					zv = "get 300000" // a slow job of probe's
				}
				xk, zk := fmt.Sprintf("x%d", (i*10+j)%20), fmt.Sprintf("z%d", (i*10+j)%20)
				recs = append(recs, &kgo.Record{Topic: "x", Key: []byte(xk), Value: []byte(xv)},
					&kgo.Record{Topic: "z", Key: []byte(zk), Value: []byte(zv)})
				xRef[xk]++
				xzRef[xk]++
				xzRef[zk]++
			}
			if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
				t.Errorf("produce: %v", err)
				return
			}
		}
	}()
	for round := range 3 {
		b := start(t, loadConfig(t, t.TempDir(), src), brokers)
		waitFor(t, 60*time.Second, fmt.Sprintf("round %d: the joining instance to run tasks", round), func() bool { return running(b.rt) > 0 })
		time.Sleep(300 * time.Millisecond) // it processes some records
		if err := b.stop(t); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 60*time.Second, fmt.Sprintf("round %d: the first instance to take every task back", round), func() bool { return running(a.rt) == 12 })
	}
	close(done)
	<-fed
	waitCounts(t, brokers, "x-counts", wordgen.Strings(xRef))
	waitCounts(t, brokers, "xz-counts", wordgen.Strings(xzRef))
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}
	checkOutputsOnce(t, brokers, "x-counts", xRef)
	checkOutputsOnce(t, brokers, "xz-counts", xzRef)
}
