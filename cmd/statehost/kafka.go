package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/internal/kafkalog"
)

// defaultBrokers is the default of --brokers: the default --listen of statehost broker.
const defaultBrokers = "127.0.0.1:9092"

// topicCheckTimeout bounds the first request to the brokers, so that an address where no
// broker listens fails the command instead of retrying for ever.
const topicCheckTimeout = 15 * time.Second

// newClient returns a Kafka client of the comma-separated brokers that logs to log.
func newClient(log hclog.Logger, brokers string, opts ...kgo.Opt) (*kgo.Client, error) {
	var seeds []string
	for _, b := range strings.Split(brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			seeds = append(seeds, b)
		}
	}
	if len(seeds) == 0 {
		return nil, fmt.Errorf("no broker address in %q", brokers)
	}
	opts = append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.WithLogger(kafkalog.New(log))}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("client of %s: %w", brokers, err)
	}
	return cl, nil
}

// requireTopic returns the partitions of topic, or an error that says the topic does not
// exist.
func requireTopic(ctx context.Context, cl *kgo.Client, brokers, topic string) ([]int32, error) {
	ctx, cancel := context.WithTimeout(ctx, topicCheckTimeout)
	defer cancel()
	topics, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("no answer from brokers %s within %s", brokers, topicCheckTimeout)
		}
		return nil, fmt.Errorf("looking up topic %s on %s: %w", topic, brokers, err)
	}
	td, ok := topics[topic]
	if !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
		return nil, fmt.Errorf("topic %s does not exist on %s", topic, brokers)
	}
	if td.Err != nil {
		return nil, fmt.Errorf("looking up topic %s on %s: %w", topic, brokers, td.Err)
	}
	return td.Partitions.Numbers(), nil
}
