package runtime

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/statehost/statehost/changelog"
	"github.com/statehost/statehost/config"
	"github.com/statehost/statehost/host/engine"
	"github.com/statehost/statehost/store"
)

// reloadPlan is a reload checked against the instance and the broker, for the loop to apply
// (reload_apply.go).
type reloadPlan struct {
	next    *config.Config
	changes []config.Change

	added   []*processor                  // new processors, pending, with their modules and limits
	changed map[string]*processor         // a processor of the running configuration -> its next form (cfg, stores, limits)
	reopen  map[string]bool               // processors whose stores changed: their tasks restore again
	alters  map[string][]kadm.AlterConfig // changelog topic -> the changes of its configs

	commitInterval time.Duration    // the new commit_interval; 0: unchanged
	outParts       map[string]int32 // new output and dead-letter topics -> their partition count
	limits         map[string]int   // the record limits of new or altered topics (limits.go)
	subscribe      []string         // input topics to consume

	applied chan struct{} // closed by the loop once it applied the plan
	drained []string      // the topics fetching stopped for while it waits (reloads.drain; guarded by reloads.mu)
}

// discard closes what the plan compiled, when it does not apply. A nil plan is fine.
func (p *reloadPlan) discard() {
	if p == nil {
		return
	}
	for _, proc := range p.added {
		if proc.mod != nil {
			_ = proc.mod.Close(context.Background())
		}
	}
}

// prepare checks changes (from the running configuration to next) against the instance and
// the broker without changing anything, and returns the plan to apply, or why not.
func (rl *reloads) prepare(ctx context.Context, next *config.Config, changes []config.Change) (*reloadPlan, hcl.Diagnostics) {
	r := rl.rt
	p := &reloadPlan{next: next, changes: changes, changed: map[string]*processor{}, reopen: map[string]bool{},
		alters: map[string][]kadm.AlterConfig{}, applied: make(chan struct{})}
	var diags hcl.Diagnostics
	diag := func(rng hcl.Range, summary, detail string, args ...any) {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: fmt.Sprintf(detail, args...), Subject: &rng})
	}
	for _, c := range changes {
		switch c.Kind {
		case config.ChangeCommitInterval:
			old, now := transactionTimeout(r.cfg.CommitInterval), transactionTimeout(next.CommitInterval)
			if r.eos != nil && old != now {
				diag(c.Range, "Cannot change commit_interval without a restart",
					"Under exactly_once the transaction timeout is the larger of 10s and 3 x commit_interval, and the transactional producer got %s at start; commit_interval %s needs %s. commit_interval changes live while the timeout stays (up to %s here). The running configuration stays; restart the application to change it.",
					config.FormatDuration(old), c.To, config.FormatDuration(now), config.FormatDuration(max(old/3, 10*time.Second/3).Truncate(time.Millisecond)))
				continue
			}
			p.commitInterval = next.CommitInterval
		case config.ChangeProcessorAdded:
			if proc := rl.newProcessor(ctx, next, c, diag); proc != nil {
				p.added = append(p.added, proc)
			}
		case config.ChangeStoreAdded, config.ChangeStoreRemoved, config.ChangeOnError, config.ChangeTopicConfig:
			sh := p.changed[c.Processor]
			if sh == nil {
				var err error
				if sh, err = rl.nextForm(next, c.Processor); err != nil {
					diag(c.Range, "Invalid store", "%v.", err)
					continue
				}
				p.changed[c.Processor] = sh
			}
			switch c.Kind {
			case config.ChangeStoreAdded:
				p.reopen[c.Processor] = true
			case config.ChangeStoreRemoved:
				p.reopen[c.Processor] = true
				rl.checkEmpty(ctx, c, diag)
			case config.ChangeTopicConfig:
				rl.checkAlter(ctx, p, c, sh, diag)
			}
		}
	}
	return p, diags
}

// newProcessor compiles the module of the processor that c adds and gives it a trial start
// over empty stores, as a deploy does; nil, with a diagnostic on its module, when it fails.
func (rl *reloads) newProcessor(ctx context.Context, next *config.Config, c config.Change, diag diagFunc) *processor {
	r := rl.rt
	i := slices.IndexFunc(next.Processors, func(pc config.Processor) bool { return pc.Name == c.Processor })
	pc := next.Processors[i] // a copy: the processor's own
	mod, err := r.eng.CompileFile(ctx, pc.Module)
	if err != nil {
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
			diag(pc.ModuleRange, "Module file not readable", "Processor %q: the module file %s cannot be read: %v.", pc.Name, pc.Module, pe)
		} else {
			diag(pc.ModuleRange, "Invalid module", "Processor %q: module %s is not a valid statehost module: %v", pc.Name, pc.Module, err)
		}
		return nil
	}
	p := &processor{cfg: &pc, mod: mod, version: ModuleVersion{Hash: mod.Hash(), Source: pc.Module, LoadedAt: time.Now()}}
	p.pending.Store(true)
	if p.stores, err = storeSpecs(pc.Stores); err != nil {
		_ = mod.Close(ctx)
		diag(pc.DeclRange, "Invalid store", "%v.", err)
		return nil
	}
	if err := rl.trial(ctx, p, mod); err != nil {
		_ = mod.Close(ctx)
		diag(pc.ModuleRange, "Module does not start", "Processor %q: module %s failed its trial start over empty stores: %v.", pc.Name, pc.Module, err)
		return nil
	}
	return p
}

// trial gives the module of the new processor p a trial start, as a deploy does.
func (rl *reloads) trial(ctx context.Context, p *processor, mod *engine.Module) error {
	return rl.rt.deploy.trial(ctx, p, mod)
}

// nextForm returns the processor name of the running application in the form next gives it:
// a new processor value with next's block and its stores, the partitions and limits of the
// running one (limits are learned again for it: effect).
func (rl *reloads) nextForm(next *config.Config, name string) (*processor, error) {
	live := rl.rt.procByName(name)
	i := slices.IndexFunc(next.Processors, func(pc config.Processor) bool { return pc.Name == name })
	if live == nil || i < 0 {
		return nil, fmt.Errorf("processor %q is not running", name)
	}
	pc := next.Processors[i]
	stores, err := storeSpecs(pc.Stores)
	if err != nil {
		return nil, err
	}
	return &processor{cfg: &pc, stores: stores, partitions: live.partitions}, nil
}

// storeSpecs returns the changelog.StoreSpec of each store block.
func storeSpecs(stores []config.Store) ([]changelog.StoreSpec, error) {
	var out []changelog.StoreSpec
	for _, sc := range stores {
		backend, err := store.ParseBackend(sc.Backend)
		if err != nil {
			return nil, fmt.Errorf("store %s: %w", sc.Name, err)
		}
		out = append(out, storeSpec(sc, backend))
	}
	return out, nil
}

// checkEmpty refuses, with diag, the removal of a store (c) whose changelog holds records:
// its state would be left behind.
func (rl *reloads) checkEmpty(ctx context.Context, c config.Change, diag diagFunc) {
	r := rl.rt
	topic := changelog.TopicName(r.cfg.ApplicationID, c.Store)
	starts, err := r.kafka.adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = starts.Error()
	}
	var ends kadm.ListedOffsets
	if err == nil {
		if ends, err = r.kafka.adm.ListEndOffsets(ctx, topic); err == nil {
			err = ends.Error()
		}
	}
	switch {
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		return // never created: nothing in it
	case err != nil:
		diag(c.Range, "Cannot remove a store without knowing it is empty", "Store %q of processor %q: its changelog %s cannot be listed: %v. The running configuration stays.", c.Store, c.Processor, topic, err)
		return
	}
	var records int64
	ends.Each(func(o kadm.ListedOffset) {
		if s, ok := starts.Lookup(o.Topic, o.Partition); ok {
			records += max(o.Offset-s.Offset, 0)
		}
	})
	if records > 0 {
		diag(c.Range, "Cannot remove a store that holds data", "Store %q is gone from processor %q, but its changelog %s holds %d records: its state would be left behind. Keep the store, or empty its changelog topic first. The running configuration stays.", c.Store, c.Processor, topic, records)
	}
}

// checkAlter works out the changes of the changelog configs of the store of c (sh: its
// processor's next form), as incremental alterations (keys set, keys deleted back to the
// broker's default), and asks the broker to validate them.
func (rl *reloads) checkAlter(ctx context.Context, p *reloadPlan, c config.Change, sh *processor, diag diagFunc) {
	r := rl.rt
	live := r.procByName(c.Processor)
	tm, err := changelog.NewTopicManager(r.kafka.adm, changelog.TopicSettings{AppID: r.cfg.ApplicationID})
	if err != nil {
		diag(c.Range, "Changelog config not applied", "%v.", err)
		return
	}
	configsOf := func(specs []changelog.StoreSpec) map[string]string {
		for _, spec := range changelog.TopicSpecs(specs) {
			if spec.Store == c.Store {
				return tm.Configs(spec)
			}
		}
		return nil
	}
	was, now := configsOf(live.stores), configsOf(sh.stores)
	var alters []kadm.AlterConfig
	for _, k := range slices.Sorted(maps.Keys(now)) {
		if v, ok := was[k]; !ok || v != now[k] {
			alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: kadm.StringPtr(now[k])})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(was)) {
		if _, ok := now[k]; !ok {
			alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
		}
	}
	if len(alters) == 0 {
		return
	}
	topic := changelog.TopicName(r.cfg.ApplicationID, c.Store)
	resp, err := r.kafka.adm.ValidateAlterTopicConfigs(ctx, alters, topic)
	if err == nil {
		_, err = resp.On(topic, func(ar *kadm.AlterConfigsResponse) error {
			if ar.Err != nil && ar.ErrMessage != "" {
				return fmt.Errorf("%w (%s)", ar.Err, ar.ErrMessage)
			}
			return ar.Err
		})
	}
	if err != nil {
		diag(c.Range, "Changelog config refused", "Store %q: the broker refuses the topic_config of its changelog %s: %v. The running configuration stays.", c.Store, topic, err)
		return
	}
	p.alters[topic] = alters
}

// effect makes the plan's changes on the broker, as the start makes them: it creates the new
// topics (topic and repartition blocks, the outputs, dead-letter topics and changelogs of new
// processors and stores) after the start's checks of them, alters the changed changelog
// configs, and learns the record limits of all of these. A *DiagnosticsError says what the
// checks found; nothing changed then.
func (rl *reloads) effect(ctx context.Context, p *reloadPlan) error {
	r := rl.rt
	// The start's setup (topics.go) over a shadow runtime: the next configuration, and only
	// the processors the plan adds or changes.
	sh := &Runtime{opts: r.opts, cfg: p.next, log: r.log, outParts: map[string]int32{}}
	sh.kafka.prodCl, sh.kafka.adm = r.kafka.prodCl, r.kafka.adm
	sh.procs = slices.Clone(p.added)
	for _, name := range slices.Sorted(maps.Keys(p.changed)) {
		sh.procs = append(sh.procs, p.changed[name])
	}
	ts := topicSetup{sh}
	if err := ts.setupTopics(ctx); err != nil {
		return err
	}
	for _, topic := range slices.Sorted(maps.Keys(p.alters)) {
		resp, err := r.kafka.adm.AlterTopicConfigs(ctx, p.alters[topic], topic)
		if err == nil {
			_, err = resp.On(topic, func(ar *kadm.AlterConfigsResponse) error { return ar.Err })
		}
		if err != nil {
			return fmt.Errorf("alter the configs of changelog %s: %w", topic, err)
		}
		r.log.Info("changelog configs altered", "topic", topic, "configs", describeAlters(p.alters[topic]))
	}
	ts.learnLimits(ctx)
	p.limits, p.outParts = sh.limits, sh.outParts
	for _, proc := range p.added {
		for _, in := range proc.cfg.Inputs {
			if _, ok := r.readers[in]; !ok && !slices.Contains(p.subscribe, in) {
				p.subscribe = append(p.subscribe, in)
			}
		}
	}
	return nil
}

// describeAlters describes config alterations for a log line: key=value, or key for a
// deletion.
func describeAlters(alters []kadm.AlterConfig) []string {
	out := make([]string, 0, len(alters))
	for _, a := range alters {
		if a.Op == kadm.DeleteConfig || a.Value == nil {
			out = append(out, a.Name+" (default)")
			continue
		}
		out = append(out, a.Name+"="+*a.Value)
	}
	return out
}
