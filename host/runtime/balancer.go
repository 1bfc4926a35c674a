package runtime

import (
	"cmp"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// taskBalancer is the group balancer of statehost: it assigns whole tasks, not topic
// partitions. Topics that a processor reads together are co-partitioned, and partition N of
// every such topic goes to one member, since task N of the processor reads all of them (a
// topic-partition balancer such as cooperative-sticky would split them, and two instances
// would then run the same task on the same changelog partition). Topics linked through
// several processors (X reads a and b, Y reads b and c) form one group.
//
// It is sticky (a member keeps the units it owns, up to its fair share) and cooperative: a
// unit that moves is first revoked from its owner, and given to its new owner in the
// follow-up rebalance (BalancePlan.AdjustCooperative). Lag-aware placement and standbys are
// for the scale-out issue.
type taskBalancer struct {
	group map[string]string // topic -> the name of its co-partition group
}

// newTaskBalancer groups the input topics of procs: topics read by one processor share a
// group, transitively.
func newTaskBalancer(procs []*processor) *taskBalancer {
	parent := make(map[string]string)
	var find func(string) string
	find = func(t string) string {
		if p, ok := parent[t]; ok && p != t {
			root := find(p)
			parent[t] = root
			return root
		}
		parent[t] = t
		return t
	}
	for _, p := range procs {
		first := find(p.cfg.Inputs[0])
		for _, in := range p.cfg.Inputs[1:] {
			a, b := first, find(in)
			if a != b {
				if b < a {
					a, b = b, a
				}
				parent[b] = a
				first = a
			}
		}
	}
	group := make(map[string]string, len(parent))
	for t := range parent {
		group[t] = find(t)
	}
	return &taskBalancer{group: group}
}

// ProtocolName names the protocol; every member of the group must speak it.
func (*taskBalancer) ProtocolName() string { return "statehost-tasks" }

// IsCooperative is true: members keep what they own across rebalances.
func (*taskBalancer) IsCooperative() bool { return true }

// JoinGroupMetadata is the consumer protocol's metadata with the owned partitions, as the
// cooperative-sticky balancer sends it.
func (*taskBalancer) JoinGroupMetadata(interests []string, current map[string][]int32, generation int32) []byte {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 3
	meta.Topics = interests
	meta.Generation = generation
	for topic, parts := range current {
		owned := kmsg.NewConsumerMemberMetadataOwnedPartition()
		owned.Topic = topic
		owned.Partitions = parts
		meta.OwnedPartitions = append(meta.OwnedPartitions, owned)
	}
	sort.Slice(meta.OwnedPartitions, func(i, j int) bool { return meta.OwnedPartitions[i].Topic < meta.OwnedPartitions[j].Topic })
	return meta.AppendTo(nil)
}

// ParseSyncAssignment parses the consumer protocol's assignment.
func (*taskBalancer) ParseSyncAssignment(assignment []byte) (map[string][]int32, error) {
	return kgo.ParseConsumerSyncAssignment(assignment)
}

// MemberBalancer parses the members' metadata for Balance.
func (b *taskBalancer) MemberBalancer(members []kmsg.JoinGroupResponseMember) (kgo.GroupMemberBalancer, map[string]struct{}, error) {
	cb, err := kgo.NewConsumerBalancer(b, members)
	if err != nil {
		return nil, nil, err
	}
	return cb, cb.MemberTopics(), nil
}

// unit is what the balancer moves: partition part of every topic of a group.
type unit struct {
	group string
	part  int32
}

// Balance assigns the units of topics to the members.
func (b *taskBalancer) Balance(cb *kgo.ConsumerBalancer, topics map[string]int32) kgo.IntoSyncAssignment {
	groupOf := func(t string) string {
		if g, ok := b.group[t]; ok {
			return g
		}
		return t // a topic only another member's configuration knows: a group of its own
	}
	groups := make(map[string][]string)
	for t := range topics {
		groups[groupOf(t)] = append(groups[groupOf(t)], t)
	}
	var units []unit
	for g, ts := range groups {
		slices.Sort(ts)
		var n int32
		for _, t := range ts {
			n = max(n, topics[t])
		}
		for p := range n {
			units = append(units, unit{g, p})
		}
	}
	slices.SortFunc(units, func(a, b unit) int { return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(a.part, b.part)) })

	// The members, their interests, and the units they own now (the highest generation's
	// claim wins a unit claimed twice).
	type member struct {
		m         *kmsg.JoinGroupResponseMember
		interests map[string]bool
		load      int
	}
	var members []*member
	owner := make(map[unit]*member)
	ownerGen := make(map[unit]int32)
	cb.EachMember(func(m *kmsg.JoinGroupResponseMember, meta *kmsg.ConsumerMemberMetadata) {
		mb := &member{m: m, interests: make(map[string]bool, len(meta.Topics))}
		for _, t := range meta.Topics {
			mb.interests[t] = true
		}
		members = append(members, mb)
		for _, o := range meta.OwnedPartitions {
			for _, p := range o.Partitions {
				u := unit{groupOf(o.Topic), p}
				if cur, ok := owner[u]; !ok || meta.Generation > ownerGen[u] || (meta.Generation == ownerGen[u] && cur.m.MemberID > m.MemberID) {
					owner[u], ownerGen[u] = mb, meta.Generation
				}
			}
		}
	})
	eligible := func(mb *member, u unit) bool {
		for _, t := range groups[u.group] {
			if mb.interests[t] {
				return true
			}
		}
		return false
	}

	// Sticky pass: an owner keeps its units up to the fair share (rounded up); then the rest
	// go to the least loaded eligible member, in order.
	limit := (len(units) + len(members) - 1) / max(len(members), 1)
	assign := make(map[unit]*member, len(units))
	var free []unit
	for _, u := range units {
		if o := owner[u]; o != nil && o.load < limit && eligible(o, u) {
			assign[u] = o
			o.load++
			continue
		}
		free = append(free, u)
	}
	for _, u := range free {
		var best *member
		for _, mb := range members {
			if eligible(mb, u) && (best == nil || mb.load < best.load) {
				best = mb
			}
		}
		if best != nil {
			assign[u] = best
			best.load++
		}
	}
	// Even out: while a member has two more units than another, move one (the owners kept up
	// to the rounded-up share, so a newcomer may still be short).
	for {
		var hi, lo *member
		for _, mb := range members {
			if hi == nil || mb.load > hi.load {
				hi = mb
			}
			if lo == nil || mb.load < lo.load {
				lo = mb
			}
		}
		if hi == nil || hi.load-lo.load <= 1 {
			break
		}
		moved := false
		for i := len(units) - 1; i >= 0 && !moved; i-- {
			if u := units[i]; assign[u] == hi && eligible(lo, u) {
				assign[u] = lo
				hi.load--
				lo.load++
				moved = true
			}
		}
		if !moved {
			break
		}
	}

	plan := cb.NewPlan()
	for _, u := range units {
		mb := assign[u]
		if mb == nil {
			continue
		}
		for _, t := range groups[u.group] {
			if u.part < topics[t] && mb.interests[t] {
				plan.AddPartition(mb.m, t, u.part)
			}
		}
	}
	plan.AdjustCooperative(cb)
	return plan
}
