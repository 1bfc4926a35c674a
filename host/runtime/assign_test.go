package runtime

import (
	"maps"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/statehost/statehost/changelog"
	"github.com/statehost/statehost/config"
)

// member is a group member as the lag-aware tests see it: what it owns and the state it reports.
type testMember struct {
	owned map[string][]int32
	state memberState
}

// result is a member's part of a rebalance.
type testResult struct {
	active  []int32 // partitions of "words"
	standby []int32
	warmup  []int32
}

// balanceLag runs a full rebalance of b through the consumer protocol: each member's join
// metadata carries its state, and each one's sync assignment is parsed back with its standbys.
func balanceLag(t *testing.T, b *taskBalancer, gen int32, members map[string]testMember) map[string]testResult {
	t.Helper()
	var jm []kmsg.JoinGroupResponseMember
	for _, id := range slices.Sorted(maps.Keys(members)) {
		m := members[id]
		b.state = func() memberState { return m.state }
		jm = append(jm, kmsg.JoinGroupResponseMember{MemberID: id, ProtocolMetadata: b.JoinGroupMetadata([]string{"words"}, m.owned, gen)})
	}
	b.state = nil
	mb, _, err := b.MemberBalancer(jm)
	if err != nil {
		t.Fatal(err)
	}
	into, err := mb.(kgo.GroupMemberBalancerOrError).BalanceOrError(map[string]int32{"words": 4})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]testResult{}
	for _, a := range into.IntoSyncAssignment() {
		var sa standbyAssignment
		b.onSync = func(s standbyAssignment, _ map[string][]int32) { sa = s }
		got, err := b.ParseSyncAssignment(a.MemberAssignment)
		if err != nil {
			t.Fatal(err)
		}
		r := testResult{active: got["words"], standby: sa.standby["words"], warmup: sa.warmup["words"]}
		slices.Sort(r.active)
		slices.Sort(r.standby)
		slices.Sort(r.warmup)
		out[a.MemberID] = r
	}
	b.onSync = nil
	return out
}

// lagBalancer is a balancer over one processor "count" reading "words" (4 partitions) with a
// logged store "counts", whose changelog partitions end at ends.
func lagBalancer(standbys int, ends map[int32]int64) *taskBalancer {
	b := newTaskBalancer([]*procView{{
		cfg:    &config.Processor{Name: "count", Inputs: []string{"words"}},
		stores: []changelog.StoreSpec{{Name: "counts"}},
	}})
	b.appID = "app"
	b.params = assignParams{standbys: standbys, acceptableLag: 10000}
	b.endOffsets = func(topics []string) (map[topicPartition]int64, error) {
		out := map[topicPartition]int64{}
		for p, end := range ends {
			out[topicPartition{"app-counts-changelog", p}] = end
		}
		return out, nil
	}
	return b
}

func offsets(kv ...int64) map[taskID]int64 {
	m := map[taskID]int64{}
	for i := 0; i < len(kv); i += 2 {
		m[taskID{Processor: "count", Partition: int32(kv[i])}] = kv[i+1]
	}
	return m
}

// TestBalancerWarmups: a task moves only to a member that is caught up; until then it stays
// where it runs and a warmup restores it on its future owner, which gets it in the rebalance
// after it caught up (through a standby while its owner revokes it).
func TestBalancerWarmups(t *testing.T) {
	b := lagBalancer(0, map[int32]int64{0: 50000, 1: 50000, 2: 50000, 3: 50000})
	m1 := testMember{owned: map[string][]int32{"words": {0, 1, 2, 3}}, state: memberState{offsets: offsets(0, offsetRunning, 1, offsetRunning, 2, offsetRunning, 3, offsetRunning)}}

	// m2 joins without state: 50000 records behind on each task.
	got := balanceLag(t, b, 1, map[string]testMember{"m1": m1, "m2": {}})
	if !slices.Equal(got["m1"].active, []int32{0, 1, 2, 3}) || len(got["m2"].active) != 0 {
		t.Fatalf("a member 50000 records behind took tasks: %+v", got)
	}
	if !slices.Equal(got["m2"].warmup, []int32{2, 3}) || !slices.Equal(got["m2"].standby, []int32{2, 3}) {
		t.Fatalf("m2 warms up %v (standbys %v), want the two tasks balance gives it: 2 and 3", got["m2"].warmup, got["m2"].standby)
	}
	if len(got["m1"].standby) != 0 {
		t.Errorf("m1 got standbys %v with standby_replicas = 0", got["m1"].standby)
	}

	// The warmups have not caught up (lag 20000): nothing moves.
	m2 := testMember{state: memberState{offsets: offsets(2, 30000, 3, 30000)}}
	got = balanceLag(t, b, 2, map[string]testMember{"m1": m1, "m2": m2})
	if len(got["m2"].active) != 0 || !slices.Equal(got["m2"].warmup, []int32{2, 3}) {
		t.Fatalf("warmups 20000 behind: %+v", got)
	}

	// Caught up (lag 5000 <= 10000): m1 revokes 2 and 3; m2 follows them as standbys meanwhile.
	m2.state = memberState{offsets: offsets(2, 45000, 3, 45000)}
	got = balanceLag(t, b, 3, map[string]testMember{"m1": m1, "m2": m2})
	if !slices.Equal(got["m1"].active, []int32{0, 1}) || len(got["m2"].active) != 0 || !slices.Equal(got["m2"].standby, []int32{2, 3}) {
		t.Fatalf("caught-up warmups, revocation round: %+v", got)
	}
	// The follow-up hands them over.
	m1.owned = map[string][]int32{"words": {0, 1}}
	m1.state = memberState{offsets: offsets(0, offsetRunning, 1, offsetRunning, 2, 50000, 3, 50000)}
	got = balanceLag(t, b, 4, map[string]testMember{"m1": m1, "m2": m2})
	if !slices.Equal(got["m1"].active, []int32{0, 1}) || !slices.Equal(got["m2"].active, []int32{2, 3}) || len(got["m2"].warmup) != 0 {
		t.Fatalf("follow-up: %+v", got)
	}
}

// TestBalancerStandbys: with standby_replicas = 1 each task has a standby on the other member;
// when a member dies, its tasks go to the member whose standbys are caught up, not to a
// newcomer that balance would prefer, and the newcomer warms up.
func TestBalancerStandbys(t *testing.T) {
	b := lagBalancer(1, map[int32]int64{0: 50000, 1: 50000, 2: 50000, 3: 50000})
	m1 := testMember{owned: map[string][]int32{"words": {0, 1}}, state: memberState{offsets: offsets(0, offsetRunning, 1, offsetRunning, 2, 49990, 3, 49990)}}
	m2 := testMember{owned: map[string][]int32{"words": {2, 3}}, state: memberState{offsets: offsets(2, offsetRunning, 3, offsetRunning, 0, 49990, 1, 49990)}}
	got := balanceLag(t, b, 1, map[string]testMember{"m1": m1, "m2": m2})
	if !slices.Equal(got["m1"].active, []int32{0, 1}) || !slices.Equal(got["m1"].standby, []int32{2, 3}) ||
		!slices.Equal(got["m2"].active, []int32{2, 3}) || !slices.Equal(got["m2"].standby, []int32{0, 1}) {
		t.Fatalf("two members, one standby each: %+v", got)
	}

	// m1 dies and m3 joins at once: m2 takes m1's tasks (its standbys are caught up); m3,
	// which balance wants to give them to, warms up and keeps standbys.
	got = balanceLag(t, b, 2, map[string]testMember{"m2": m2, "m3": {}})
	if !slices.Equal(got["m2"].active, []int32{0, 1, 2, 3}) {
		t.Fatalf("m2 active %v, want every task: its standbys are caught up", got["m2"].active)
	}
	if len(got["m3"].active) != 0 || len(got["m3"].warmup) != 2 || !slices.Equal(got["m3"].standby, []int32{0, 1, 2, 3}) {
		t.Fatalf("m3: %+v, want two warmups among standbys of every task", got["m3"])
	}

	// Without end offsets, a member without state is not caught up on tasks another member
	// runs: nothing moves to it yet.
	b.endOffsets = nil
	got = balanceLag(t, b, 3, map[string]testMember{"m1": {owned: map[string][]int32{"words": {0, 1, 2, 3}},
		state: memberState{offsets: offsets(0, offsetRunning, 1, offsetRunning, 2, offsetRunning, 3, offsetRunning)}}, "m5": {}})
	if !slices.Equal(got["m1"].active, []int32{0, 1, 2, 3}) || len(got["m5"].warmup) != 2 {
		t.Fatalf("without end offsets, a member without state joins one that runs everything: %+v", got)
	}

	// Without end offsets the most advanced member counts as caught up.
	b.endOffsets = nil
	got = balanceLag(t, b, 3, map[string]testMember{"m3": {}, "m4": {state: memberState{offsets: offsets(0, 50000, 1, 50000, 2, 50000, 3, 50000)}}})
	if !slices.Equal(got["m4"].active, []int32{0, 1, 2, 3}) {
		t.Fatalf("without end offsets, m4 (the only member with state) active %v, want every task", got["m4"].active)
	}
}

// TestMetaRoundTrip: the user data codecs read back what they write, and refuse garbage.
func TestMetaRoundTrip(t *testing.T) {
	ms := memberState{admin: "127.0.0.1:9464", offsets: offsets(0, offsetRunning, 7, 123456789)}
	got, err := decodeMemberState(ms.encode())
	if err != nil || got.admin != ms.admin || !maps.Equal(got.offsets, ms.offsets) {
		t.Fatalf("member state round trip: %+v, %v", got, err)
	}
	sa := standbyAssignment{standby: map[string][]int32{"a": {1, 2}, "b": {0}}, warmup: map[string][]int32{"a": {2}}}
	back, err := decodeStandbyAssignment(sa.encode())
	if err != nil || !maps.EqualFunc(back.standby, sa.standby, slices.Equal) || !maps.EqualFunc(back.warmup, sa.warmup, slices.Equal) {
		t.Fatalf("standby assignment round trip: %+v, %v", back, err)
	}
	for _, bad := range [][]byte{{9}, {metaVersion, 5}, append(ms.encode(), 0), ms.encode()[:5]} {
		if _, err := decodeMemberState(bad); err == nil {
			t.Errorf("decodeMemberState(%v) accepted garbage", bad)
		}
	}
	if _, err := decodeStandbyAssignment([]byte{metaVersion, 200}); err == nil {
		t.Error("decodeStandbyAssignment accepted garbage")
	}
}

// TestBalancerMarkers: under exactly-once a commit marker ends each non-empty changelog
// partition; a member whose stores applied every record is caught up even with
// acceptable_recovery_lag = 0, and one record short is not. Without end offsets there are no
// markers to leave out: a member without state stays behind one that runs the tasks.
func TestBalancerMarkers(t *testing.T) {
	b := lagBalancer(0, map[int32]int64{0: 50000, 1: 50000, 2: 50000, 3: 0})
	b.params.acceptableLag, b.params.markers = 0, true
	m1 := testMember{owned: map[string][]int32{"words": {0, 1, 2, 3}}, state: memberState{offsets: offsets(0, offsetRunning, 1, offsetRunning, 2, offsetRunning, 3, offsetRunning)}}
	// m2 applied partition 2 up to its last record (49998; the marker is 49999) and has
	// nothing of partition 3, whose changelog is empty.
	got := balanceLag(t, b, 1, map[string]testMember{"m1": m1, "m2": {state: memberState{offsets: offsets(2, 49999)}}})
	if !slices.Equal(got["m1"].active, []int32{0, 1}) || len(got["m2"].warmup) != 0 || !slices.Equal(got["m2"].standby, []int32{2, 3}) {
		t.Fatalf("a member caught up but for the markers: %+v, want 2 and 3 moving to m2 without warmups", got)
	}
	got = balanceLag(t, b, 1, map[string]testMember{"m1": m1, "m2": {state: memberState{offsets: offsets(2, 49998)}}})
	if !slices.Equal(got["m2"].warmup, []int32{2}) {
		t.Fatalf("a member one record short: %+v, want a warmup of 2 on m2", got)
	}
	b.endOffsets = nil
	got = balanceLag(t, b, 1, map[string]testMember{"m1": m1, "m2": {}})
	if !slices.Equal(got["m1"].active, []int32{0, 1, 2, 3}) {
		t.Fatalf("without end offsets under exactly-once, a member without state took tasks: %+v", got)
	}
}
