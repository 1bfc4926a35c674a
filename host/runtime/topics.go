package runtime

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/statehost/statehost/changelog"
	"github.com/statehost/statehost/config"
)

// RepartitionTopicConfigs are the configs of a created repartition topic: records are
// deleted, never compacted, and kept until the runtime purges them below its committed
// offsets (as Kafka Streams creates its repartition topics).
var RepartitionTopicConfigs = map[string]string{
	"cleanup.policy": "delete",
	"retention.ms":   "-1",
}

// setupTopics checks the topology against the broker, then creates the topics the
// configuration declares. Checks first, so that a configuration with a problem creates
// nothing: every input exists or has a block, the inputs of a processor are co-partitioned,
// declared partition counts match existing topics. Then the topic and repartition blocks'
// missing topics are created, output topics that do not exist with the partition count of the
// processor that writes them, the dead-letter topics of processors with on_error =
// "dead_letter" likewise, and the changelogs with their processor's count. A topic the
// broker refuses to create (a bad config value) is a diagnostic on its block.
func (r *Runtime) setupTopics(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	parts, err := r.partitionCounts(ctx)
	if err != nil {
		return err
	}
	var diags hcl.Diagnostics
	diag := func(rng hcl.Range, summary, detail string, args ...any) {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary,
			Detail: fmt.Sprintf(detail, args...), Subject: &rng})
	}

	// The partition count of every topic once the declared ones exist.
	planned := maps.Clone(parts)
	for _, t := range r.cfg.Topics {
		if n, ok := parts[t.Name]; ok && n != t.Partitions {
			diag(t.PartitionsRange, "Partition count mismatch",
				"Topic %q exists on the broker with %d partitions, but its topic block says %d. Statehost does not change the partitions of an existing topic: fix the block, or recreate the topic.",
				t.Name, n, t.Partitions)
		} else if !ok {
			planned[t.Name] = t.Partitions
		}
	}
	for _, rp := range r.cfg.Repartitions {
		if n, ok := parts[rp.Topic]; ok && n != rp.Partitions {
			diag(rp.PartitionsRange, "Partition count mismatch",
				"Repartition topic %q exists on the broker with %d partitions, but the repartition block says %d. Delete the internal topic (its records are transient) or fix the block.",
				rp.Topic, n, rp.Partitions)
		} else if !ok {
			planned[rp.Topic] = rp.Partitions
		}
	}
	// Inputs: they must exist, and the inputs of one processor must be co-partitioned.
	for _, p := range r.procs {
		pc := p.cfg
		counts := make(map[int32][]string)
		for i, in := range pc.Inputs {
			n, ok := planned[in]
			if !ok {
				diag(pc.InputRanges[i], "Unknown input topic",
					"Processor %q reads topic %q, which neither exists on the broker (%s) nor has a topic block. Create the topic, or declare it with a topic block so that statehost creates it.",
					pc.Name, in, strings.Join(r.opts.Brokers, ","))
				continue
			}
			counts[n] = append(counts[n], in)
			p.partitions = n
		}
		if len(counts) > 1 {
			var desc []string
			for _, n := range slices.Sorted(maps.Keys(counts)) {
				desc = append(desc, fmt.Sprintf("%s: %d", strings.Join(counts[n], ", "), n))
			}
			diag(pc.InputsRange, "Inputs not co-partitioned",
				"The inputs of processor %q must have the same number of partitions, since partition N of every input goes to task N; they have %s.",
				pc.Name, strings.Join(desc, "; "))
		}
	}
	if diags.HasErrors() {
		return &DiagnosticsError{Diags: diags, Files: r.cfg.Files}
	}

	// Create the declared topics, then the missing outputs.
	refused := func(rng hcl.Range, what, name string, err error) {
		diag(rng, "Topic not created", "The broker refused to create %s %q: %v.", what, name, err)
	}
	for _, t := range r.cfg.Topics {
		if _, ok := parts[t.Name]; !ok {
			if err := r.createTopic(ctx, t.Name, t.Partitions, t.Configs); err != nil {
				refused(t.DeclRange, "topic", t.Name, err)
			}
		}
	}
	for _, rp := range r.cfg.Repartitions {
		if _, ok := parts[rp.Topic]; !ok {
			if err := r.createTopic(ctx, rp.Topic, rp.Partitions, RepartitionTopicConfigs); err != nil {
				refused(rp.DeclRange, "repartition topic", rp.Topic, err)
			}
		}
	}
	for _, p := range r.procs {
		for i, out := range p.cfg.Outputs {
			if n, ok := planned[out]; ok {
				r.outParts[out] = n
				continue
			}
			if err := r.createTopic(ctx, out, p.partitions, nil); err != nil {
				refused(p.cfg.OutputRanges[i], "output topic", out, err)
				continue
			}
			planned[out] = p.partitions
			r.outParts[out] = p.partitions
		}
	}
	// Dead-letter topics, like outputs (the task produces its poison records there).
	for _, p := range r.procs {
		if p.cfg.OnError != config.OnErrorDeadLetter {
			continue
		}
		dlq := r.cfg.DeadLetterTopic(p.cfg.Name)
		if n, ok := planned[dlq]; ok {
			r.outParts[dlq] = n
			continue
		}
		if err := r.createTopic(ctx, dlq, p.partitions, nil); err != nil {
			refused(p.cfg.OnErrorRange, "dead-letter topic", dlq, err)
			continue
		}
		planned[dlq] = p.partitions
		r.outParts[dlq] = p.partitions
	}

	// Changelogs.
	tm, err := changelog.NewTopicManager(r.adm, changelog.TopicSettings{AppID: r.cfg.ApplicationID, Logger: r.log})
	if err != nil {
		return fmt.Errorf("runtime: %w", err)
	}
	for _, p := range r.procs {
		for _, spec := range changelog.TopicSpecs(p.stores) {
			err := tm.Ensure(ctx, p.partitions, []changelog.TopicSpec{spec})
			if err == nil {
				continue
			}
			rng := p.cfg.DeclRange
			for _, sc := range p.cfg.Stores {
				if sc.Name == spec.Store {
					rng = sc.DeclRange
				}
			}
			var pm *changelog.PartitionMismatchError
			switch {
			case errors.As(err, &pm):
				diag(rng, "Changelog partition mismatch",
					"Store %q: %v. The changelog must have as many partitions as the processor's inputs; delete the changelog topic (its store is then restored empty) or fix the inputs.",
					spec.Store, err)
			case ctx.Err() != nil:
				return fmt.Errorf("runtime: processor %s: %w", p.cfg.Name, err)
			default:
				refused(rng, "the changelog topic", changelog.TopicName(r.cfg.ApplicationID, spec.Store), err)
			}
		}
	}
	if diags.HasErrors() {
		return &DiagnosticsError{Diags: diags, Files: r.cfg.Files}
	}
	return nil
}

// partitionCounts lists the topics the configuration names and returns the partition count
// of those that exist.
func (r *Runtime) partitionCounts(ctx context.Context) (map[string]int32, error) {
	names := make(map[string]bool)
	for _, t := range r.cfg.Topics {
		names[t.Name] = true
	}
	for _, rp := range r.cfg.Repartitions {
		names[rp.Topic] = true
	}
	for _, p := range r.cfg.Processors {
		for _, t := range p.Inputs {
			names[t] = true
		}
		for _, t := range p.Outputs {
			names[t] = true
		}
		if p.OnError == config.OnErrorDeadLetter {
			names[r.cfg.DeadLetterTopic(p.Name)] = true
		}
	}
	// WithAuthorizedOps bypasses the client's metadata cache, which would otherwise keep the
	// topics about to be created as unknown for a while: admin requests that need leaders
	// (DeleteRecords of the purge) would fail on them.
	details, err := r.adm.ListTopics(kadm.WithAuthorizedOps(ctx), slices.Sorted(maps.Keys(names))...)
	if err != nil {
		return nil, fmt.Errorf("runtime: list topics on %s: %w", strings.Join(r.opts.Brokers, ","), err)
	}
	parts := make(map[string]int32)
	for name, d := range details {
		switch {
		case d.Err == nil:
			parts[name] = int32(len(d.Partitions))
		case errors.Is(d.Err, kerr.UnknownTopicOrPartition):
		default:
			return nil, fmt.Errorf("runtime: describe topic %s: %w", name, d.Err)
		}
	}
	return parts, nil
}

// createTopic creates a topic; one that another instance created meanwhile is fine.
func (r *Runtime) createTopic(ctx context.Context, name string, partitions int32, configs map[string]string) error {
	cfgs := make(map[string]*string, len(configs))
	for k, v := range configs {
		cfgs[k] = kadm.StringPtr(v)
	}
	resp, err := r.adm.CreateTopic(ctx, partitions, -1, cfgs, name)
	if err == nil {
		err = resp.Err
	}
	switch {
	case errors.Is(err, kerr.TopicAlreadyExists):
		r.log.Debug("topic created meanwhile by another instance", "topic", name)
	case err != nil:
		return fmt.Errorf("runtime: create topic %s with %d partitions: %w", name, partitions, err)
	default:
		r.log.Info("created topic", "topic", name, "partitions", partitions, "configs", configs)
	}
	return nil
}
