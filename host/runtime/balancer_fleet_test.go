package runtime

import (
	"maps"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/statehost/statehost/config"
)

// fleetMember is a member of a fleet test: the topics it consumes and the processors it
// advertises (nil: an older statehost, which advertises none).
type fleetMember struct {
	interests []string
	procs     []advertisedProc
}

// fleetResult is a member's part of a rebalance of a fleet test.
type fleetResult struct {
	assigned map[string][]int32
	sa       standbyAssignment
}

// balanceFleet runs a rebalance of b (the leader, with its own processors) over members,
// through the consumer protocol.
func balanceFleet(t *testing.T, b *taskBalancer, topics map[string]int32, members map[string]fleetMember) map[string]fleetResult {
	t.Helper()
	var jm []kmsg.JoinGroupResponseMember
	for _, id := range slices.Sorted(maps.Keys(members)) {
		m := members[id]
		b.state = func() memberState { return memberState{offsets: map[taskID]int64{}, procs: m.procs} }
		jm = append(jm, kmsg.JoinGroupResponseMember{MemberID: id, ProtocolMetadata: b.JoinGroupMetadata(m.interests, nil, 1)})
	}
	b.state = nil
	mb, _, err := b.MemberBalancer(jm)
	if err != nil {
		t.Fatal(err)
	}
	into, err := mb.(kgo.GroupMemberBalancerOrError).BalanceOrError(topics)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]fleetResult{}
	for _, a := range into.IntoSyncAssignment() {
		var r fleetResult
		b.onEnabled = func(s standbyAssignment) { r.sa = s }
		if r.assigned, err = b.ParseSyncAssignment(a.MemberAssignment); err != nil {
			t.Fatal(err)
		}
		out[a.MemberID] = r
	}
	b.onEnabled = nil
	return out
}

func proc(name string, enabled bool, inputs ...string) advertisedProc {
	return advertisedProc{name: name, inputs: inputs, enabled: enabled}
}

// partitionsOf counts the partitions of topic assigned in res, over its members.
func partitionsOf(res map[string]fleetResult, topic string) int {
	n := 0
	for _, r := range res {
		n += len(r.assigned[topic])
	}
	return n
}

// TestFleetEnables: a processor that a reload added on one member waits until every member
// advertises it; then the sync assignments stop naming what the group runs (everything), and
// once a member runs it, a member without it (an instance started from an older file) gets
// none of the partitions it reads.
func TestFleetEnables(t *testing.T) {
	b := newTaskBalancer([]*procView{{cfg: &config.Processor{Name: "tokenize", Inputs: []string{"sentences"}}}})
	topics := map[string]int32{"sentences": 4}
	in := []string{"sentences"}

	// m1 reloaded "tally" (pending); m2 did not yet: the group runs tokenize alone, and says so.
	res := balanceFleet(t, b, topics, map[string]fleetMember{
		"m1": {in, []advertisedProc{proc("tokenize", true, "sentences"), proc("tally", false, "sentences")}},
		"m2": {in, []advertisedProc{proc("tokenize", true, "sentences")}},
	})
	for id, r := range res {
		if !r.sa.gated || !slices.Equal(r.sa.enabled, []string{"tokenize"}) {
			t.Errorf("%s: sync names %v (gated %t), want [tokenize]", id, r.sa.enabled, r.sa.gated)
		}
		if len(r.assigned["sentences"]) != 2 {
			t.Errorf("%s: assigned %v, want 2 partitions: the pending tally restricts nothing", id, r.assigned)
		}
	}

	// m2 reloaded too: every member has tally, the group runs it, and the sync says nothing.
	res = balanceFleet(t, b, topics, map[string]fleetMember{
		"m1": {in, []advertisedProc{proc("tokenize", true, "sentences"), proc("tally", false, "sentences")}},
		"m2": {in, []advertisedProc{proc("tokenize", true, "sentences"), proc("tally", false, "sentences")}},
	})
	for id, r := range res {
		if r.sa.gated {
			t.Errorf("%s: sync names %v, want no list: every member runs all of its processors", id, r.sa.enabled)
		}
	}

	// m1 runs tally; m3 starts from an older file without it: m3 gets no partition tally reads.
	res = balanceFleet(t, b, topics, map[string]fleetMember{
		"m1": {in, []advertisedProc{proc("tokenize", true, "sentences"), proc("tally", true, "sentences")}},
		"m3": {in, []advertisedProc{proc("tokenize", true, "sentences")}},
	})
	if n := len(res["m1"].assigned["sentences"]); n != 4 || len(res["m3"].assigned["sentences"]) != 0 {
		t.Errorf("m1 got %v and m3 %v, want all 4 on m1, which runs tally", res["m1"].assigned, res["m3"].assigned)
	}

	// A member of an older statehost advertises nothing: it counts as having everything.
	res = balanceFleet(t, b, topics, map[string]fleetMember{
		"m1": {in, []advertisedProc{proc("tokenize", true, "sentences"), proc("tally", false, "sentences")}},
		"m4": {in, nil},
	})
	if res["m1"].sa.gated || len(res["m4"].assigned["sentences"]) != 2 {
		t.Errorf("with an older member: m1's sync %+v, m4 assigned %v; want tally run and the partitions shared", res["m1"].sa, res["m4"].assigned)
	}
}

// TestFleetGroups: the topics are grouped by the processors of every member, not only the
// leader's: a member's processor that reads two topics gets their partitions N together.
func TestFleetGroups(t *testing.T) {
	b := newTaskBalancer([]*procView{{cfg: &config.Processor{Name: "tokenize", Inputs: []string{"sentences"}}}})
	topics := map[string]int32{"sentences": 4, "clicks": 4}
	join := []advertisedProc{proc("tokenize", true, "sentences"), proc("join", true, "sentences", "clicks")}
	res := balanceFleet(t, b, topics, map[string]fleetMember{
		"m1": {[]string{"sentences", "clicks"}, join},
		"m2": {[]string{"sentences", "clicks"}, join},
	})
	for id, r := range res {
		if !slices.Equal(r.assigned["sentences"], r.assigned["clicks"]) || len(r.assigned["sentences"]) != 2 {
			t.Errorf("%s: assigned %v, want partitions N of sentences and clicks together", id, r.assigned)
		}
	}
	if partitionsOf(res, "clicks") != 4 {
		t.Errorf("clicks partitions assigned: %d, want 4", partitionsOf(res, "clicks"))
	}
}

// TestMetaFleetRoundTrip: the advertised processors and the enabled list read back as they
// were written, and a reader takes data without them (an older statehost's) as before.
func TestMetaFleetRoundTrip(t *testing.T) {
	ms := memberState{admin: "a:1", offsets: map[taskID]int64{}, procs: []advertisedProc{proc("tokenize", true, "sentences"), proc("tally", false, "sentences", "clicks")}}
	got, err := decodeMemberState(ms.encode())
	if err != nil || len(got.procs) != 2 || got.procs[1].name != "tally" || got.procs[1].enabled || !slices.Equal(got.procs[1].inputs, []string{"sentences", "clicks"}) || !got.procs[0].enabled {
		t.Fatalf("member state with processors: %+v, %v", got, err)
	}
	old := memberState{admin: "a:1", offsets: map[taskID]int64{}}
	if got, err := decodeMemberState(old.encode()); err != nil || got.procs != nil {
		t.Fatalf("member state without processors: %+v, %v; want procs nil", got, err)
	}
	sa := standbyAssignment{gated: true, enabled: []string{"tokenize"}}
	back, err := decodeStandbyAssignment(sa.encode())
	if err != nil || !back.gated || !slices.Equal(back.enabled, []string{"tokenize"}) {
		t.Fatalf("standby assignment with its enabled list: %+v, %v", back, err)
	}
	if back, err := decodeStandbyAssignment(standbyAssignment{}.encode()); err != nil || back.gated {
		t.Fatalf("standby assignment without the list: %+v, %v", back, err)
	}
}
