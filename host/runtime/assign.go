package runtime

import (
	"cmp"
	"math"
	"slices"
)

// This file is the balancer's decision, apart from the group protocol: which member runs each
// unit (active), which members keep standby copies of it, and where warmups start. It follows
// Kafka Streams' high-availability assignor:
//
//  1. A balanced, sticky placement is computed as if every member could take any unit at once
//     (placeBalanced): the "desired" owner of each unit.
//  2. A unit goes to its desired owner only when that member is caught up on the unit's state
//     (lag <= acceptable_recovery_lag), so that taking it costs a short restore. Otherwise it
//     stays with its previous owner, or goes to the least loaded caught-up member, and a warmup
//     starts on the desired owner: a standby that restores the unit's changelog there until it
//     has caught up, when a follow-up rebalance moves the unit. When no member is caught up,
//     the unit goes to the member with the least lag.
//  3. Each stateful unit gets standby copies on other members, preferring members that hold
//     most of its state, then the ones with the fewest standbys.

// maxWarmups bounds the warmups of one assignment (Kafka Streams' max.warmup.replicas): each
// restores a whole changelog while the active copy still runs elsewhere.
const maxWarmups = 2

// noLag is the lag of a member that runs a unit, or of any member on a unit without logged state.
const noLag = 0

// assignParams are the inputs of assignUnits besides the units and members.
type assignParams struct {
	standbys      int   // standby_replicas
	acceptableLag int64 // acceptable_recovery_lag
	// markers says that each changelog partition ends with a transaction marker
	// (exactly-once): the lag does not count it, since a store never applies it.
	markers bool
}

// assignMember is what assignUnits knows of a member.
type assignMember struct {
	id       string
	eligible func(unit) bool  // it reads at least one topic of the unit
	owned    map[unit]bool    // the units it owned before this rebalance
	lag      func(unit) int64 // records behind the end of the unit's changelogs; noLag when caught up
}

// assignment is the decision of one rebalance: an index into the members per unit.
type assignment struct {
	active  map[unit]int   // unit -> member; a unit without an eligible member is absent
	standby map[int][]unit // member -> its standby units, warmups included, in unit order
	warmup  map[int][]unit // member -> the standby units that are warmups
}

// assignUnits decides the assignment of units (sorted) over members; stateful reports whether a
// unit has logged state (only those get standbys and warmups).
func assignUnits(units []unit, members []*assignMember, stateful func(unit) bool, p assignParams) assignment {
	a := assignment{active: make(map[unit]int, len(units)), standby: map[int][]unit{}, warmup: map[int][]unit{}}
	if len(members) == 0 {
		return a
	}
	owner := previousOwners(members)
	desired := placeDesired(units, members, owner, stateful)
	standbyOf := placeActives(units, members, owner, desired, stateful, p.acceptableLag, a)
	placeStandbys(units, members, a.active, standbyOf, stateful, p.standbys)
	for _, u := range units {
		for _, i := range standbyOf[u] {
			a.standby[i] = append(a.standby[i], u)
		}
	}
	return a
}

// previousOwners returns the member (an index into members) that owned each unit before this
// rebalance; a unit two members claim goes to the first of them.
func previousOwners(members []*assignMember) map[unit]int {
	owner := make(map[unit]int)
	for i, m := range members {
		for u := range m.owned {
			if _, dup := owner[u]; !dup {
				owner[u] = i
			}
		}
	}
	return owner
}

// placeDesired returns the desired owner of each unit (step 1 above): the balanced, sticky
// placement, blind to lag. Stateful units are spread evenly on their own (the state and the
// restores spread with them), then stateless ones even out the total.
func placeDesired(units []unit, members []*assignMember, owner map[unit]int, stateful func(unit) bool) map[unit]int {
	var statefulUnits, stateless []unit
	for _, u := range units {
		if stateful(u) {
			statefulUnits = append(statefulUnits, u)
		} else {
			stateless = append(stateless, u)
		}
	}
	placed := make([]int, len(members))
	desired := placeBalanced(statefulUnits, members, owner, placed, len(statefulUnits))
	for u, i := range placeBalanced(stateless, members, owner, placed, len(units)) {
		desired[u] = i
	}
	// Members that read different topics (configurations in a rollout) can leave the
	// stateless pass uneven: even out over every unit then.
	evenOut(units, members, desired, placed)
	return desired
}

// placeActives picks the active member of each unit that has a desired owner (step 2 above),
// into a.active: the desired owner when its lag is at most acceptableLag; else the unit stays
// with its previous owner, or goes to the most caught-up member when that one is caught up
// or at least closer than the desired owner. A stateful unit that does not go to its desired
// owner starts a warmup there, into a.warmup, up to maxWarmups in all. It returns the warmups
// as the first standbys of their units (member indexes per unit).
func placeActives(units []unit, members []*assignMember, owner, desired map[unit]int, stateful func(unit) bool, acceptableLag int64, a assignment) map[unit][]int {
	load := make([]int, len(members))
	warmups := 0
	standbyOf := map[unit][]int{}
	caughtUp := func(i int, u unit) bool { return members[i].lag(u) <= acceptableLag }
	for _, u := range units {
		d, ok := desired[u]
		if !ok {
			continue // no member reads it
		}
		pick := d
		if !caughtUp(d, u) {
			prev, hasPrev := owner[u]
			switch best := mostCaughtUp(members, u, load); {
			case hasPrev && members[prev].eligible(u):
				pick = prev // it stays where it runs while the desired owner warms up
			case best >= 0 && caughtUp(best, u):
				pick = best
			case best >= 0 && members[best].lag(u) < members[d].lag(u):
				pick = best // nobody is caught up: the shortest restore
			}
			if pick != d && stateful(u) && warmups < maxWarmups {
				warmups++
				a.warmup[d] = append(a.warmup[d], u)
				standbyOf[u] = append(standbyOf[u], d)
			}
		}
		a.active[u] = pick
		load[pick]++
	}
	return standbyOf
}

// placeStandbys tops up standbyOf (member indexes per unit, the warmups already in it: a
// warmup counts as a standby) to standbys copies of each stateful unit of active (step 3
// above), on eligible members other than its active one: the member that holds most of its
// state (the least lag) first, so that a failover restores little, then the one with the
// fewest standbys, so that the copies spread. A unit gets fewer copies when there are not
// enough other members.
func placeStandbys(units []unit, members []*assignMember, active map[unit]int, standbyOf map[unit][]int, stateful func(unit) bool, standbys int) {
	standbyLoad := make([]int, len(members))
	for _, ms := range standbyOf {
		for _, i := range ms {
			standbyLoad[i]++
		}
	}
	for _, u := range units {
		act, ok := active[u]
		if !ok || !stateful(u) {
			continue
		}
		for len(standbyOf[u]) < standbys {
			best := -1
			for i, m := range members {
				if i == act || slices.Contains(standbyOf[u], i) || !m.eligible(u) {
					continue
				}
				if best < 0 || cmp.Or(cmp.Compare(m.lag(u), members[best].lag(u)), cmp.Compare(standbyLoad[i], standbyLoad[best])) < 0 {
					best = i
				}
			}
			if best < 0 {
				break // fewer other members than standby_replicas
			}
			standbyOf[u] = append(standbyOf[u], best)
			standbyLoad[best]++
		}
	}
}

// mostCaughtUp returns the eligible member with the least lag on u, the least loaded among
// equals; -1 when none is eligible.
func mostCaughtUp(members []*assignMember, u unit, load []int) int {
	best := -1
	var bestLag int64 = math.MaxInt64
	for i, m := range members {
		if !m.eligible(u) {
			continue
		}
		l := m.lag(u)
		if best < 0 || l < bestLag || (l == bestLag && load[i] < load[best]) {
			best, bestLag = i, l
		}
	}
	return best
}

// placeBalanced is the sticky, even placement of units, blind to lag, over the members' loads
// (the units placed before, which it raises): an owner keeps its units while its load is
// below the fair share of total units (rounded up); the rest go to the least loaded eligible
// member, in order; then, while a member has two more than another, one of units moves.
func placeBalanced(units []unit, members []*assignMember, owner map[unit]int, load []int, total int) map[unit]int {
	limit := (total + len(members) - 1) / len(members)
	place := make(map[unit]int, len(units))
	var free []unit
	for _, u := range units {
		if o, ok := owner[u]; ok && load[o] < limit && members[o].eligible(u) {
			place[u] = o
			load[o]++
			continue
		}
		free = append(free, u)
	}
	for _, u := range free {
		best := -1
		for i, m := range members {
			if m.eligible(u) && (best < 0 || load[i] < load[best]) {
				best = i
			}
		}
		if best >= 0 {
			place[u] = best
			load[best]++
		}
	}
	evenOut(units, members, place, load)
	return place
}

// evenOut moves units of place (the last first) while a member has two more than another and
// the less loaded one can take one of them.
func evenOut(units []unit, members []*assignMember, place map[unit]int, load []int) {
	for {
		hi, lo := 0, 0
		for i := range members {
			if load[i] > load[hi] {
				hi = i
			}
			if load[i] < load[lo] {
				lo = i
			}
		}
		if load[hi]-load[lo] <= 1 {
			return
		}
		moved := false
		for i := len(units) - 1; i >= 0 && !moved; i-- {
			u := units[i]
			if at, ok := place[u]; ok && at == hi && members[lo].eligible(u) {
				place[u] = lo
				load[hi]--
				load[lo]++
				moved = true
			}
		}
		if !moved {
			return
		}
	}
}
