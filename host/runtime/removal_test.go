package runtime

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/config"
	"github.com/statehost/statehost/internal/kafkacluster"
	"github.com/statehost/statehost/internal/wordgen"
)

// TestRemovedLiveMember removes a live instance from the group while the input flows, twice,
// under both guarantees, the way a survivor does when it judges an instance dead: through a
// peerWatcher's remove (under exactly-once its producer fenced first, then LeaveGroup by its
// member and instance id). The judgement is wrong: the instance runs on. It must be fenced
// and join again; what it processed in the generation it lost commits nothing:
//   - exactly-once: its transaction aborts, and the counts stay exact;
//   - at-least-once: its offset commits fail (the group generation), so the group's committed
//     offsets never go back, and the counts lose nothing (records of the lost generation may
//     be counted twice).
//
// On Apache Kafka the removed member learns of its removal under both guarantees: at its next
// heartbeat, which loses its partitions, or under at-least-once at its next offset commit,
// which fails and fences it (franz-go then rejoins at once, keeping the partitions the new
// generation gives back). kfake may answer that heartbeat as if it were still a member, so
// that an at-least-once member joins again before the group is reassigned, keeping its
// partitions. On kfake, or with STATEHOST_TEST_KAFKA=1 on a 1-node Apache Kafka cluster.
func TestRemovedLiveMember(t *testing.T) {
	for _, guarantee := range []config.Guarantee{config.ExactlyOnce, config.AtLeastOnce} {
		t.Run(string(guarantee), func(t *testing.T) {
			var brokers []string
			if kafkacluster.Requested() {
				brokers = kafkacluster.Start(t, 1).Brokers()
			} else {
				brokers = cluster(t)
			}
			src := eosHCL()
			if guarantee == config.AtLeastOnce {
				src = fmt.Sprintf(wordcountHCL, "pebble", true)
			}
			cfgA := loadConfig(t, t.TempDir(), src)
			cfgB := loadConfig(t, t.TempDir(), src)
			cl, adm := client(t, brokers)
			ref := map[string]int{}
			backwards := watchCommitted(t, adm, cfgA.ApplicationID)
			a := start(t, cfgA, brokers)
			var mu sync.Mutex
			var kinds []EventKind // b's
			b := start(t, cfgB, brokers, func(o *Options) {
				o.OnEvent = func(e Event) {
					mu.Lock()
					defer mu.Unlock()
					switch e.Kind {
					case EventPartitionsLost, EventPartitionsRevoked, EventTransactionAborted, EventPartitionsAssigned, EventMemberFenced:
						kinds = append(kinds, e.Kind)
					}
				}
			})
			feed(t, cl, ref, 300, 1)
			waitFor(t, 60*time.Second, "both instances running tasks", func() bool { return running(a.rt) > 0 && running(b.rt) > 0 })
			pid, err := processID(StateDir(cfgB))
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			kinds = nil
			mu.Unlock()
			for i := range 2 {
				for j := range 5 {
					feed(t, cl, ref, 100, 10+10*i+j)
					time.Sleep(50 * time.Millisecond)
				}
				judge(t, cl, cfgB, cfgB.ApplicationID+"-"+pid)
				for j := range 5 {
					feed(t, cl, ref, 100, 15+10*i+j)
					time.Sleep(50 * time.Millisecond)
				}
				// Removed again while it joins, b would wait on kfake for a JoinGroup
				// answer that never comes (kfake drops a pending join it removes; Kafka
				// answers it UNKNOWN_MEMBER_ID), so each removal waits for b's return.
				waitFor(t, 60*time.Second, "instance b back in the group, running tasks", func() bool {
					return inStableGroup(adm, cfgB.ApplicationID, cfgB.ApplicationID+"-"+pid) &&
						running(b.rt) > 0 && running(a.rt)+running(b.rt) == 7
				})
			}
			if guarantee == config.ExactlyOnce {
				waitCounts(t, brokers, "word-counts", wordgen.Strings(ref))
			} else {
				// At least once: the records that b processed in the generation it lost
				// are processed again, and counted twice; none is lost.
				waitFor(t, 60*time.Second, "every count at least the reference's", func() bool { return countsAtLeast(t, brokers, ref) })
			}
			stopThenCheckOffsets(t, backwards, a, b)
			mu.Lock()
			t.Logf("instance b after its removals: %v", kinds)
			noticed := slices.ContainsFunc(kinds, func(k EventKind) bool {
				return k == EventPartitionsLost || k == EventTransactionAborted || k == EventMemberFenced
			})
			mu.Unlock()
			if (guarantee == config.ExactlyOnce || kafkacluster.Requested()) && !noticed {
				t.Errorf("instance b noticed no removal: its events %v, want its partitions lost, its transaction aborted or its commit fenced", kinds)
			}
			if guarantee == config.ExactlyOnce {
				checkExactlyOnce(t, brokers, ref)
			}
		})
	}
}

// judge removes the live member of instance id from cfg's group as a survivor that judged it
// dead does (peerWatcher.remove, with the fencing of its producer under exactly-once).
func judge(t *testing.T, cl *kgo.Client, cfg *config.Config, instance string) {
	t.Helper()
	w := newPeerWatcher(hclog.NewNullLogger(), cfg.ApplicationID, "the-test", "", cl)
	if cfg.Guarantee == config.ExactlyOnce {
		w.fence = transactionTimeout(cfg.CommitInterval)
	}
	removed := false
	w.onRemove = func(peer, string) { removed = true }
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g, err := w.describe(ctx)
	if err != nil {
		t.Fatalf("describe the group: %v", err)
	}
	member, ok := g.members[instance]
	if !ok {
		t.Fatalf("instance %s is not in the group: %v", instance, g.members)
	}
	if !w.remove(ctx, peer{instance: instance, member: member}, w.log, "the test judged it dead") || !removed {
		t.Fatalf("instance %s (member %s) was not removed", instance, member)
	}
}

// watchCommitted polls the committed offsets of group until the test ends; the returned
// function stops it and says whether an offset ever went back (a commit of a fenced member
// that the group took).
func watchCommitted(t *testing.T, adm *kadm.Client, group string) func() error {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		high := map[string]map[int32]int64{}
		var backwards error
		for ctx.Err() == nil {
			offs, err := adm.FetchOffsets(ctx, group)
			if err == nil {
				offs.Each(func(o kadm.OffsetResponse) {
					if high[o.Topic] == nil {
						high[o.Topic] = map[int32]int64{}
					}
					if o.Err != nil {
						return
					}
					if h, ok := high[o.Topic][o.Partition]; ok && o.At < h && backwards == nil {
						backwards = fmt.Errorf("the committed offset of %s/%d went back from %d to %d", o.Topic, o.Partition, h, o.At)
					}
					high[o.Topic][o.Partition] = max(high[o.Topic][o.Partition], o.At)
				})
			}
			sleepCtx(ctx, 20*time.Millisecond)
		}
		done <- backwards
	}()
	stop := sync.OnceValue(func() error {
		cancel()
		return <-done
	})
	t.Cleanup(func() { stop() })
	return stop
}

// inStableGroup reports whether the group is stable with a member of the static instance id.
func inStableGroup(adm *kadm.Client, group, instanceID string) bool {
	gs, err := adm.DescribeGroups(context.Background(), group)
	if err != nil {
		return false
	}
	g, ok := gs[group]
	if !ok || g.Err != nil || g.State != "Stable" {
		return false
	}
	return slices.ContainsFunc(g.Members, func(m kadm.DescribedGroupMember) bool {
		return m.InstanceID != nil && *m.InstanceID == instanceID
	})
}

// TestFencedMemberRevokes removes a live at-least-once instance b from the group while no
// input flows, so that the survivor a takes all its partitions before b notices: b's
// heartbeats are slow. Then input flows; b, still consuming as a zombie, processes it, its
// offset commit fails (member_fenced), it keeps those offsets, and rejoins; its new
// generation revokes the partitions that a holds. From its fencing to that revocation b must
// commit no offsets (the test sees them through Options.beforeOffsetCommit): a commit that
// waited for the join would go out in b's new generation, which the group takes, and so
// would the revocation's, setting the offsets back to where b was if a had committed past
// them. The counts lose nothing and the group's committed offsets never go back. On kfake,
// or with STATEHOST_TEST_KAFKA=1 on a 1-node Apache Kafka cluster.
func TestFencedMemberRevokes(t *testing.T) {
	var brokers []string
	if kafkacluster.Requested() {
		brokers = kafkacluster.Start(t, 1).Brokers()
	} else {
		brokers = cluster(t)
	}
	src := fmt.Sprintf(wordcountHCL, "pebble", true)
	cfgA := loadConfig(t, t.TempDir(), src)
	cfgB := loadConfig(t, t.TempDir(), src)
	cfgB.RemoveDeadMembers = false // which heartbeats every 250ms
	cl, adm := client(t, brokers)
	ref := map[string]int{}
	backwards := watchCommitted(t, adm, cfgA.ApplicationID)
	a := start(t, cfgA, brokers)
	var (
		mu    sync.Mutex
		kinds []EventKind // b's, and "offsets <reason>" for each offset commit it begins
	)
	b := start(t, cfgB, brokers, func(o *Options) {
		o.SessionTimeout = 5 * time.Minute // a heartbeat every 30s: its commits notice first
		o.OnEvent = func(e Event) {
			mu.Lock()
			defer mu.Unlock()
			switch e.Kind {
			case EventPartitionsLost, EventPartitionsRevoked, EventMemberFenced:
				kinds = append(kinds, e.Kind)
			}
		}
		o.beforeOffsetCommit = func(why commitReason) {
			mu.Lock()
			defer mu.Unlock()
			kinds = append(kinds, EventKind("offsets "+why.String()))
		}
	})
	feed(t, cl, ref, 300, 1)
	waitFor(t, 60*time.Second, "both instances running tasks", func() bool { return running(a.rt) > 0 && running(b.rt) > 0 })
	pid, err := processID(StateDir(cfgB))
	if err != nil {
		t.Fatal(err)
	}
	lostFirst := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(kinds, EventPartitionsLost)
	}
	var afterFence []EventKind
	for attempt := 1; ; attempt++ {
		// b commits nothing more before the survivor holds its partitions: every record is
		// processed and committed.
		waitFor(t, 60*time.Second, "instance b in the group, running tasks", func() bool {
			return inStableGroup(adm, cfgB.ApplicationID, cfgB.ApplicationID+"-"+pid) && running(b.rt) > 0
		})
		waitFor(t, 60*time.Second, "every input committed", func() bool {
			lags, err := adm.Lag(context.Background(), cfgA.ApplicationID)
			if err != nil || lags.Error() != nil {
				return false
			}
			return lags[cfgA.ApplicationID].Lag.Total() == 0 && countsAtLeast(t, brokers, ref)
		})
		// franz-go heartbeats once 500ms after a cooperative session begins (and b's began
		// just now): past that one, b's next heartbeat is 30s away.
		time.Sleep(time.Second)
		mu.Lock()
		kinds = nil
		mu.Unlock()
		judge(t, cl, cfgB, cfgB.ApplicationID+"-"+pid)
		waitFor(t, 60*time.Second, "instance a running every task", func() bool { return running(a.rt) == 7 })
		feed(t, cl, ref, 100, 10*attempt)
		waitFor(t, 60*time.Second, "instance b fenced, then its partitions revoked, or lost", func() bool {
			mu.Lock()
			defer mu.Unlock()
			i := slices.Index(kinds, EventMemberFenced)
			if j := slices.Index(kinds[max(i, 0):], EventPartitionsRevoked); i >= 0 && j >= 0 {
				afterFence = slices.Clone(kinds[i : i+j+1])
				return true
			}
			return slices.Contains(kinds, EventPartitionsLost)
		})
		if afterFence != nil && !lostFirst() {
			break
		}
		// The heartbeat noticed first (the removal landed just before it), and the
		// partitions are lost: b is removed again once it is back.
		if attempt == 3 {
			t.Fatalf("instance b's heartbeat noticed its removal before a commit, %d times: its events %v", attempt, kinds)
		}
		afterFence = nil
	}
	if slices.ContainsFunc(afterFence, func(k EventKind) bool { return strings.HasPrefix(string(k), "offsets ") }) {
		t.Errorf("instance b committed offsets between its fencing and its revocation: %v", afterFence)
	}
	waitFor(t, 60*time.Second, "every count at least the reference's", func() bool { return countsAtLeast(t, brokers, ref) })
	stopThenCheckOffsets(t, backwards, a, b)
}

// stopThenCheckOffsets stops the instances, then reports an offset of the group that went
// back (the stop of watchCommitted).
func stopThenCheckOffsets(t *testing.T, backwards func() error, instances ...*instance) {
	t.Helper()
	for _, in := range instances {
		if err := in.stop(t); err != nil {
			t.Fatalf("Run: %v", err)
		}
	}
	if err := backwards(); err != nil {
		t.Error(err)
	}
}

// countsAtLeast reports whether every word's latest count in word-counts is at least ref's.
func countsAtLeast(t *testing.T, brokers []string, ref map[string]int) bool {
	got, _ := latest(t, brokers, "word-counts")
	for w, n := range ref {
		if c, err := strconv.Atoi(got[w]); err != nil || c < n {
			return false
		}
	}
	return true
}
