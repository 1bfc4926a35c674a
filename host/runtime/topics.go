package runtime

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/statehost/statehost/changelog"
	"github.com/statehost/statehost/config"
)

// repartitionTopicConfigs are the configs of a created repartition topic: records are
// deleted, never compacted, and kept until the runtime purges them below its committed
// offsets (as Kafka Streams creates its repartition topics).
var repartitionTopicConfigs = map[string]string{
	"cleanup.policy": "delete",
	"retention.ms":   "-1",
}

// topicSetup checks the configuration's topics against the broker and creates the missing
// ones, when the runtime starts (New), and learns the limits of the topics it produces to
// (limits.go).
type topicSetup struct{ rt *Runtime }

// setupTopics checks the topology against the broker, then creates the topics the
// configuration declares. Checks first, and all of them, so that a configuration with
// problems creates nothing and its problems come back together as one *DiagnosticsError:
// every input exists or has a block, the inputs of a processor are co-partitioned, declared
// partition counts match existing topics, existing changelogs have their processor's
// partition count, the session timeout is within the brokers' range, and the broker accepts
// every topic to create (a validate-only CreateTopics: a bad config value). Then the topic
// and repartition blocks' missing topics are created, output topics that do not exist with
// the partition count of the processor that writes them, the dead-letter topics of
// processors with on_error = "dead_letter" likewise, and the changelogs with their
// processor's count.
func (ts topicSetup) setupTopics(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	parts, err := ts.partitionCounts(ctx)
	if err != nil {
		return err
	}
	tm, err := changelog.NewTopicManager(ts.rt.kafka.adm, changelog.TopicSettings{AppID: ts.rt.cfg.ApplicationID,
		ReplicationFactor: ts.rt.cfg.Kafka.ReplicationFactor, Logger: ts.rt.log})
	if err != nil {
		return fmt.Errorf("runtime: %w", err)
	}
	var diags hcl.Diagnostics
	diag := func(rng hcl.Range, summary, detail string, args ...any) {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary,
			Detail: fmt.Sprintf(detail, args...), Subject: &rng})
	}

	planned := ts.checkDeclared(parts, diag)
	known := ts.checkInputs(planned, diag)
	ts.checkChangelogs(parts, known, diag)
	diags = append(diags, ts.checkSessionTimeout(ctx)...)
	rfOK := ts.checkReplicationFactor(ctx, diag)

	creates := ts.planTopics(parts, planned, known, tm)
	refused := func(c topicCreate, err error) {
		diag(c.rng, "Topic not created", "The broker refused to create %s %q: %v.", c.what, c.name, err)
	}
	if rfOK { // else the broker would refuse every topic for the same reason
		if err := ts.validateTopics(ctx, creates, refused); err != nil {
			return err
		}
	}
	if diags.HasErrors() {
		return &DiagnosticsError{Diags: byPosition(diags), Files: ts.rt.cfg.Files}
	}

	if err := ts.createTopics(ctx, creates, tm, refused, diag); err != nil {
		return err
	}
	if diags.HasErrors() {
		return &DiagnosticsError{Diags: byPosition(diags), Files: ts.rt.cfg.Files}
	}
	return nil
}

// diagFunc records an error diagnostic that points at rng, its detail formatted from args.
type diagFunc func(rng hcl.Range, summary, detail string, args ...any)

// checkDeclared checks the partition counts of the topic and repartition blocks against the
// topics that exist (parts: topic -> partition count), with diag for each mismatch, since
// statehost never changes the partitions of an existing topic. It returns the partition count
// of every topic once the declared ones exist: parts and the declared topics that do not.
func (ts topicSetup) checkDeclared(parts map[string]int32, diag diagFunc) map[string]int32 {
	planned := maps.Clone(parts)
	for _, t := range ts.rt.cfg.Topics {
		if n, ok := parts[t.Name]; ok && n != t.Partitions {
			diag(t.PartitionsRange, "Partition count mismatch",
				"Topic %q exists on the broker with %d partitions, but its topic block says %d. Statehost does not change the partitions of an existing topic: fix the block, or recreate the topic.",
				t.Name, n, t.Partitions)
		} else if !ok {
			planned[t.Name] = t.Partitions
		}
	}
	for _, rp := range ts.rt.cfg.Repartitions {
		if n, ok := parts[rp.Topic]; ok && n != rp.Partitions {
			diag(rp.PartitionsRange, "Partition count mismatch",
				"Repartition topic %q exists on the broker with %d partitions, but the repartition block says %d. Delete the internal topic (its records are transient) or fix the block.",
				rp.Topic, n, rp.Partitions)
		} else if !ok {
			planned[rp.Topic] = rp.Partitions
		}
	}
	return planned
}

// checkInputs checks, with diag, that the inputs of every processor exist or will
// (planned: topic -> partition count) and that the inputs of one processor are
// co-partitioned, since partition N of every input goes to task N. It sets each processor's
// partition count from its inputs, and returns the processors whose count is known: every
// input found, all with the same count, and at least one partition; planTopics and
// checkChangelogs pass over the others.
func (ts topicSetup) checkInputs(planned map[string]int32, diag diagFunc) map[*processor]bool {
	known := make(map[*processor]bool)
	for _, p := range ts.rt.procs {
		pc := p.cfg
		counts := make(map[int32][]string)
		ok := true
		for i, in := range pc.Inputs {
			n, exists := planned[in]
			if !exists {
				diag(pc.InputRanges[i], "Unknown input topic",
					"Processor %q reads topic %q, which neither exists on the broker (%s) nor has a topic block. Create the topic, or declare it with a topic block so that statehost creates it.",
					pc.Name, in, strings.Join(ts.rt.opts.Brokers, ","))
				ok = false
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
			ok = false
		}
		known[p] = ok && p.partitions > 0
	}
	return known
}

// checkChangelogs checks, with diag, that the existing changelogs (parts: topic -> partition
// count) of the processors whose partition count is known have as many partitions as their
// processor's inputs, since task N writes changelog partition N.
func (ts topicSetup) checkChangelogs(parts map[string]int32, known map[*processor]bool, diag diagFunc) {
	for _, p := range ts.rt.procs {
		if !known[p] {
			continue
		}
		for _, spec := range changelog.TopicSpecs(p.stores) {
			name := changelog.TopicName(ts.rt.cfg.ApplicationID, spec.Store)
			if n, ok := parts[name]; ok && n != p.partitions {
				diagChangelogMismatch(diag, p, spec.Store, &changelog.PartitionMismatchError{Topic: name, Expected: p.partitions, Actual: n})
			}
		}
	}
}

// createTopics creates the declared topics of creates, the missing outputs and dead-letter
// topics, calling refused for each one the broker refuses, then has tm ensure the changelogs
// of every processor (it creates the missing ones, and checks the existing ones again), with
// diag for each one refused or of another partition count. It returns an error only when ctx
// ends while a changelog is ensured: the others fail for the same reason.
func (ts topicSetup) createTopics(ctx context.Context, creates []topicCreate, tm *changelog.TopicManager, refused func(topicCreate, error), diag diagFunc) error {
	for _, c := range creates {
		if c.changelog {
			continue
		}
		if err := ts.createTopic(ctx, c.name, c.partitions, c.configs); err != nil {
			refused(c, err)
		}
	}
	for _, p := range ts.rt.procs {
		for _, spec := range changelog.TopicSpecs(p.stores) {
			err := tm.Ensure(ctx, p.partitions, []changelog.TopicSpec{spec})
			if err == nil {
				continue
			}
			var pm *changelog.PartitionMismatchError
			switch {
			case errors.As(err, &pm):
				diagChangelogMismatch(diag, p, spec.Store, err)
			case ctx.Err() != nil:
				return fmt.Errorf("runtime: processor %s: %w", p.cfg.Name, err)
			default:
				diag(storeRange(p, spec.Store), "Topic not created", "The broker refused to create the changelog topic %q: %v.",
					changelog.TopicName(ts.rt.cfg.ApplicationID, spec.Store), err)
			}
		}
	}
	return nil
}

// byPosition sorts diags by their position in the file, as config.Load does.
func byPosition(diags hcl.Diagnostics) hcl.Diagnostics {
	slices.SortStableFunc(diags, func(a, b *hcl.Diagnostic) int {
		if c := strings.Compare(a.Subject.Filename, b.Subject.Filename); c != 0 {
			return c
		}
		return a.Subject.Start.Byte - b.Subject.Start.Byte
	})
	return diags
}

// storeRange returns the range of the store block named store of p, or p's block.
func storeRange(p *processor, store string) hcl.Range {
	for _, sc := range p.cfg.Stores {
		if sc.Name == store {
			return sc.DeclRange
		}
	}
	return p.cfg.DeclRange
}

// diagChangelogMismatch records, with diag, that the changelog of store has another partition
// count than its processor p (err says which).
func diagChangelogMismatch(diag diagFunc, p *processor, store string, err error) {
	diag(storeRange(p, store), "Changelog partition mismatch",
		"Store %q: %v. The changelog must have as many partitions as the processor's inputs; delete the changelog topic (its store is then restored empty) or fix the inputs.",
		store, err)
}

// topicCreate is a topic that setupTopics creates.
type topicCreate struct {
	name       string
	partitions int32
	configs    map[string]string
	what       string    // for messages: "topic", "output topic", ...
	rng        hcl.Range // what a refusal points at
	changelog  bool      // created by the changelog's TopicManager
}

// planTopics returns the topics to create, in order: the missing topics of topic and
// repartition blocks, then the missing outputs and dead-letter topics of the processors whose
// partition count is known, with that count, then their missing changelogs. It records the
// partition count of every output and dead-letter topic in r.outParts.
func (ts topicSetup) planTopics(parts, planned map[string]int32, known map[*processor]bool, tm *changelog.TopicManager) []topicCreate {
	var creates []topicCreate
	for _, t := range ts.rt.cfg.Topics {
		if _, ok := parts[t.Name]; !ok {
			creates = append(creates, topicCreate{name: t.Name, partitions: t.Partitions, configs: t.Configs, what: "topic", rng: t.DeclRange})
		}
	}
	for _, rp := range ts.rt.cfg.Repartitions {
		if _, ok := parts[rp.Topic]; !ok {
			creates = append(creates, topicCreate{name: rp.Topic, partitions: rp.Partitions, configs: repartitionTopicConfigs, what: "repartition topic", rng: rp.DeclRange})
		}
	}
	out := func(p *processor, topic, what string, rng hcl.Range) {
		if n, ok := planned[topic]; ok {
			ts.rt.outParts[topic] = n
			return
		}
		creates = append(creates, topicCreate{name: topic, partitions: p.partitions, what: what, rng: rng})
		planned[topic] = p.partitions
		ts.rt.outParts[topic] = p.partitions
	}
	for _, p := range ts.rt.procs {
		if !known[p] {
			continue
		}
		for i, o := range p.cfg.Outputs {
			out(p, o, "output topic", p.cfg.OutputRanges[i])
		}
	}
	// Dead-letter topics, like outputs (the task produces its poison records there).
	for _, p := range ts.rt.procs {
		if known[p] && p.cfg.OnError == config.OnErrorDeadLetter {
			out(p, ts.rt.cfg.DeadLetterTopic(p.cfg.Name), "dead-letter topic", p.cfg.OnErrorRange)
		}
	}
	for _, p := range ts.rt.procs {
		if !known[p] {
			continue
		}
		for _, spec := range changelog.TopicSpecs(p.stores) {
			if name := changelog.TopicName(ts.rt.cfg.ApplicationID, spec.Store); !contains(parts, name) {
				creates = append(creates, topicCreate{name: name, partitions: p.partitions, configs: tm.Configs(spec),
					what: "the changelog topic", rng: storeRange(p, spec.Store), changelog: true})
			}
		}
	}
	return creates
}

func contains(m map[string]int32, k string) bool { _, ok := m[k]; return ok }

// validateTopics asks the broker whether it would create each of creates (CreateTopics with
// validate_only), in one request, and calls refused for each one it refuses. A topic that
// exists meanwhile (another instance created it) is fine. It returns an error only when
// the request fails.
func (ts topicSetup) validateTopics(ctx context.Context, creates []topicCreate, refused func(topicCreate, error)) error {
	if len(creates) == 0 {
		return nil
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	req.ValidateOnly = true
	req.TimeoutMillis = 30000
	byName := make(map[string]topicCreate, len(creates))
	for _, c := range creates {
		byName[c.name] = c
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = c.name, c.partitions, ts.replicationFactor()
		for _, k := range slices.Sorted(maps.Keys(c.configs)) {
			cfg := kmsg.NewCreateTopicsRequestTopicConfig()
			cfg.Name, cfg.Value = k, kmsg.StringPtr(c.configs[k])
			t.Configs = append(t.Configs, cfg)
		}
		req.Topics = append(req.Topics, t)
	}
	resp, err := req.RequestWith(ctx, ts.rt.kafka.prodCl)
	if err != nil {
		return fmt.Errorf("runtime: check the topics to create on %s: %w", strings.Join(ts.rt.opts.Brokers, ","), err)
	}
	for _, t := range resp.Topics {
		err := kerr.ErrorForCode(t.ErrorCode)
		if err == nil || errors.Is(err, kerr.TopicAlreadyExists) {
			continue
		}
		if t.ErrorMessage != nil && *t.ErrorMessage != "" {
			err = fmt.Errorf("%w (%s)", err, *t.ErrorMessage)
		}
		if c, ok := byName[t.Topic]; ok {
			refused(c, err)
		}
	}
	return nil
}

// checkReplicationFactor checks, with diag, that the cluster has at least as many brokers as
// kafka.replication_factor asks for, and reports whether it does (or could not tell).
func (ts topicSetup) checkReplicationFactor(ctx context.Context, diag diagFunc) bool {
	rf := ts.rt.cfg.Kafka.ReplicationFactor
	if rf <= 1 {
		return true
	}
	md, err := ts.rt.kafka.adm.BrokerMetadata(ctx)
	if err != nil {
		ts.rt.log.Warn("cannot list the brokers to check the replication factor against them", "error", err)
		return true
	}
	if n := len(md.Brokers); n < int(rf) {
		diag(ts.rt.cfg.Kafka.ReplicationFactorRange, "Replication factor above the cluster's size",
			"The replication_factor %d needs at least %d brokers, but the cluster (%s) has %d: %s. Lower it, or leave it out for the broker's default.replication.factor.",
			rf, rf, strings.Join(ts.rt.opts.Brokers, ","), n, brokerList(md.Brokers))
		return false
	}
	return true
}

// brokerList names brokers as "node 1 (host:port), node 2 (host:port)".
func brokerList(bs kadm.BrokerDetails) string {
	var out []string
	for _, b := range bs {
		out = append(out, fmt.Sprintf("node %d (%s:%d)", b.NodeID, b.Host, b.Port))
	}
	return strings.Join(out, ", ")
}

// replicationFactor is the replication factor of the topics the runtime creates:
// kafka.replication_factor, or -1 (the broker's default.replication.factor).
func (ts topicSetup) replicationFactor() int16 {
	if rf := ts.rt.cfg.Kafka.ReplicationFactor; rf > 0 {
		return rf
	}
	return -1
}

// The broker settings that bound the session timeout of a group member.
const (
	brokerMinSession = "group.min.session.timeout.ms"
	brokerMaxSession = "group.max.session.timeout.ms"
)

// checkSessionTimeout compares the group session timeout with the range every broker allows
// (group.min.session.timeout.ms to group.max.session.timeout.ms, which DescribeConfigs tells:
// 6s to 30m by default on Kafka, 100ms to 5m on the embedded broker). Outside it, the broker
// refuses the group's members with INVALID_SESSION_TIMEOUT. A broker that does not tell (no
// permission to describe its configs) is not checked; that is logged.
func (ts topicSetup) checkSessionTimeout(ctx context.Context) hcl.Diagnostics {
	md, err := ts.rt.kafka.adm.BrokerMetadata(ctx)
	if err != nil {
		ts.rt.log.Warn("cannot list the brokers to check the session timeout against them", "error", err)
		return nil
	}
	rcs, err := ts.rt.kafka.adm.DescribeBrokerConfigs(ctx, md.Brokers.NodeIDs()...)
	if err != nil && len(rcs) == 0 {
		ts.rt.log.Warn("cannot read the brokers' session timeout bounds; session_timeout is not checked against them", "error", err)
		return nil
	}
	lo, hi := int64(-1), int64(-1)
	var loAt, hiAt string // the broker that says lo, hi
	for _, rc := range rcs {
		if rc.Err != nil {
			ts.rt.log.Warn("cannot read a broker's session timeout bounds", "broker", rc.Name, "error", rc.Err)
			continue
		}
		for _, c := range rc.Configs {
			if c.Value == nil {
				continue
			}
			v, err := strconv.ParseInt(*c.Value, 10, 64)
			switch {
			case err != nil:
			case c.Key == brokerMinSession && v > lo:
				lo, loAt = v, rc.Name
			case c.Key == brokerMaxSession && (hi < 0 || v < hi):
				hi, hiAt = v, rc.Name
			}
		}
	}
	ms := ts.rt.opts.SessionTimeout.Milliseconds()
	var bound string
	switch {
	case lo >= 0 && ms < lo:
		bound = fmt.Sprintf("shorter than %s = %d of broker %s", brokerMinSession, lo, loAt)
	case hi >= 0 && ms > hi:
		bound = fmt.Sprintf("longer than %s = %d of broker %s", brokerMaxSession, hi, hiAt)
	default:
		return nil
	}
	var allowed string
	switch ms := func(v int64) string { return config.FormatDuration(time.Duration(v) * time.Millisecond) }; {
	case lo >= 0 && hi >= 0:
		allowed = fmt.Sprintf("from %v to %v", ms(lo), ms(hi))
	case lo >= 0:
		allowed = fmt.Sprintf("to at least %v", ms(lo))
	default:
		allowed = fmt.Sprintf("to at most %v", ms(hi))
	}
	rng := ts.rt.cfg.SessionTimeoutRange
	return hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  "Session timeout outside the broker's range",
		Detail: fmt.Sprintf("The group session timeout %s (session_timeout) is %s: the broker would refuse the application's consumer group members (INVALID_SESSION_TIMEOUT). Set session_timeout %s, or change the broker's settings.",
			config.FormatDuration(ts.rt.opts.SessionTimeout), bound, allowed),
		Subject: &rng,
	}}
}

// partitionCounts lists the topics the configuration names (the changelogs too) and returns
// the partition count of those that exist.
func (ts topicSetup) partitionCounts(ctx context.Context) (map[string]int32, error) {
	names := make(map[string]bool)
	for _, t := range ts.rt.cfg.Topics {
		names[t.Name] = true
	}
	for _, rp := range ts.rt.cfg.Repartitions {
		names[rp.Topic] = true
	}
	for _, p := range ts.rt.cfg.Processors {
		for _, t := range p.Inputs {
			names[t] = true
		}
		for _, t := range p.Outputs {
			names[t] = true
		}
		if p.OnError == config.OnErrorDeadLetter {
			names[ts.rt.cfg.DeadLetterTopic(p.Name)] = true
		}
	}
	for _, p := range ts.rt.procs {
		for _, spec := range changelog.TopicSpecs(p.stores) {
			names[changelog.TopicName(ts.rt.cfg.ApplicationID, spec.Store)] = true
		}
	}
	// WithAuthorizedOps bypasses the client's metadata cache, which would otherwise keep the
	// topics about to be created as unknown for a while: admin requests that need leaders
	// (DeleteRecords of the purge) would fail on them.
	details, err := ts.rt.kafka.adm.ListTopics(kadm.WithAuthorizedOps(ctx), slices.Sorted(maps.Keys(names))...)
	if err != nil {
		return nil, fmt.Errorf("runtime: list topics on %s: %w", strings.Join(ts.rt.opts.Brokers, ","), err)
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
func (ts topicSetup) createTopic(ctx context.Context, name string, partitions int32, configs map[string]string) error {
	cfgs := make(map[string]*string, len(configs))
	for k, v := range configs {
		cfgs[k] = kadm.StringPtr(v)
	}
	resp, err := ts.rt.kafka.adm.CreateTopic(ctx, partitions, ts.replicationFactor(), cfgs, name)
	if err == nil {
		err = resp.Err
	}
	switch {
	case errors.Is(err, kerr.TopicAlreadyExists):
		ts.rt.log.Debug("topic created meanwhile by another instance", "topic", name)
	case err != nil:
		return fmt.Errorf("runtime: create topic %s with %d partitions: %w", name, partitions, err)
	default:
		ts.rt.log.Info("created topic", "topic", name, "partitions", partitions, "configs", configs)
	}
	return nil
}
