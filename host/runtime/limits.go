package runtime

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/changelog"
	"github.com/statehost/statehost/config"
)

// Record limits: the largest record batch that a record of each topic the tasks produce to
// may take alone, learned from the broker when the runtime starts (learnLimits). The engine
// refuses a state write whose changelog record, or an emit whose record, would not fit
// (CodeLimit, at the call; engine.Task.StoreLimits and OutputLimits), and a dead letter that
// would not fit is cut (poison.go): a record the producer or the broker refuses fails the
// commit of its task, and every commit after it, whatever on_error says.
//
// A topic's limit is the smaller of its max.message.bytes (described; the broker's
// message.max.bytes when the topic's is unknown, Kafka's default 1,048,588 when both are) and
// the producer's batch bound (kgo.ProducerBatchMaxBytes, 1 MiB: producerOpts) less the 4
// bytes that franz-go counts for the batch's length prefix in a produce request. Sizes are
// those of uncompressed batches (the producer's bound is checked before compression, and a
// batch compresses to at most its size), exactly as recordbatch.Size computes them.
//
// A limit changed on the broker while the runtime runs is not seen until it starts again: a
// record the broker then refuses fails the commit with an error naming the input record it
// belongs to (changelog.ProduceError).

// kafkaMaxMessageBytes is Kafka's default message.max.bytes (and so a topic's
// max.message.bytes): the limit assumed when the broker tells neither.
const kafkaMaxMessageBytes = 1048588

// batchLengthPrefix is what franz-go adds to a record batch's size when it checks the batch
// against its bound: the length of the batch's bytes in the produce request (an int32, or a
// shorter uvarint in flexible versions).
const batchLengthPrefix = 4

// learnLimits learns the limit of every changelog, output and dead-letter topic of the
// processors and hands each processor its stores' and outputs' (storeLimits, outputLimits).
// It never fails: a topic or broker whose configs cannot be read gets the broker's or
// Kafka's default, with a warning.
func (ts topicSetup) learnLimits(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	batch := 1 << 20
	if v, ok := ts.rt.kafka.prodCl.OptValue(kgo.ProducerBatchMaxBytes).(int32); ok && v > 0 {
		batch = int(v)
	}
	batch -= batchLengthPrefix

	topics := map[string]bool{}
	for _, p := range ts.rt.procs {
		for _, out := range p.cfg.Outputs {
			topics[out] = true
		}
		if p.cfg.OnError == config.OnErrorDeadLetter {
			topics[ts.rt.cfg.DeadLetterTopic(p.cfg.Name)] = true
		}
		for _, s := range p.stores {
			if !s.LoggingDisabled {
				topics[changelog.TopicName(ts.rt.cfg.ApplicationID, s.Name)] = true
			}
		}
	}
	broker := ts.brokerMaxMessageBytes(ctx)
	ts.rt.limits = make(map[string]int, len(topics))
	described, err := ts.describeTopicConfigs(ctx, slices.Sorted(maps.Keys(topics)))
	if err != nil {
		ts.rt.log.Warn("could not read the topics' max.message.bytes: the broker's message.max.bytes bounds their records", "error", err)
	}
	for _, rc := range described {
		if rc.Err != nil {
			ts.rt.log.Warn("could not read a topic's max.message.bytes: the broker's message.max.bytes bounds its records", "topic", rc.Name, "error", rc.Err)
			continue
		}
		if n, ok := intConfig(rc.Configs, "max.message.bytes"); ok {
			ts.rt.limits[rc.Name] = min(n, batch)
		}
	}
	for topic := range topics {
		if _, ok := ts.rt.limits[topic]; !ok {
			ts.rt.limits[topic] = min(broker, batch)
		}
		ts.rt.log.Debug("record limit", "topic", topic, "max_batch_bytes", ts.rt.limits[topic])
	}
	for _, p := range ts.rt.procs {
		p.outputLimits = make([]int, len(p.cfg.Outputs))
		for i, out := range p.cfg.Outputs {
			p.outputLimits[i] = ts.rt.limits[out]
		}
		p.storeLimits = map[string]int{}
		for _, s := range p.stores {
			if !s.LoggingDisabled {
				p.storeLimits[s.Name] = ts.rt.limits[changelog.TopicName(ts.rt.cfg.ApplicationID, s.Name)]
			}
		}
	}
}

// newTopicWait bounds how long learnLimits asks again for the configs of a topic the broker
// does not know yet.
const newTopicWait = 10 * time.Second

// describeTopicConfigs describes the configs of topics. A topic created a moment ago (by this
// start, or by another instance) may be unknown still to the broker asked, which learns of it
// from the controller a moment later on Apache Kafka: those are asked for again, with
// backoff, for up to newTopicWait, and keep their error after that.
func (ts topicSetup) describeTopicConfigs(ctx context.Context, topics []string) (kadm.ResourceConfigs, error) {
	deadline := time.Now().Add(newTopicWait)
	backoff := 50 * time.Millisecond
	var out kadm.ResourceConfigs
	for {
		described, err := ts.rt.kafka.adm.DescribeTopicConfigs(ctx, topics...)
		if err != nil {
			return append(out, described...), err
		}
		topics = topics[:0]
		for _, rc := range described {
			if errors.Is(rc.Err, kerr.UnknownTopicOrPartition) && time.Now().Before(deadline) {
				topics = append(topics, rc.Name)
			} else {
				out = append(out, rc)
			}
		}
		if len(topics) == 0 {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return out, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// brokerMaxMessageBytes returns the smallest message.max.bytes of the brokers, or Kafka's
// default when none tells.
func (ts topicSetup) brokerMaxMessageBytes(ctx context.Context) int {
	n := kafkaMaxMessageBytes
	md, err := ts.rt.kafka.adm.BrokerMetadata(ctx)
	if err != nil {
		ts.rt.log.Warn("could not list the brokers to read their message.max.bytes", "error", err)
		return n
	}
	described, err := ts.rt.kafka.adm.DescribeBrokerConfigs(ctx, md.Brokers.NodeIDs()...)
	if err != nil {
		ts.rt.log.Warn("could not read the brokers' message.max.bytes", "error", err)
		return n
	}
	found := false
	for _, rc := range described {
		if v, ok := intConfig(rc.Configs, "message.max.bytes"); ok && rc.Err == nil && (!found || v < n) {
			n, found = v, true
		}
	}
	return n
}

// intConfig returns the value of the config key among cs, when it is a positive number.
func intConfig(cs []kadm.Config, key string) (int, bool) {
	for _, c := range cs {
		if c.Key != key || c.Value == nil {
			continue
		}
		if n, err := strconv.Atoi(*c.Value); err == nil && n > 0 {
			return n, true
		}
	}
	return 0, false
}
