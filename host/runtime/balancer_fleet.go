package runtime

import (
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/statehost/statehost/config"
)

// The fleet: what the group's balancer knows of the members' configurations, which differ
// while each instance reloads its own file (reload.go; docs/decisions/20261205_config_reload.md).
//
// Every member advertises the processors of its configuration in its join metadata
// (memberState.procs), each with its inputs and whether it runs it: a processor that a reload
// added waits (processor.pending) until the group enables it. The leader
//
//   - groups the topics by the processors of every member, not only its own, so that a
//     processor that reads two topics has their partitions on one member wherever it runs;
//   - enables a processor that every member advertises, and keeps enabled one that a member
//     runs already: the group runs E = (advertised by all) + (run by one);
//   - gives a unit only to a member that has every processor of E reading one of its topics:
//     a processor that runs is never left without its task on a partition it reads (its
//     outputs would miss those records), and a member without it gets other units;
//   - tells every member E when some member advertises a processor outside it (a member
//     then creates tasks only for E: standbyAssignment.enabled); without that section every
//     member runs all of its processors.
//
// A member of an older statehost advertises nothing: it counts as having every processor,
// and enables nothing by itself.
type fleet struct {
	group   map[string]string   // topic -> its co-partition group, over every member's processors
	readers map[string][]string // topic -> the processors (of any member) that read it
	enabled map[string]bool     // E; nil when no member advertises its processors
	gated   bool                // a member advertises a processor outside E
}

// fleetOf reads the members' advertised processors, with this member's own.
func (b *taskBalancer) fleetOf(cb *kgo.ConsumerBalancer) *fleet {
	var states []memberState
	cb.EachMember(func(_ *kmsg.JoinGroupResponseMember, meta *kmsg.ConsumerMemberMetadata) {
		if s, err := decodeMemberState(meta.UserData); err == nil {
			states = append(states, s) // balanceMembers logs the ones it cannot read
		}
	})
	return newFleet(b.ownProcs(), states)
}

// newFleet is the fleet of the members' states, with own the processors of this member.
func newFleet(own []*procView, states []memberState) *fleet {
	inputs := map[string][]string{}
	for _, p := range own {
		inputs[p.cfg.Name] = p.cfg.Inputs
	}
	reporting := 0
	count := map[string]int{}
	running := map[string]bool{}
	for _, s := range states {
		if s.procs == nil {
			continue
		}
		reporting++
		for _, p := range s.procs {
			if _, ok := inputs[p.name]; !ok {
				inputs[p.name] = p.inputs
			}
			count[p.name]++
			running[p.name] = running[p.name] || p.enabled
		}
	}
	f := &fleet{readers: map[string][]string{}}
	var all []*procView
	for _, name := range slices.Sorted(maps.Keys(inputs)) {
		all = append(all, &procView{cfg: &config.Processor{Name: name, Inputs: inputs[name]}})
		for _, t := range inputs[name] {
			f.readers[t] = append(f.readers[t], name)
		}
	}
	f.group = coPartitionGroups(all)
	if reporting == 0 {
		return f
	}
	f.enabled = map[string]bool{}
	for name, n := range count {
		if n == reporting || running[name] {
			f.enabled[name] = true
		} else {
			f.gated = true
		}
	}
	return f
}

// groupOf returns the co-partition group of topic t.
func (f *fleet) groupOf(t string) string {
	if g, ok := f.group[t]; ok {
		return g
	}
	return t
}

// restrict narrows the eligibility of ams (members, in the same order) to the units whose
// enabled processors the member all has (groups: group -> its topics).
func (f *fleet) restrict(ams []*assignMember, members []*balanceMember, groups map[string][]string) []*assignMember {
	if f.enabled == nil {
		return ams
	}
	needs := map[string][]string{} // group -> the enabled processors that read one of its topics
	for g, topics := range groups {
		for _, t := range topics {
			for _, name := range f.readers[t] {
				if f.enabled[name] && !slices.Contains(needs[g], name) {
					needs[g] = append(needs[g], name)
				}
			}
		}
	}
	for i, am := range ams {
		procs := members[i].state.procs
		if procs == nil {
			continue // an older statehost: it runs what it runs
		}
		has := map[string]bool{}
		for _, p := range procs {
			has[p.name] = true
		}
		base := am.eligible
		am.eligible = func(u unit) bool {
			if !base(u) {
				return false
			}
			for _, name := range needs[u.group] {
				if !has[name] {
					return false
				}
			}
			return true
		}
	}
	return ams
}

// stamp adds E to every member's standby assignment when the members disagree.
func (f *fleet) stamp(extra map[string]standbyAssignment) {
	if !f.gated {
		return
	}
	enabled := slices.Sorted(maps.Keys(f.enabled))
	for id, sa := range extra {
		sa.gated, sa.enabled = true, enabled
		extra[id] = sa
	}
}
