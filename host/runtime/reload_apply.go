package runtime

import (
	"maps"
	"slices"

	"github.com/statehost/statehost/changelog"
)

// The loop's side of a reload. What a reload changes is read without the table's lock by the
// jobs (a task's processor, the output partitions and record limits, the readers of a topic):
// the loop applies it where no job runs. The group's goroutine (the readers, the balancer's
// processors) and the admin handlers read the processors through the snapshot the loop
// publishes after the change (publishView, view.go), never r.procs, r.readers or a live
// processor's cfg and stores.

// atBoundary applies the reload that waits, if any, at this commit boundary, when no job
// runs, no task holds records and every task is committed; otherwise the reload keeps waiting
// (fetching nothing meanwhile, the loop commits again once the tasks are idle: reloads.due).
// The caller holds the table's lock.
func (rl *reloads) atBoundary() {
	rl.mu.Lock()
	p := rl.plan
	rl.mu.Unlock()
	if p == nil || !rl.idle() {
		return
	}
	for _, t := range rl.rt.tasks.active {
		if t.uncommitted() {
			return
		}
	}
	rl.apply(p)
	rl.mu.Lock()
	rl.plan = nil
	rl.undrain(p)
	rl.mu.Unlock()
	close(p.applied)
}

// apply applies p. The caller holds the table's lock; no job runs and every task is
// committed.
func (rl *reloads) apply(p *reloadPlan) {
	r := rl.rt
	maps.Copy(r.limits, p.limits)
	maps.Copy(r.outParts, p.outParts)
	if p.commitInterval > 0 {
		r.cfg.CommitInterval = p.commitInterval
	}
	r.cfg.Topics, r.cfg.Repartitions = p.next.Topics, p.next.Repartitions // a new repartition is purged too
	for _, name := range slices.Sorted(maps.Keys(p.changed)) {
		rl.applyChanged(r.procByName(name), p.changed[name], p.reopen[name])
	}
	if len(p.changed) > 0 {
		r.publishView()
	}
	if len(p.added) > 0 {
		rl.addProcessors(p.added, p.subscribe)
	}
	rl.publish()
	r.log.Info("configuration applied at a commit boundary", "changes", len(p.changes))
}

// applyChanged gives the running processor live its next form sh: its block (on_error), its
// stores and their limits. When its stores changed (reopen), its tasks close and restore again
// with the new ones, and its standbys reopen; otherwise its running tasks take the new
// policy and limits for their next plugin call. The caller holds the table's lock.
func (rl *reloads) applyChanged(live, sh *processor, reopen bool) {
	r := rl.rt
	for i := range sh.stores {
		sh.stores[i].Metrics = r.metrics.storeHook(sh.stores[i].Name)
		if !sh.stores[i].LoggingDisabled {
			r.metrics.addChangelog(changelog.TopicName(r.cfg.ApplicationID, sh.stores[i].Name), sh.stores[i].Name)
		}
	}
	live.cfg = sh.cfg
	live.storeLimits, live.outputLimits = sh.storeLimits, sh.outputLimits
	r.local.mu.Lock() // the balancer's report reads the stores under it
	live.stores = sh.stores
	r.local.mu.Unlock()
	if reopen {
		// The store versions its module declares were asked over its former stores
		// (migrate.go): the tasks' start asks again, over the new ones.
		r.deploy.forgetStores(live)
		rl.reopen(live)
		return
	}
	for _, t := range r.tasks.active {
		if t.proc != live || t.cl == nil || t.pool == nil {
			continue // one that starts later takes the new form then
		}
		t.guard = nil // made again for "skip" and "dead_letter"
		t.et = t.engineTask()
	}
}

// reopen closes the tasks of p, committed and idle, and assigns them again: they restore their
// stores (from their checkpoints: little or nothing) with p's new set of stores. Their input
// partitions pause until they run again. p's standby tasks close too; the next round opens
// them again with the new stores. The caller holds the table's lock.
func (rl *reloads) reopen(p *processor) {
	r := rl.rt
	var tasks []*task
	for _, t := range r.tasks.active {
		if t.proc == p {
			tasks = append(tasks, t)
		}
	}
	stopped := false
	for id, cl := range r.tasks.standby {
		if id.Processor != p.cfg.Name {
			continue
		}
		if !stopped {
			r.sb.stopFollower() // it owns the standbys' stores while it runs
			stopped = true
		}
		r.sb.close(id, cl)
	}
	r.closeTasks(tasks)
	for _, t := range tasks {
		if !r.tasks.owned(t) {
			continue
		}
		r.tasks.assign(t.id, p, r)
		rl.pauseInputs(p, t.id.Partition)
	}
}

// pauseInputs pauses the assigned input partitions of p's task on part until its tasks run
// (syncPauses resumes them). The caller holds the table's lock.
func (rl *reloads) pauseInputs(p *processor, part int32) {
	r := rl.rt
	pause := map[string][]int32{}
	for _, in := range p.cfg.Inputs {
		if tp := (topicPartition{in, part}); r.tasks.assigned[tp] {
			r.tasks.paused[tp] = true
			pause[in] = append(pause[in], part)
		}
	}
	if len(pause) > 0 {
		r.kafka.consumer.PauseFetchPartitions(pause)
	}
}

// addProcessors adds the new processors, pending: they advertise themselves to the group,
// their inputs are consumed (subscribe: the topics no processor read yet), and they have no
// tasks until the group enables them (enable). The caller holds the table's lock.
func (rl *reloads) addProcessors(added []*processor, subscribe []string) {
	r := rl.rt
	procs := slices.Clone(r.procs)
	readers := make(map[string][]*processor, len(r.readers))
	for t, ps := range r.readers {
		readers[t] = slices.Clone(ps)
	}
	for _, p := range added {
		for i := range p.stores {
			p.stores[i].Metrics = r.metrics.storeHook(p.stores[i].Name)
			if !p.stores[i].LoggingDisabled {
				r.metrics.addChangelog(changelog.TopicName(r.cfg.ApplicationID, p.stores[i].Name), p.stores[i].Name)
			}
		}
		r.metrics.addProcessor(p.cfg.Name)
		r.metrics.addInstances(p.cfg.Name, p.liveInstances)
		procs = append(procs, p)
		for _, in := range p.cfg.Inputs {
			readers[in] = append(readers[in], p)
		}
		r.local.mu.Lock()
		r.local.procs[p.cfg.Name] = p
		r.local.mu.Unlock()
		rl.pending.Add(1)
		r.log.Info("processor added: it waits for every instance of the group to have it", "processor", p.cfg.Name, "module", p.cfg.Module, "hash", short(p.mod.Hash()))
	}
	r.procs, r.readers, r.tasks.readers = procs, readers, readers
	r.publishView() // the balancer's too, before the rebalance below
	rl.publish()
	if len(subscribe) > 0 {
		r.kafka.consumer.AddConsumeTopics(subscribe...)
	}
	r.kafka.consumer.ForceRebalance() // the group learns of them from the join
}

// enable creates the tasks of the pending processors that the group enables (ev), on the
// input partitions assigned here, which pause until those tasks run: their records from here
// on reach them, and the partitions' committed offsets wait for them. A processor this
// member had not advertised in the join that ev answers stays pending. The caller holds the
// table's lock (drainInbox).
func (rl *reloads) enable(ev *enabledEvent) {
	r := rl.rt
	changed := false
	for _, p := range r.procs {
		if !p.pending.Load() || !ev.advertised[p.cfg.Name] || ev.gated && !slices.Contains(ev.names, p.cfg.Name) {
			continue
		}
		p.pending.Store(false)
		rl.pending.Add(-1)
		changed = true
		parts := map[int32]bool{}
		for tp := range r.tasks.assigned {
			if slices.Contains(p.cfg.Inputs, tp.topic) {
				parts[tp.part] = true
			}
		}
		for _, part := range slices.Sorted(maps.Keys(parts)) {
			if id := (taskID{Processor: p.cfg.Name, Partition: part}); r.tasks.active[id] == nil {
				r.tasks.assign(id, p, r)
				rl.pauseInputs(p, part)
			}
		}
		r.log.Info("processor enabled: every instance of the group has it", "processor", p.cfg.Name, "tasks", len(parts))
		r.emit(Event{Kind: EventProcessorEnabled, Processor: p.cfg.Name})
	}
	if changed {
		rl.publish()
	}
}
