package config

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// Diff compares the configuration an application runs with (running) with the one its file
// holds now (next), for a reload without a restart. It returns what a running application can
// apply (the changes), and a diagnostic for each difference it cannot, with the range in next's
// file of the attribute or block that changed (the start of the file for a block that is
// gone). The changes it applies live:
//
//   - a new processor (ChangeProcessorAdded), with its stores;
//   - a new store in a processor (ChangeStoreAdded), and a store removed from one
//     (ChangeStoreRemoved: the application refuses it when the store's changelog holds
//     records; a store without a changelog is refused here, since nothing can tell whether
//     it holds data);
//   - a processor's on_error (ChangeOnError), commit_interval (ChangeCommitInterval), a
//     changelog's logging.topic_config (ChangeTopicConfig);
//   - a new topic or repartition block (ChangeTopicAdded, ChangeRepartitionAdded), whose topic
//     is created as at start.
//
// Everything else is refused: application_id, state_dir, processing_guarantee,
// session_timeout, state_memory, memory_limit, the settings of several instances
// (standby_replicas, acceptable_recovery_lag, state_cleanup_delay,
// probing_rebalance_interval, remove_dead_members), the kafka, embedded_broker and admin
// blocks, a topic or repartition block's partitions or config or its removal, a processor's
// removal, module, inputs, outputs or emit_budget, and a store's type, backend, coalesce,
// logging.enabled, window and session durations, or its move to another processor; and any
// setting Diff does not know (a field of Config, Processor or Store it does not compare
// itself). Both configurations must be free of error diagnostics.
func Diff(running, next *Config) ([]Change, hcl.Diagnostics) {
	d := &differ{src: newSource(next)}
	if running.ApplicationID != next.ApplicationID {
		// Every topic, store and group name derives from it: nothing else compares.
		d.refuse(d.src.attr("application_id"), "application_id", "application_id changed from %q to %q: it names the consumer group, the state directory and every internal topic.", running.ApplicationID, next.ApplicationID)
		return nil, d.diags
	}
	d.top(running, next)
	d.topics(running, next)
	d.processors(running, next)
	return d.changes, sortDiagnostics(d.diags)
}

// ChangeKind says what a Change changes.
type ChangeKind string

// The changes a running application applies.
const (
	ChangeCommitInterval   ChangeKind = "commit_interval"
	ChangeTopicAdded       ChangeKind = "topic_added"
	ChangeRepartitionAdded ChangeKind = "repartition_added"
	ChangeProcessorAdded   ChangeKind = "processor_added"
	ChangeStoreAdded       ChangeKind = "store_added"
	ChangeStoreRemoved     ChangeKind = "store_removed"
	ChangeOnError          ChangeKind = "on_error"
	ChangeTopicConfig      ChangeKind = "topic_config"
)

// Change is a difference between two configurations that a running application applies.
type Change struct {
	Kind      ChangeKind
	Processor string    // the processor added or changed (processor_added, store_*, on_error, topic_config)
	Store     string    // the store added, removed or whose changelog config changed
	Topic     string    // the topic of topic_added or repartition_added (its full name)
	Range     hcl.Range // in the new file: the block or attribute
	From, To  string    // the old and new values of commit_interval and on_error
}

// String describes the change in words, e.g. `processor "audit" added`.
func (c Change) String() string {
	switch c.Kind {
	case ChangeCommitInterval:
		return fmt.Sprintf("commit_interval %s -> %s", c.From, c.To)
	case ChangeTopicAdded:
		return fmt.Sprintf("topic %q added", c.Topic)
	case ChangeRepartitionAdded:
		return fmt.Sprintf("repartition topic %q added", c.Topic)
	case ChangeProcessorAdded:
		return fmt.Sprintf("processor %q added", c.Processor)
	case ChangeStoreAdded:
		return fmt.Sprintf("store %q added to processor %q", c.Store, c.Processor)
	case ChangeStoreRemoved:
		return fmt.Sprintf("store %q removed from processor %q", c.Store, c.Processor)
	case ChangeOnError:
		return fmt.Sprintf("processor %q on_error %s -> %s", c.Processor, c.From, c.To)
	case ChangeTopicConfig:
		return fmt.Sprintf("store %q changelog topic_config changed", c.Store)
	}
	return string(c.Kind)
}

// differ collects the changes and refusals of Diff.
type differ struct {
	src     source
	changes []Change
	diags   hcl.Diagnostics
}

func (d *differ) change(c Change) { d.changes = append(d.changes, c) }

// refuse records that what (a setting, a block) changed in a way a running application cannot
// apply, at rng, with why it cannot and what to do.
func (d *differ) refuse(rng hcl.Range, what, detail string, args ...any) {
	d.diags = append(d.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Cannot change " + what + " without a restart",
		Detail:   fmt.Sprintf(detail, args...) + " The running configuration stays; restart the application to change it.",
		Subject:  &rng,
	})
}

// top compares the top-level attributes and the kafka, embedded_broker and admin blocks.
func (d *differ) top(a, b *Config) {
	attr := func(name string, av, bv any, why string) {
		if reflect.DeepEqual(av, bv) {
			return
		}
		d.refuse(d.src.attr(name), name, "%s changed from %s to %s: %s.", name, show(av), show(bv), why)
	}
	attr("state_dir", a.StateDir, b.StateDir, "the instance's state is open there")
	attr("processing_guarantee", a.Guarantee, b.Guarantee, "the committer and the producer are made for it at start")
	attr("session_timeout", a.SessionTimeout, b.SessionTimeout, "the group consumer joined the group with it")
	attr("state_memory", a.StateMemory, b.StateMemory, "the store's caches and memtables are sized at start")
	attr("memory_limit", a.MemoryLimit, b.MemoryLimit, "the process's memory limit is set at start")
	attr("standby_replicas", a.StandbyReplicas, b.StandbyReplicas, "every instance of the application must assign with the same settings")
	attr("acceptable_recovery_lag", a.AcceptableRecoveryLag, b.AcceptableRecoveryLag, "every instance of the application must assign with the same settings")
	attr("state_cleanup_delay", a.StateCleanupDelay, b.StateCleanupDelay, "it is read at start")
	attr("probing_rebalance_interval", a.ProbingRebalanceInterval, b.ProbingRebalanceInterval, "it is read at start")
	attr("remove_dead_members", a.RemoveDeadMembers, b.RemoveDeadMembers, "the watches of the other instances start with the instance")
	if f := otherField(*a, *b, "Path", "Files", "ApplicationID", "StateDir", "Guarantee", "CommitInterval", "SessionTimeout",
		"SessionTimeoutRange", "StateMemory", "MemoryLimit", "StandbyReplicas", "AcceptableRecoveryLag", "StateCleanupDelay",
		"ProbingRebalanceInterval", "RemoveDeadMembers", "Kafka", "EmbeddedBroker", "Admin", "Topics", "Repartitions", "Processors"); f != "" {
		d.refuse(d.src.start(), "a setting", "The setting %s changed.", f)
	}
	if a.CommitInterval != b.CommitInterval {
		d.change(Change{Kind: ChangeCommitInterval, Range: d.src.attr("commit_interval"),
			From: FormatDuration(a.CommitInterval), To: FormatDuration(b.CommitInterval)})
	}
	block := func(name string, av, bv any, why string) {
		if !reflect.DeepEqual(av, bv) {
			d.refuse(d.src.block(name).rng, "the "+name+" block", "The %s block changed: %s.", name, why)
		}
	}
	block("kafka", comparableKafka(a.Kafka), comparableKafka(b.Kafka), "every Kafka client of the instance was made with it")
	if a.StateDir == b.StateDir { // else its default data_dir moved with state_dir, refused above
		block("embedded_broker", a.EmbeddedBroker, b.EmbeddedBroker, "the embedded broker runs with it")
	}
	block("admin", a.Admin, b.Admin, "the admin listener runs with it")
}

// comparableKafka is k without what differs between two loads of one file: source ranges,
// and the TLS configuration built from the files (compared by their names).
func comparableKafka(k Kafka) Kafka {
	k.Range, k.ReplicationFactorRange = hcl.Range{}, hcl.Range{}
	if k.TLS != nil {
		t := *k.TLS
		t.Config = nil
		k.TLS = &t
	}
	return k
}

// topics compares the topic and repartition blocks: new ones are created, others stay.
func (d *differ) topics(a, b *Config) {
	for _, t := range b.Topics {
		old := a.TopicByName(t.Name)
		nav := d.src.block("topic", t.Name)
		switch {
		case old == nil:
			d.change(Change{Kind: ChangeTopicAdded, Topic: t.Name, Range: t.DeclRange})
		case old.Partitions != t.Partitions:
			d.refuse(t.PartitionsRange, "a topic's partitions", "Topic %q: partitions changed from %d to %d: statehost never changes the partitions of a topic, and the tasks are its partitions.", t.Name, old.Partitions, t.Partitions)
		case !maps.Equal(old.Configs, t.Configs):
			d.refuse(nav.attr("config"), "a topic's config", "Topic %q: config changed: a topic block's config applies only when statehost creates the topic. Change the topic's configs with Kafka's tools.", t.Name)
		}
	}
	for _, t := range a.Topics {
		if b.TopicByName(t.Name) == nil {
			d.refuse(d.src.start(), "the topic blocks", "The topic block %q (%s) is gone from the file.", t.Name, where(t.DeclRange))
		}
	}
	for _, rp := range b.Repartitions {
		old := a.RepartitionByTopic(rp.Topic)
		switch {
		case old == nil:
			d.change(Change{Kind: ChangeRepartitionAdded, Topic: rp.Topic, Range: rp.DeclRange})
		case old.Partitions != rp.Partitions:
			d.refuse(rp.PartitionsRange, "a repartition's partitions", "Repartition %q: partitions changed from %d to %d: the tasks that read it are its partitions.", rp.Name, old.Partitions, rp.Partitions)
		}
	}
	for _, rp := range a.Repartitions {
		if b.RepartitionByTopic(rp.Topic) == nil {
			d.refuse(d.src.start(), "the repartition blocks", "The repartition block %q (%s) is gone from the file.", rp.Name, where(rp.DeclRange))
		}
	}
}

// processors compares the processor blocks and their stores.
func (d *differ) processors(a, b *Config) {
	owner := map[string]string{} // store -> its processor in a
	for _, p := range a.Processors {
		for _, s := range p.Stores {
			owner[s.Name] = p.Name
		}
	}
	for i := range b.Processors {
		p := &b.Processors[i]
		old := a.processor(p.Name)
		if old == nil {
			d.change(Change{Kind: ChangeProcessorAdded, Processor: p.Name, Range: p.DeclRange})
			for _, s := range p.Stores {
				d.moved(owner, p.Name, s)
			}
			continue
		}
		d.processor(old, p, owner)
	}
	for _, p := range a.Processors {
		if b.processor(p.Name) == nil {
			d.refuse(d.src.start(), "the processors", "The processor %q (%s) is gone from the file: its tasks, their state and their input offsets would be left behind.", p.Name, where(p.DeclRange))
		}
	}
}

// moved refuses the store s of the processor proc (in the new file) when it was another
// processor's (owner: store -> processor in the running configuration).
func (d *differ) moved(owner map[string]string, proc string, s Store) bool {
	if was, ok := owner[s.Name]; ok && was != proc {
		d.refuse(s.DeclRange, "a store's processor", "Store %q moved from processor %q to %q: its state and changelog are %q's, partition by partition.", s.Name, was, proc, was)
		return true
	}
	return false
}

// processor compares a processor block that both configurations have.
func (d *differ) processor(a, b *Processor, owner map[string]string) {
	nav := d.src.block("processor", b.Name)
	if a.Module != b.Module {
		d.refuse(b.ModuleRange, "a processor's module", "Processor %q: module changed from %s to %s. Deploy a module with statehost deploy, or by writing it over the module file.", b.Name, a.Module, b.Module)
	}
	if !slices.Equal(a.Inputs, b.Inputs) {
		d.refuse(b.InputsRange, "a processor's inputs", "Processor %q: inputs changed from %s to %s: its tasks and their committed offsets are those of its inputs.", b.Name, show(a.Inputs), show(b.Inputs))
	}
	if !slices.Equal(a.Outputs, b.Outputs) {
		d.refuse(nav.attr("outputs"), "a processor's outputs", "Processor %q: outputs changed from %s to %s: its running plugin instances emit by output index.", b.Name, show(a.Outputs), show(b.Outputs))
	}
	if a.EmitBudget != b.EmitBudget {
		d.refuse(nav.attr("emit_budget"), "a processor's emit_budget", "Processor %q: emit_budget changed from %d to %d bytes.", b.Name, a.EmitBudget, b.EmitBudget)
	}
	if f := otherField(*a, *b, "Name", "Module", "ModuleRange", "Inputs", "InputRanges", "InputsRange", "Outputs",
		"OutputRanges", "Stores", "DeclRange", "OnError", "OnErrorRange", "EmitBudget"); f != "" {
		d.refuse(nav.rng, "a processor's settings", "Processor %q: its %s changed.", b.Name, f)
	}
	if a.OnError != b.OnError {
		d.change(Change{Kind: ChangeOnError, Processor: b.Name, Range: b.OnErrorRange, From: string(a.OnError), To: string(b.OnError)})
	}
	for _, s := range b.Stores {
		old := a.store(s.Name)
		if old == nil {
			if !d.moved(owner, b.Name, s) {
				d.change(Change{Kind: ChangeStoreAdded, Processor: b.Name, Store: s.Name, Range: s.DeclRange})
			}
			continue
		}
		d.store(b.Name, old, &s, nav.block("store", s.Name))
	}
	for _, s := range a.Stores {
		if b.store(s.Name) != nil {
			continue
		}
		if !s.Logging {
			d.refuse(nav.rng, "a store without a changelog", "Store %q (%s) is gone from processor %q: it has no changelog, so nothing can tell whether it holds data.", s.Name, where(s.DeclRange), b.Name)
			continue
		}
		d.change(Change{Kind: ChangeStoreRemoved, Processor: b.Name, Store: s.Name, Range: nav.rng})
	}
}

// store compares a store block that both configurations have in the processor proc; nav is
// its block in the new file.
func (d *differ) store(proc string, a, b *Store, nav sourceBlock) {
	what := fmt.Sprintf("processor %q", proc)
	// One refusal per store: the defaults of its durations follow its type and window_size.
	refused := false
	attr := func(name string, av, bv any) {
		if !refused && !reflect.DeepEqual(av, bv) {
			refused = true
			d.refuse(nav.attr(name), "a store's "+name, "Store %q of %s: %s changed from %s to %s: the store's data and its changelog are in the form it gives.", b.Name, what, name, show(av), show(bv))
		}
	}
	attr("type", a.Type, b.Type)
	attr("backend", a.Backend, b.Backend)
	attr("coalesce", a.Coalesce, b.Coalesce)
	attr("window_size", a.WindowSize, b.WindowSize)
	attr("advance", a.Advance, b.Advance)
	attr("inactivity_gap", a.InactivityGap, b.InactivityGap)
	attr("grace", a.Grace, b.Grace)
	attr("retention", a.Retention, b.Retention)
	attr("changelog_additional_retention", a.AdditionalRetention, b.AdditionalRetention)
	logging := nav.block("logging")
	if refused {
		return
	}
	if a.Logging != b.Logging {
		d.refuse(logging.attr("enabled"), "a store's logging", "Store %q of %s: logging.enabled changed from %t to %t: its changelog (or its absence) is what restores it.", b.Name, what, a.Logging, b.Logging)
		return
	}
	if f := otherField(*a, *b, "Name", "Type", "Backend", "Coalesce", "Logging", "TopicConfigs", "DeclRange",
		"WindowSize", "Advance", "Grace", "Retention", "InactivityGap", "AdditionalRetention"); f != "" {
		d.refuse(nav.rng, "a store's settings", "Store %q of %s: its %s changed: the store's data and its changelog are in the form its settings give.", b.Name, what, f)
		return
	}
	if b.Logging && !maps.Equal(a.TopicConfigs, b.TopicConfigs) {
		d.change(Change{Kind: ChangeTopicConfig, Processor: proc, Store: b.Name, Range: logging.attr("topic_config")})
	}
}

// otherField returns the name of the first field of the structs a and b (of one type) that
// differs and is none of known: a setting Diff does not know, which a running application
// cannot take (""when none differs).
func otherField(a, b any, known ...string) string {
	av, bv := reflect.ValueOf(a), reflect.ValueOf(b)
	for i := range av.NumField() {
		f := av.Type().Field(i)
		if f.IsExported() && !slices.Contains(known, f.Name) && !reflect.DeepEqual(av.Field(i).Interface(), bv.Field(i).Interface()) {
			return f.Name
		}
	}
	return ""
}

// processor returns the processor block named name, or nil.
func (c *Config) processor(name string) *Processor {
	for i := range c.Processors {
		if c.Processors[i].Name == name {
			return &c.Processors[i]
		}
	}
	return nil
}

// store returns the store block named name, or nil.
func (p *Processor) store(name string) *Store {
	for i := range p.Stores {
		if p.Stores[i].Name == name {
			return &p.Stores[i]
		}
	}
	return nil
}

// show formats a value of a diagnostic: strings quoted, durations as in the file, lists in
// brackets.
func show(v any) string {
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("%q", v)
	case Guarantee:
		return fmt.Sprintf("%q", string(v))
	case []string:
		q := make([]string, len(v))
		for i, s := range v {
			q[i] = fmt.Sprintf("%q", s)
		}
		return "[" + strings.Join(q, ", ") + "]"
	case time.Duration:
		return FormatDuration(v)
	}
	return fmt.Sprint(v)
}
