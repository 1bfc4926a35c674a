package runtime

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/statehost/statehost/changelog"
	"github.com/statehost/statehost/restore"
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
// follow-up rebalance (BalancePlan.AdjustCooperative). It is lag-aware and places standbys and
// warmups (assign.go): each member reports the state it holds in its join metadata
// (memberState), and the leader compares it with the changelogs' end offsets.
type taskBalancer struct {
	mu     sync.Mutex        // guards group and procs, which a reload replaces (setProcs)
	group  map[string]string // topic -> the name of its co-partition group
	procs  []*procView       // this member's processors (view.go)
	appID  string
	params assignParams
	log    hclog.Logger

	// state is this member's report for its join metadata; nil reports none.
	state func() memberState
	// endOffsets lists the end offsets of changelog topics, for the leader; nil: the lag is
	// judged by the members' reports alone.
	endOffsets func(topics []string) (map[topicPartition]int64, error)
	// onSync receives this member's standby assignment of each rebalance, with its assigned
	// partitions; nil ignores it.
	onSync func(standbyAssignment, map[string][]int32)
	// onEnabled receives the processors the group runs (standbyAssignment.gated, enabled),
	// before onSync; nil ignores them (reload.go).
	onEnabled func(standbyAssignment)
}

// newTaskBalancer groups the input topics of procs: topics read by one processor share a
// group, transitively.
func newTaskBalancer(procs []*procView) *taskBalancer {
	return &taskBalancer{group: coPartitionGroups(procs), procs: procs, log: hclog.NewNullLogger()}
}

// setProcs makes procs the balancer's processors: a reload changed or added some (view.go).
func (b *taskBalancer) setProcs(procs []*procView) {
	group := coPartitionGroups(procs)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.procs, b.group = procs, group
}

// ownProcs returns the processors of this member's configuration.
func (b *taskBalancer) ownProcs() []*procView {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.procs
}

// coPartitionGroups returns the co-partition group of each input topic of procs: topics read
// by one processor share a group, transitively; a group is named by its least topic.
func coPartitionGroups(procs []*procView) map[string]string {
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
	return group
}

// ProtocolName names the protocol; every member of the group must speak it.
func (*taskBalancer) ProtocolName() string { return "statehost-tasks" }

// IsCooperative is true: members keep what they own across rebalances.
func (*taskBalancer) IsCooperative() bool { return true }

// JoinGroupMetadata is the consumer protocol's metadata with the owned partitions, as the
// cooperative-sticky balancer sends it, and this member's state (memberState) as user data.
func (b *taskBalancer) JoinGroupMetadata(interests []string, current map[string][]int32, generation int32) []byte {
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
	if b.state != nil {
		meta.UserData = b.state().encode()
	}
	return meta.AppendTo(nil)
}

// ParseSyncAssignment parses the consumer protocol's assignment, and hands the standby
// assignment in its user data to onSync.
func (b *taskBalancer) ParseSyncAssignment(assignment []byte) (map[string][]int32, error) {
	var ma kmsg.ConsumerMemberAssignment
	if err := ma.ReadFrom(assignment); err != nil {
		return nil, fmt.Errorf("sync assignment parse failed: %w", err)
	}
	out := make(map[string][]int32, len(ma.Topics))
	for _, t := range ma.Topics {
		out[t.Topic] = append(out[t.Topic], t.Partitions...)
	}
	sa, err := decodeStandbyAssignment(ma.UserData)
	if err != nil {
		b.log.Warn("cannot read the standby assignment; this member keeps no standbys until the next rebalance", "error", err)
	}
	if b.onEnabled != nil {
		b.onEnabled(sa)
	}
	if b.onSync != nil {
		b.onSync(sa, out)
	}
	return out, nil
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

// Balance assigns the units of topics to the members: active units as partitions, standbys
// and warmups in each member's assignment user data.
//
// The members' configurations may differ (a reload on some of them, a rollout): the topics are
// grouped by the processors of all of them, and a member runs a unit only when it has every
// processor the group runs that reads one of the unit's topics (fleet, balancer_fleet.go).
func (b *taskBalancer) Balance(cb *kgo.ConsumerBalancer, topics map[string]int32) kgo.IntoSyncAssignment {
	fl := b.fleetOf(cb)
	groups, units := balanceUnits(topics, fl.groupOf)
	members := b.balanceMembers(cb, fl.groupOf)
	lag := b.lags(units, topics, fl.groupOf, func(yield func(memberState) bool) {
		for _, mb := range members {
			if !yield(mb.state) {
				return
			}
		}
	})
	a := assignUnits(units, fl.restrict(assignMembers(members, groups, lag), members, groups), lag.stateful, b.params)

	plan := cb.NewPlan()
	for _, u := range units {
		if i, ok := a.active[u]; ok {
			for _, t := range members[i].topicsOf(u, groups, topics) {
				plan.AddPartition(members[i].m, t, u.part)
			}
		}
	}
	plan.AdjustCooperative(cb)

	// Each member's standbys and warmups. A unit that moves is first revoked from its owner
	// (AdjustCooperative) and handed to its new owner in the follow-up rebalance: meanwhile its
	// new owner follows its changelog as a standby, so that it starts warm.
	final := plan.AsMemberIDMap()
	hosts := unitHosts(members, final, groups, fl.groupOf)
	extra := standbyAssignments(members, units, a, lag, final, hosts, groups, topics)
	fl.stamp(extra)
	b.log.Debug("balanced", "members", len(members), "units", len(units), "warmups", len(a.warmup), "plan", plan.String())
	return syncPlan{plan: plan, extra: extra}
}

// groupOf returns the co-partition group of topic t.
func (b *taskBalancer) groupOf(t string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if g, ok := b.group[t]; ok {
		return g
	}
	return t // a topic only another member's configuration knows: a group of its own
}

// balanceUnits groups topics (topic -> partition count) by co-partition group, with groupOf,
// and returns each group's topics, sorted, and the units, sorted by group then partition. A
// group has as many units as its topic with the most partitions, so that every partition of
// every topic belongs to a unit even when the group's topics disagree (topicsOf leaves out
// the partitions a topic lacks).
func balanceUnits(topics map[string]int32, groupOf func(string) string) (map[string][]string, []unit) {
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
	return groups, units
}

// balanceMember is a member of the group as Balance sees it: its join metadata, its
// interests, its state, and the units it owns now.
type balanceMember struct {
	m         *kmsg.JoinGroupResponseMember
	interests map[string]bool
	state     memberState
	owned     map[unit]bool
}

// balanceMembers reads the members' join metadata: their interests, their state (a member
// whose state cannot be read counts as stateless, which is logged), and the units they own
// now. A unit that two members claim (a member that missed a rebalance still claims what it
// had) goes to the claim of the highest generation, then to the lowest member id, so that it
// has one previous owner.
func (b *taskBalancer) balanceMembers(cb *kgo.ConsumerBalancer, groupOf func(string) string) []*balanceMember {
	var members []*balanceMember
	owner := make(map[unit]*balanceMember)
	ownerGen := make(map[unit]int32)
	cb.EachMember(func(m *kmsg.JoinGroupResponseMember, meta *kmsg.ConsumerMemberMetadata) {
		mb := &balanceMember{m: m, interests: make(map[string]bool, len(meta.Topics)), owned: map[unit]bool{}}
		for _, t := range meta.Topics {
			mb.interests[t] = true
		}
		var err error
		if mb.state, err = decodeMemberState(meta.UserData); err != nil {
			b.log.Warn("cannot read a member's state; it counts as stateless", "member", m.MemberID, "error", err)
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
	for u, mb := range owner {
		mb.owned[u] = true
	}
	return members
}

// topicsOf returns the topics of u's group (groups: group -> its topics) that mb reads and
// that have partition u.part (topics: topic -> partition count): the partitions that mb gets
// for u.
func (mb *balanceMember) topicsOf(u unit, groups map[string][]string, topics map[string]int32) []string {
	var ts []string
	for _, t := range groups[u.group] {
		if u.part < topics[t] && mb.interests[t] {
			ts = append(ts, t)
		}
	}
	return ts
}

// assignMembers returns what assignUnits knows of members, in the same order: a member is
// eligible for a unit when it reads one of the unit's topics (groups: group -> its topics),
// and its lag on a unit is lag's judgement of its reported state.
func assignMembers(members []*balanceMember, groups map[string][]string, lag unitLags) []*assignMember {
	ams := make([]*assignMember, len(members))
	for i, mb := range members {
		ams[i] = &assignMember{
			id:    mb.m.MemberID,
			owned: mb.owned,
			eligible: func(u unit) bool {
				for _, t := range groups[u.group] {
					if mb.interests[t] {
						return true
					}
				}
				return false
			},
			lag: func(u unit) int64 { return lag.of(mb.state, u) },
		}
	}
	return ams
}

// unitHosts returns who runs what, for interactive queries: admin address -> the partitions
// of final (member id -> topic -> partitions) of each group's first topic, which stand for
// its units (the map goes to every member: keep it small). A member without an admin address
// answers no queries and is left out.
func unitHosts(members []*balanceMember, final map[string]map[string][]int32, groups map[string][]string, groupOf func(string) string) map[string]map[string][]int32 {
	hosts := map[string]map[string][]int32{}
	for _, mb := range members {
		if mb.state.admin == "" {
			continue
		}
		tps := map[string][]int32{}
		for t, parts := range final[mb.m.MemberID] {
			if groups[groupOf(t)][0] == t {
				tps[t] = parts
			}
		}
		hosts[mb.state.admin] = tps
	}
	return hosts
}

// standbyAssignments returns each member's standby assignment, by member id: its standbys
// and warmups of a, as partitions of the topics it reads, plus, as standbys, the stateful
// units a gives it that the final plan does not yet (AdjustCooperative holds them back
// while their owner revokes them), so that it follows their changelogs meanwhile. Each one
// carries hosts, who runs what.
func standbyAssignments(members []*balanceMember, units []unit, a assignment, lag unitLags, final, hosts map[string]map[string][]int32, groups map[string][]string, topics map[string]int32) map[string]standbyAssignment {
	add := func(mb *balanceMember, u unit, into map[string][]int32) {
		for _, t := range mb.topicsOf(u, groups, topics) {
			into[t] = append(into[t], u.part)
		}
	}
	extra := make(map[string]standbyAssignment, len(members))
	for i, mb := range members {
		sa := standbyAssignment{standby: map[string][]int32{}, warmup: map[string][]int32{}, hosts: hosts}
		for _, u := range a.standby[i] {
			add(mb, u, sa.standby)
		}
		for _, u := range a.warmup[i] {
			add(mb, u, sa.warmup)
		}
		for _, u := range units {
			if j, ok := a.active[u]; ok && j == i && lag.stateful(u) && !holds(final[mb.m.MemberID], groups[u.group], u.part) {
				add(mb, u, sa.standby)
			}
		}
		extra[mb.m.MemberID] = sa
	}
	return extra
}

// holds reports whether assigned has partition part of one of topics.
func holds(assigned map[string][]int32, topics []string, part int32) bool {
	for _, t := range topics {
		if slices.Contains(assigned[t], part) {
			return true
		}
	}
	return false
}

// syncPlan is a balance plan with each member's standby assignment in its user data.
type syncPlan struct {
	plan  *kgo.BalancePlan
	extra map[string]standbyAssignment
}

func (s syncPlan) IntoSyncAssignment() []kmsg.SyncGroupRequestGroupAssignment {
	out := s.plan.IntoSyncAssignment()
	for i := range out {
		var ma kmsg.ConsumerMemberAssignment
		if err := ma.ReadFrom(out[i].MemberAssignment); err != nil {
			continue // cannot happen: the plan encoded it
		}
		ma.UserData = s.extra[out[i].MemberID].encode()
		out[i].MemberAssignment = ma.AppendTo(nil)
	}
	return out
}

// unitLags is the leader's view of how far each member is behind on each unit's state.
type unitLags struct {
	tasks   map[unit][]taskID // the stateful tasks of each unit
	ends    map[taskID]int64  // per task, the sum of its changelogs' end offsets
	marks   map[taskID]int64  // per task, how many of its changelog partitions end with a transaction marker (exactly-once)
	markers bool              // exactly-once: a marker ends each non-empty changelog partition, not a record to restore
}

// stateful reports whether u has a task with logged stores.
func (l unitLags) stateful(u unit) bool { return len(l.tasks[u]) > 0 }

// of returns how many changelog records the member with state s is behind on u: 0 for a task it
// runs, the end offsets minus its checkpointed offsets otherwise.
func (l unitLags) of(s memberState, u unit) int64 {
	var lag int64
	for _, id := range l.tasks[u] {
		off, ok := s.offsets[id]
		if ok && off == offsetRunning {
			continue
		}
		var markers int64
		if l.markers {
			markers = l.marks[id]
		}
		lag += restore.Lag(0, l.ends[id], off, markers) // off: 0 without a report
	}
	return lag
}

// lags works out, for the units, their stateful tasks (this member's processors with logged
// stores) and the end offsets of their changelogs. Without end offsets (the listing failed, or
// no lister), a task's end is the most advanced offset a member reports: that member counts as
// caught up, unless a member runs the task.
func (b *taskBalancer) lags(units []unit, topics map[string]int32, groupOf func(string) string, states func(func(memberState) bool)) unitLags {
	l := unitLags{tasks: map[unit][]taskID{}, ends: map[taskID]int64{}, marks: map[taskID]int64{}, markers: b.params.markers}
	changelogs := map[taskID][]string{}
	var all []string
	procs := b.ownProcs()
	for _, u := range units {
		for _, p := range procs {
			if groupOf(p.cfg.Inputs[0]) != u.group || u.part >= topics[p.cfg.Inputs[0]] {
				continue
			}
			var cls []string
			for _, s := range p.stores {
				if !s.LoggingDisabled {
					cls = append(cls, changelog.TopicName(b.appID, s.Name))
				}
			}
			if len(cls) > 0 {
				id := taskID{Processor: p.cfg.Name, Partition: u.part}
				l.tasks[u] = append(l.tasks[u], id)
				changelogs[id] = cls
				all = append(all, cls...)
			}
		}
	}
	if len(changelogs) == 0 {
		return l
	}
	var ends map[topicPartition]int64
	if b.endOffsets != nil {
		slices.Sort(all)
		var err error
		if ends, err = b.endOffsets(slices.Compact(all)); err != nil {
			b.log.Warn("cannot list the changelogs' end offsets; judging lag by the members' reports", "topics", slices.Compact(all), "error", err)
			ends = nil
		}
	}
	for id, cls := range changelogs {
		if ends != nil {
			for _, t := range cls {
				end := ends[topicPartition{t, id.Partition}]
				l.ends[id] += end
				if end > 0 {
					l.marks[id]++ // members report offsets short of it; the fallback below has none
				}
			}
			continue
		}
		running := false
		states(func(s memberState) bool {
			l.ends[id] = max(l.ends[id], s.offsets[id])
			running = running || s.offsets[id] == offsetRunning
			return true
		})
		if running {
			// The member that runs it is ahead of every report: no other counts as caught
			// up, the most advanced is the closest.
			l.ends[id] += b.params.acceptableLag + 1
		}
	}
	return l
}
