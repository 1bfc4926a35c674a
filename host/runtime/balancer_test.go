package runtime

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/statehost/statehost/config"
)

// balance runs b over members (member id -> owned partitions, nil for a newcomer) and returns
// the assignment, member id -> topic -> partitions.
func balance(t *testing.T, b *taskBalancer, topics map[string]int32, gen int32, members map[string]map[string][]int32) map[string]map[string][]int32 {
	t.Helper()
	interests := make([]string, 0, len(topics))
	for topic := range topics {
		interests = append(interests, topic)
	}
	slices.Sort(interests)
	var jm []kmsg.JoinGroupResponseMember
	for _, id := range slices.Sorted(maps.Keys(members)) {
		jm = append(jm, kmsg.JoinGroupResponseMember{MemberID: id, ProtocolMetadata: b.JoinGroupMetadata(interests, members[id], gen)})
	}
	mb, _, err := b.MemberBalancer(jm)
	if err != nil {
		t.Fatal(err)
	}
	into, err := mb.(kgo.GroupMemberBalancerOrError).BalanceOrError(topics)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string][]int32{}
	for _, a := range into.IntoSyncAssignment() {
		got, err := b.ParseSyncAssignment(a.MemberAssignment)
		if err != nil {
			t.Fatal(err)
		}
		out[a.MemberID] = got
	}
	return out
}

// unitsOf returns the units a member holds, as "group/partition", checking that it holds every
// topic of each.
func unitsOf(t *testing.T, groups map[string][]string, got map[string][]int32) []string {
	t.Helper()
	var us []string
	for g, topics := range groups {
		for _, p := range got[topics[0]] {
			for _, topic := range topics[1:] {
				if !slices.Contains(got[topic], p) {
					t.Errorf("partition %d of %s without %s-%d: a task split", p, topics[0], topic, p)
				}
			}
			us = append(us, fmt.Sprintf("%s/%d", g, p))
		}
	}
	slices.Sort(us)
	return us
}

// TestBalancerStickyCooperative checks the balancer over two co-partition groups ({a, b} read
// by one processor, {c} by another) as members join: units stay whole, shares are even, an
// owner keeps what it can, and a unit that moves is revoked first and handed over in the
// follow-up rebalance (cooperative).
func TestBalancerStickyCooperative(t *testing.T) {
	b := newTaskBalancer([]*procView{
		{cfg: &config.Processor{Name: "join", Inputs: []string{"b", "a"}}},
		{cfg: &config.Processor{Name: "count", Inputs: []string{"c"}}},
	})
	groups := map[string][]string{"a": {"a", "b"}, "c": {"c"}}
	topics := map[string]int32{"a": 6, "b": 6, "c": 3}

	// One member takes all nine units.
	first := balance(t, b, topics, -1, map[string]map[string][]int32{"m1": nil})
	if got := unitsOf(t, groups, first["m1"]); len(got) != 9 {
		t.Fatalf("one member got %v, want all 9 units", got)
	}

	// Two members join: m1 keeps three of its units, and gives none to the newcomers yet.
	second := balance(t, b, topics, 1, map[string]map[string][]int32{"m1": first["m1"], "m2": nil, "m3": nil})
	kept := unitsOf(t, groups, second["m1"])
	if len(kept) != 3 {
		t.Errorf("m1 keeps %v, want 3 units", kept)
	}
	if n := len(unitsOf(t, groups, second["m2"])) + len(unitsOf(t, groups, second["m3"])); n != 0 {
		t.Errorf("the newcomers got %d units in the round that revokes them from m1", n)
	}

	// The follow-up rebalance hands the revoked units over: three each, m1's unchanged.
	third := balance(t, b, topics, 2, map[string]map[string][]int32{"m1": second["m1"], "m2": second["m2"], "m3": second["m3"]})
	seen := map[string]string{}
	for _, m := range []string{"m1", "m2", "m3"} {
		us := unitsOf(t, groups, third[m])
		if len(us) != 3 {
			t.Errorf("%s holds %v, want 3 units", m, us)
		}
		for _, u := range us {
			if other, ok := seen[u]; ok {
				t.Errorf("unit %s on %s and %s", u, other, m)
			}
			seen[u] = m
		}
	}
	if len(seen) != 9 {
		t.Errorf("%d units assigned, want 9", len(seen))
	}
	if got := unitsOf(t, groups, third["m1"]); !slices.Equal(got, kept) {
		t.Errorf("m1 holds %v after the follow-up, want the units it kept %v", got, kept)
	}

	// A member leaves: its units go to the others, who keep theirs.
	fourth := balance(t, b, topics, 3, map[string]map[string][]int32{"m1": third["m1"], "m2": third["m2"]})
	for _, m := range []string{"m1", "m2"} {
		before, after := unitsOf(t, groups, third[m]), unitsOf(t, groups, fourth[m])
		for _, u := range before {
			if !slices.Contains(after, u) {
				t.Errorf("%s lost unit %s when another member left", m, u)
			}
		}
	}
	if n := len(unitsOf(t, groups, fourth["m1"])) + len(unitsOf(t, groups, fourth["m2"])); n != 9 {
		t.Errorf("after m3 left, %d units assigned, want 9", n)
	}
}
