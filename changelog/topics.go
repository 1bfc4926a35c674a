package changelog

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TopicName returns the changelog topic of a store: "<appID>-<store>-changelog".
func TopicName(appID, store string) string { return appID + "-" + store + "-changelog" }

// DefaultTopicConfigs are the configs of every key-value changelog topic before app-wide and per-store configs: cleanup.policy=compact.
func DefaultTopicConfigs() map[string]string { return map[string]string{"cleanup.policy": "compact"} }

// TopicSpec describes the changelog topic of one logged store.
type TopicSpec struct {
	// Store is the store's name; the topic is TopicName(appID, Store).
	Store string
	// Defaults are the configs of the store's type (StoreSpec.TopicDefaults); they override
	// DefaultTopicConfigs and are overridden by app-wide configs and Configs.
	Defaults map[string]string
	// Configs are the store's topic configs; they override app-wide configs and the defaults.
	Configs map[string]string
}

// TopicSettings configure a TopicManager.
type TopicSettings struct {
	// AppID is the application id that prefixes topic names. Required.
	AppID string
	// ReplicationFactor of created topics. Default 0 means -1: the broker's default.replication.factor.
	ReplicationFactor int16
	// Configs are app-wide topic configs, applied over DefaultTopicConfigs and under each store's configs. Default none.
	Configs map[string]string
	// Logger receives a line per created topic. Default hclog.NewNullLogger().
	Logger hclog.Logger
}

// TopicManager creates and checks changelog topics.
type TopicManager struct {
	adm *kadm.Client
	set TopicSettings
	log hclog.Logger
}

// NewTopicManager returns a TopicManager that talks to the cluster through adm.
func NewTopicManager(adm *kadm.Client, s TopicSettings) (*TopicManager, error) {
	if adm == nil {
		return nil, errors.New("changelog: nil kadm client")
	}
	if s.AppID == "" {
		return nil, errors.New("changelog: TopicSettings.AppID is required")
	}
	if s.ReplicationFactor == 0 {
		s.ReplicationFactor = -1
	}
	if s.Logger == nil {
		s.Logger = hclog.NewNullLogger()
	}
	return &TopicManager{adm: adm, set: s, log: s.Logger.Named("changelog")}, nil
}

// Configs returns the configs a store's changelog topic is created with:
// DefaultTopicConfigs, then the store type's defaults, then the app-wide configs, then the
// store's (the last wins).
func (m *TopicManager) Configs(spec TopicSpec) map[string]string {
	out := DefaultTopicConfigs()
	maps.Copy(out, spec.Defaults)
	maps.Copy(out, m.set.Configs)
	maps.Copy(out, spec.Configs)
	return out
}

// Ensure makes sure every store in specs has its changelog topic with
// partitions partitions (the source topics' count): missing topics are
// created, existing ones are checked. A topic with another partition count is
// a *PartitionMismatchError; the configs of existing topics are left alone.
func (m *TopicManager) Ensure(ctx context.Context, partitions int32, specs []TopicSpec) error {
	if partitions <= 0 {
		return fmt.Errorf("changelog: ensure topics: invalid partition count %d", partitions)
	}
	byTopic := make(map[string]TopicSpec, len(specs))
	names := make([]string, 0, len(specs))
	for _, s := range specs {
		if s.Store == "" {
			return errors.New("changelog: ensure topics: empty store name")
		}
		name := TopicName(m.set.AppID, s.Store)
		if _, dup := byTopic[name]; dup {
			return fmt.Errorf("changelog: ensure topics: store %q listed twice", s.Store)
		}
		byTopic[name] = s
		names = append(names, name)
	}
	if len(names) == 0 {
		return nil
	}
	sort.Strings(names)
	missing, err := m.check(ctx, partitions, names)
	if err != nil {
		return err
	}
	var listed []string // created here or by another instance meanwhile
	for _, name := range missing {
		cfg := m.Configs(byTopic[name])
		kcfg := make(map[string]*string, len(cfg))
		for k, v := range cfg {
			kcfg[k] = kadm.StringPtr(v)
		}
		resp, err := m.adm.CreateTopic(ctx, partitions, m.set.ReplicationFactor, kcfg, name)
		switch {
		case errors.Is(err, kerr.TopicAlreadyExists):
			listed = append(listed, name) // created by another instance meanwhile: check it
		case err != nil:
			msg := ""
			if resp.ErrMessage != "" {
				msg = " (" + resp.ErrMessage + ")"
			}
			return fmt.Errorf("changelog: create topic %s: %w%s", name, err, msg)
		default:
			m.log.Info("created changelog topic", "topic", name, "partitions", partitions, "configs", cfg)
			listed = append(listed, name)
		}
	}
	if err := m.awaitListed(ctx, partitions, listed); err != nil {
		return err
	}
	m.warnStale(ctx, names, missing, byTopic)
	return nil
}

// listedTopicWait bounds how long Ensure waits for the metadata to list a topic that it
// created, or that the broker said exists when Ensure tried to create it.
const listedTopicWait = 30 * time.Second

// awaitListed checks the topics that Ensure created, or that another instance created
// between Ensure's check and its CreateTopics. Kafka's brokers learn of a new topic from
// the controller a moment after it is created, so the broker asked may not list it yet, and
// a producer writing to it at once would be refused it as unknown: the check is repeated
// until the metadata lists every partition.
func (m *TopicManager) awaitListed(ctx context.Context, partitions int32, created []string) error {
	if len(created) == 0 {
		return nil
	}
	deadline := time.Now().Add(listedTopicWait)
	backoff := 50 * time.Millisecond
	for {
		missing, err := m.check(ctx, partitions, created)
		if err != nil || len(missing) == 0 {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("changelog: topics %v: created, but the broker's metadata has not listed them for %v", missing, listedTopicWait)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("changelog: wait for the metadata to list topics %v: %w", missing, ctx.Err())
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// warnStale warns about existing changelog topics of window and session stores (and
// key-value stores with a TTL) whose cleanup.policy, retention.ms or message.timestamp.type
// differ from what the store would create them with (its retention changed since, say):
// Ensure leaves existing configs alone, and a retention.ms shorter than the store's lets the
// broker delete windows a restore needs. A failure to describe the configs is only logged.
func (m *TopicManager) warnStale(ctx context.Context, names, created []string, byTopic map[string]TopicSpec) {
	var check []string
	for _, name := range names {
		if byTopic[name].Defaults != nil && !slices.Contains(created, name) {
			check = append(check, name)
		}
	}
	if len(check) == 0 {
		return
	}
	rcs, err := m.adm.DescribeTopicConfigs(ctx, check...)
	if err != nil {
		m.log.Warn("could not read the configs of changelog topics", "topics", check, "error", err)
		return
	}
	for _, rc := range rcs {
		if rc.Err != nil {
			m.log.Warn("could not read the configs of a changelog topic", "topic", rc.Name, "error", rc.Err)
			continue
		}
		want := m.Configs(byTopic[rc.Name])
		for _, c := range rc.Configs {
			key := c.Key
			if _, ok := byTopic[rc.Name].Defaults[key]; !ok || c.Value == nil || *c.Value == want[key] {
				continue
			}
			m.log.Warn("changelog topic exists with another config than its store wants; alter it with your Kafka tools",
				"topic", rc.Name, "config", key, "has", *c.Value, "wants", want[key])
		}
	}
}

// check returns the topics among names that do not exist, and an error for those with a wrong partition count.
func (m *TopicManager) check(ctx context.Context, partitions int32, names []string) ([]string, error) {
	// WithAuthorizedOps makes kadm bypass its metadata cache: a topic created
	// or deleted a moment ago must be seen as it is.
	md, err := m.adm.Metadata(kadm.WithAuthorizedOps(ctx), names...)
	if err != nil {
		return nil, fmt.Errorf("changelog: describe topics %v: %w", names, err)
	}
	var missing []string
	for _, name := range names {
		d, ok := md.Topics[name]
		switch {
		case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
			missing = append(missing, name)
		case d.Err != nil:
			return nil, fmt.Errorf("changelog: describe topic %s: %w", name, d.Err)
		case int32(len(d.Partitions)) != partitions:
			return nil, &PartitionMismatchError{Topic: name, Expected: partitions, Actual: int32(len(d.Partitions))}
		}
	}
	return missing, nil
}
