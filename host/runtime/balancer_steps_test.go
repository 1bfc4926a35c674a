package runtime

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/statehost/statehost/config"
)

// TestBalanceUnits: the topics of a co-partition group make one set of units, as many as the
// group's topic with the most partitions; a topic no processor here reads is a group of its
// own; the units come sorted by group then partition.
func TestBalanceUnits(t *testing.T) {
	b := newTaskBalancer([]*procView{
		{cfg: &config.Processor{Name: "join", Inputs: []string{"b", "a"}}},
		{cfg: &config.Processor{Name: "count", Inputs: []string{"c"}}},
	})
	groups, units := balanceUnits(map[string]int32{"b": 3, "a": 2, "c": 1, "x": 2}, b.groupOf)
	if want := map[string][]string{"a": {"a", "b"}, "c": {"c"}, "x": {"x"}}; !reflect.DeepEqual(groups, want) {
		t.Errorf("groups %v, want %v", groups, want)
	}
	want := []unit{{"a", 0}, {"a", 1}, {"a", 2}, {"c", 0}, {"x", 0}, {"x", 1}}
	if !reflect.DeepEqual(units, want) {
		t.Errorf("units %v, want %v", units, want)
	}
}

// TestUnitHosts: each member with an admin address publishes the partitions of its groups'
// first topics only; a member without one is left out.
func TestUnitHosts(t *testing.T) {
	b := newTaskBalancer([]*procView{
		{cfg: &config.Processor{Name: "join", Inputs: []string{"b", "a"}}},
		{cfg: &config.Processor{Name: "count", Inputs: []string{"c"}}},
	})
	groups := map[string][]string{"a": {"a", "b"}, "c": {"c"}}
	members := []*balanceMember{
		{m: &kmsg.JoinGroupResponseMember{MemberID: "m1"}, state: memberState{admin: "h1:8080"}},
		{m: &kmsg.JoinGroupResponseMember{MemberID: "m2"}},
	}
	final := map[string]map[string][]int32{
		"m1": {"a": {0, 1}, "b": {0, 1}, "c": {2}},
		"m2": {"a": {2}, "b": {2}, "c": {0, 1}},
	}
	got := unitHosts(members, final, groups, b.groupOf)
	want := map[string]map[string][]int32{"h1:8080": {"a": {0, 1}, "c": {2}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("hosts %v, want %v", got, want)
	}
}
