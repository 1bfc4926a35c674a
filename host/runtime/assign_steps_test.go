package runtime

import (
	"reflect"
	"testing"
)

// lagMembers returns members that are eligible for every unit, with lags[i][u] the lag of
// member i on unit u (noLag when absent).
func lagMembers(lags ...map[unit]int64) []*assignMember {
	ms := make([]*assignMember, len(lags))
	for i, l := range lags {
		ms[i] = &assignMember{eligible: func(unit) bool { return true }, lag: func(u unit) int64 { return l[u] }}
	}
	return ms
}

// TestPlaceActivesWarmups: units whose desired owner is behind stay with their previous
// owner, and at most maxWarmups of them start a warmup on it; a unit without a desired owner
// gets no active member.
func TestPlaceActivesWarmups(t *testing.T) {
	units := []unit{{"a", 0}, {"a", 1}, {"a", 2}, {"a", 3}}
	behind := map[unit]int64{units[0]: 50000, units[1]: 50000, units[2]: 50000}
	members := lagMembers(nil, behind)
	owner := map[unit]int{units[0]: 0, units[1]: 0, units[2]: 0}
	desired := map[unit]int{units[0]: 1, units[1]: 1, units[2]: 1}
	a := assignment{active: map[unit]int{}, standby: map[int][]unit{}, warmup: map[int][]unit{}}
	standbyOf := placeActives(units, members, owner, desired, func(unit) bool { return true }, 10000, a)
	if want := map[unit]int{units[0]: 0, units[1]: 0, units[2]: 0}; !reflect.DeepEqual(a.active, want) {
		t.Errorf("active %v, want %v", a.active, want)
	}
	if want := map[int][]unit{1: units[:maxWarmups]}; !reflect.DeepEqual(a.warmup, want) {
		t.Errorf("warmups %v, want %v (at most maxWarmups = %d)", a.warmup, want, maxWarmups)
	}
	if want := map[unit][]int{units[0]: {1}, units[1]: {1}}; !reflect.DeepEqual(standbyOf, want) {
		t.Errorf("standbys %v, want the warmups %v", standbyOf, want)
	}
}

// TestPlaceStandbys: a unit's standby goes to the member with the least lag on it, then to the
// one with the fewest standbys (warmups included), never to its active member nor twice to one
// member; a warmup counts as one of the unit's standbys.
func TestPlaceStandbys(t *testing.T) {
	tie, lagged, warm2, warm3 := unit{"a", 0}, unit{"a", 1}, unit{"a", 2}, unit{"a", 3}
	units := []unit{tie, lagged, warm2, warm3}
	members := lagMembers(nil, map[unit]int64{lagged: 1}, map[unit]int64{lagged: 5})
	active := map[unit]int{tie: 0, lagged: 0, warm2: 0, warm3: 0}
	standbyOf := map[unit][]int{warm2: {1}, warm3: {1}} // two warmups on member 1
	stateful := func(unit) bool { return true }
	placeStandbys(units, members, active, standbyOf, stateful, 1)
	want := map[unit][]int{
		tie:    {2}, // no lag on either: 2 has fewer standbys than 1 and its two warmups
		lagged: {1}, // 1 is closer (1 record) than 2 (5), though it has more standbys
		warm2:  {1}, // the warmup is its standby
		warm3:  {1},
	}
	if !reflect.DeepEqual(standbyOf, want) {
		t.Errorf("standbys %v, want %v", standbyOf, want)
	}

	// More copies than other members: each other member gets one.
	standbyOf = map[unit][]int{}
	placeStandbys([]unit{tie}, members, active, standbyOf, stateful, 3)
	if want := map[unit][]int{tie: {1, 2}}; !reflect.DeepEqual(standbyOf, want) {
		t.Errorf("3 standbys over 3 members: %v, want %v", standbyOf, want)
	}
}
