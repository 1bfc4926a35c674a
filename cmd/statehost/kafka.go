package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/config"
	"github.com/statehost/statehost/internal/kafkaclient"
)

// defaultBrokers is the default of --brokers: the default --listen of statehost broker.
const defaultBrokers = "127.0.0.1:9092"

// topicCheckTimeout bounds the first request to the brokers, so that an address where no
// broker listens fails the command instead of retrying for ever.
const topicCheckTimeout = 15 * time.Second

// kafkaFlags are the flags of the commands that talk to Kafka without a configuration of
// their own: --brokers, and --config, whose kafka block gives the brokers (when --brokers
// is not set) and the client settings (TLS, SASL, client id, ...).
type kafkaFlags struct {
	fs      *flag.FlagSet
	brokers string
	config  string
}

func addKafkaFlags(fs *flag.FlagSet) *kafkaFlags {
	f := &kafkaFlags{fs: fs}
	fs.StringVar(&f.brokers, "brokers", defaultBrokers, "comma-separated `ADDRS` (host:port) of the brokers; default the --config file's kafka.brokers, or "+defaultBrokers)
	fs.StringVar(&f.config, "config", "", "read the brokers and the client settings (kafka.tls, kafka.sasl, client_id, ...) of the kafka block of this configuration `FILE`")
	return f
}

// kafkaTarget is where a command's client connects (comma-separated brokers) and with which
// settings.
type kafkaTarget struct {
	brokers string
	kafka   config.Kafka
	// configured is true when kafka is the kafka block of a --config file, false when it is
	// the defaults (config.DefaultKafka).
	configured bool
}

// resolve returns the target of the flags once they are parsed; ok is false when the
// configuration file has errors (printed).
func (f *kafkaFlags) resolve(env *cliEnv) (t kafkaTarget, ok bool) {
	t = kafkaTarget{brokers: f.brokers, kafka: config.DefaultKafka("statehost")}
	if f.config == "" {
		return t, true
	}
	cfg, ok := loadConfig(env, f.config, config.Options{})
	if !ok {
		return t, false
	}
	t.kafka, t.configured = cfg.Kafka, true
	set := false
	f.fs.Visit(func(fl *flag.Flag) { set = set || fl.Name == "brokers" })
	switch {
	case set:
	case len(cfg.Kafka.Brokers) > 0:
		t.brokers = strings.Join(cfg.Kafka.Brokers, ",")
	default:
		t.brokers = cfg.EmbeddedBroker.Listen
	}
	return t, true
}

// newClient returns a Kafka client of the target that logs to log, its client id
// <client_id>-<role>.
func newClient(log hclog.Logger, t kafkaTarget, role string, opts ...kgo.Opt) (*kgo.Client, error) {
	seeds, err := t.seeds()
	if err != nil {
		return nil, err
	}
	opts = append(kafkaclient.Opts(t.kafka, seeds, role, log), opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("client of %s: %w", t.brokers, err)
	}
	return cl, nil
}

func (t kafkaTarget) seeds() ([]string, error) {
	var seeds []string
	for _, b := range strings.Split(t.brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			seeds = append(seeds, b)
		}
	}
	if len(seeds) == 0 {
		return nil, fmt.Errorf("no broker address in %q", t.brokers)
	}
	return seeds, nil
}

// check fails at once when the brokers refuse the target's settings (a wrong password, an
// untrusted certificate, plain text to a TLS port), with an error that says why; brokers
// that do not answer are left to the command's own wait.
func (t kafkaTarget) check(ctx context.Context) error {
	seeds, err := t.seeds()
	if err != nil {
		return err
	}
	err = kafkaclient.Check(ctx, t.kafka, seeds)
	if _, unreachable := errors.AsType[*kafkaclient.UnreachableError](err); unreachable {
		return nil
	}
	return err
}

// requireTopic returns the partitions of topic, or an error that says the topic does not
// exist.
func requireTopic(ctx context.Context, cl *kgo.Client, t kafkaTarget, topic string) ([]int32, error) {
	if err := t.check(ctx); err != nil {
		return nil, err
	}
	brokers := t.brokers
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
