package main

import (
	"fmt"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/statehost/statehost/host/runtime"
)

// The migrations of store versions (host/runtime/migrate.go) show with the restores: a bar,
// or a "migration progress" line every interval, for each task that migrates a store, counted
// in entries. The runtime's status shows them (runtime.TaskStatus.Migration): the progress
// loop reads it at each tick.

// migrationView is a task's migration as the runtime's status shows it.
type migrationView struct {
	processor string
	partition int32
	runtime.MigrationStatus
}

// migrationsOf returns the migrations that tasks shows.
func migrationsOf(tasks []runtime.TaskStatus) []migrationView {
	var out []migrationView
	for _, t := range tasks {
		if t.Migration != nil {
			out = append(out, migrationView{t.Processor, t.Partition, *t.Migration})
		}
	}
	return out
}

// setMigrations sets the function that lists the migrations in progress.
func (p *restoreProgress) setMigrations(list func() []migrationView) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.migrations = list
}

// migrationLine marks the lines of tick that are a migration's: loop logs them as "migration
// progress".
const migrationLine = "migration"

// syncMigrationsLocked takes in the migrations listed now: a new one starts (its bar shows
// after barDelay), a known one moves, and one no longer listed ended (its task committed it
// and runs, or the task closed). The caller holds p.mu.
func (p *restoreProgress) syncMigrationsLocked(now time.Time, ms []migrationView) {
	if p.migs == nil {
		p.migs = make(map[restoreKey]*restoring)
	}
	seen := make(map[restoreKey]bool, len(ms))
	for _, m := range ms {
		k := restoreKey{m.processor, m.Store, m.partition}
		seen[k] = true
		r := p.migs[k]
		if r == nil {
			r = &restoring{key: k, topic: fmt.Sprintf("version %d to %d", m.FromVersion, m.ToVersion), end: m.Total,
				began: now, own: true}
			p.migs[k] = r
		}
		r.end, r.pos, r.lastEvent = max(m.Total, m.Migrated), m.Migrated, now
		if r.bar != nil {
			r.bar.SetTotal(r.end, false)
			r.bar.SetCurrent(r.pos)
		}
	}
	for k, r := range p.migs {
		if !seen[k] {
			p.endMigrationLocked(r, true)
		}
	}
}

// endMigrationLocked removes the migration r: it ended (done: its bar completes), or the
// progress stops. The caller holds p.mu.
func (p *restoreProgress) endMigrationLocked(r *restoring, done bool) {
	delete(p.migs, r.key)
	switch {
	case r.bar != nil && done:
		r.bar.SetTotal(r.end, true)
	case r.bar != nil:
		r.bar.Abort(true)
	}
}

// migrationBarsLocked shows the bars of the migrations that have run for barDelay. The caller
// holds p.mu.
func (p *restoreProgress) migrationBarsLocked(now time.Time) {
	for _, r := range p.migs {
		if r.bar == nil && now.Sub(r.began) >= barDelay {
			r.bar = p.bars.addMigration(r)
		}
	}
}

// migrationLinesLocked returns the progress lines of the migrations due at now. The caller
// holds p.mu.
func (p *restoreProgress) migrationLinesLocked(now time.Time) [][]any {
	var lines [][]any
	for _, r := range p.migs {
		if now.Sub(r.began) < p.interval || now.Sub(r.lastLog) < p.interval {
			continue
		}
		r.lastLog = now
		rate := rateOf(r.pos, now.Sub(r.began))
		lines = append(lines, []any{migrationLine,
			"processor", r.key.processor, "store", r.key.store, "partition", r.key.partition,
			"migrated", r.pos, "total", r.end, "percent", percentOf(r.pos, r.end),
			"rate", int64(rate), "eta", etaOf(r.end-r.pos, rate), "versions", r.topic,
		})
	}
	return lines
}

// addMigration shows a bar for the migration r; nil when the container cannot draw.
func (u *barUI) addMigration(r *restoring) *mpb.Bar {
	name := fmt.Sprintf("%s/%s p%d migrates from %s", r.key.processor, r.key.store, r.key.partition, r.topic)
	return u.addBar(r.end, r.pos, r.began, decor.Name(name, decor.WC{C: decor.DSyncWidthR | decor.DextraSpace}))
}
