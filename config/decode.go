package config

import (
	"errors"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
)

// Defaults of the attributes that have one.
const (
	defaultStateDir            = "state"
	defaultCommitInterval      = 30 * time.Second       // Kafka Streams' default for at-least-once
	defaultEOSCommitInterval   = 100 * time.Millisecond // and for exactly-once
	defaultSessionTimeout      = 10 * time.Second
	defaultBrokerListen        = "127.0.0.1:9092"
	defaultAdminListen         = "127.0.0.1:9464"
	defaultStoreType           = StoreKeyValue
	defaultBackend             = "pebble"
	defaultGrace               = 0
	defaultRetention           = 24 * time.Hour // at least window_size (inactivity_gap) + grace
	defaultAdditionalRetention = 24 * time.Hour // changelog records outlive the store's by a day, as in Kafka Streams

	// Several instances: Kafka Streams' defaults (num.standby.replicas,
	// acceptable.recovery.lag, state.cleanup.delay.ms, probing.rebalance.interval.ms).
	defaultStandbyReplicas          = 0
	defaultAcceptableRecoveryLag    = 10000
	defaultStateCleanupDelay        = 10 * time.Minute
	defaultProbingRebalanceInterval = 10 * time.Minute
)

// The raw structs mirror the file. Every attribute is an hcl.Expression so that the decoder
// reports each problem on the exact range, with its own words, and never stops at the first.
// None has a "remain" field: gohcl then reports unknown attributes and blocks as errors.

type rawFile struct {
	ApplicationID       hcl.Expression     `hcl:"application_id,optional"`
	StateDir            hcl.Expression     `hcl:"state_dir,optional"`
	ProcessingGuarantee hcl.Expression     `hcl:"processing_guarantee,optional"`
	CommitInterval      hcl.Expression     `hcl:"commit_interval,optional"`
	SessionTimeout      hcl.Expression     `hcl:"session_timeout,optional"`
	StateMemory         hcl.Expression     `hcl:"state_memory,optional"`
	MemoryLimit         hcl.Expression     `hcl:"memory_limit,optional"`
	Kafka               *rawKafka          `hcl:"kafka,block"`
	EmbeddedBroker      *rawEmbeddedBroker `hcl:"embedded_broker,block"`
	Admin               *rawAdmin          `hcl:"admin,block"`
	Topics              []rawTopic         `hcl:"topic,block"`
	Repartitions        []rawRepartition   `hcl:"repartition,block"`
	Processors          []rawProcessor     `hcl:"processor,block"`

	// Several instances.
	StandbyReplicas          hcl.Expression `hcl:"standby_replicas,optional"`
	AcceptableRecoveryLag    hcl.Expression `hcl:"acceptable_recovery_lag,optional"`
	StateCleanupDelay        hcl.Expression `hcl:"state_cleanup_delay,optional"`
	ProbingRebalanceInterval hcl.Expression `hcl:"probing_rebalance_interval,optional"`
	RemoveDeadMembers        hcl.Expression `hcl:"remove_dead_members,optional"`
}

type rawEmbeddedBroker struct {
	Listen     hcl.Expression `hcl:"listen,optional"`
	DataDir    hcl.Expression `hcl:"data_dir,optional"`
	SyncWrites hcl.Expression `hcl:"sync_writes,optional"`
	DefRange   hcl.Range      `hcl:",def_range"`
}

type rawAdmin struct {
	Listen        hcl.Expression `hcl:"listen,optional"`
	Advertise     hcl.Expression `hcl:"advertise,optional"`
	Token         hcl.Expression `hcl:"token,optional"`
	MetricsPublic hcl.Expression `hcl:"metrics_public,optional"`
	DefRange      hcl.Range      `hcl:",def_range"`
}

type rawTopic struct {
	Name            string         `hcl:"name,label"`
	NameRange       hcl.Range      `hcl:"name,label_range"`
	Partitions      hcl.Expression `hcl:"partitions,optional"`
	PartitionsRange hcl.Range      `hcl:"partitions,attr_range"`
	Config          hcl.Expression `hcl:"config,optional"`
	DefRange        hcl.Range      `hcl:",def_range"`
}

type rawRepartition struct {
	Name            string         `hcl:"name,label"`
	NameRange       hcl.Range      `hcl:"name,label_range"`
	Partitions      hcl.Expression `hcl:"partitions,optional"`
	PartitionsRange hcl.Range      `hcl:"partitions,attr_range"`
	DefRange        hcl.Range      `hcl:",def_range"`
}

type rawProcessor struct {
	Name        string         `hcl:"name,label"`
	NameRange   hcl.Range      `hcl:"name,label_range"`
	Module      hcl.Expression `hcl:"module,optional"`
	Inputs      hcl.Expression `hcl:"inputs,optional"`
	InputsRange hcl.Range      `hcl:"inputs,attr_range"`
	Outputs     hcl.Expression `hcl:"outputs,optional"`
	OnError     hcl.Expression `hcl:"on_error,optional"`
	EmitBudget  hcl.Expression `hcl:"emit_budget,optional"`
	Stores      []rawStore     `hcl:"store,block"`
	DefRange    hcl.Range      `hcl:",def_range"`
}

type rawStore struct {
	Name      string         `hcl:"name,label"`
	NameRange hcl.Range      `hcl:"name,label_range"`
	Type      hcl.Expression `hcl:"type,optional"`
	Backend   hcl.Expression `hcl:"backend,optional"`
	Coalesce  hcl.Expression `hcl:"coalesce,optional"`
	TTL       hcl.Expression `hcl:"ttl,optional"`
	TTLClock  hcl.Expression `hcl:"ttl_clock,optional"`
	Logging   *rawLogging    `hcl:"logging,block"`
	DefRange  hcl.Range      `hcl:",def_range"`

	// Window and session stores.
	WindowSize                   hcl.Expression `hcl:"window_size,optional"`
	Advance                      hcl.Expression `hcl:"advance,optional"`
	InactivityGap                hcl.Expression `hcl:"inactivity_gap,optional"`
	Grace                        hcl.Expression `hcl:"grace,optional"`
	Retention                    hcl.Expression `hcl:"retention,optional"`
	ChangelogAdditionalRetention hcl.Expression `hcl:"changelog_additional_retention,optional"`
}

type rawLogging struct {
	Enabled     hcl.Expression `hcl:"enabled,optional"`
	TopicConfig hcl.Expression `hcl:"topic_config,optional"`
	DefRange    hcl.Range      `hcl:",def_range"`
}

// decodeFile fills c from body; every problem lands in d.diags.
func (d *decoder) decodeFile(body hcl.Body, c *Config, opts Options) {
	var raw rawFile
	d.diags = append(d.diags, gohcl.DecodeBody(body, nil, &raw)...)

	if d.required(raw.ApplicationID, "application_id", body.MissingItemRange()) {
		if id, ok := d.str(raw.ApplicationID, "application_id"); ok {
			c.ApplicationID = id
			if msg := checkApplicationID(id); msg != "" {
				d.errorf(raw.ApplicationID.Range(), "Invalid application_id", "The application_id %q %s; it prefixes topic names and is the consumer group id.", id, msg)
			}
		}
	}

	stateDir := defaultStateDir
	if s, ok := d.str(raw.StateDir, "state_dir"); ok {
		if s == "" {
			d.errorf(raw.StateDir.Range(), "Invalid state_dir", "The state_dir must not be empty; leave it out for the default %q.", defaultStateDir)
		} else {
			stateDir = s
		}
	}
	c.StateDir = d.path(stateDir)

	c.Guarantee = AtLeastOnce
	if s, ok := d.str(raw.ProcessingGuarantee, "processing_guarantee"); ok {
		c.Guarantee = Guarantee(s)
		switch c.Guarantee {
		case AtLeastOnce, ExactlyOnce:
		default:
			d.errorf(raw.ProcessingGuarantee.Range(), "Invalid processing guarantee", "The processing guarantee %q is not one of the valid values: %q (the default) or %q.", s, AtLeastOnce, ExactlyOnce)
		}
	}

	commitDefault := defaultCommitInterval
	if c.Guarantee == ExactlyOnce {
		commitDefault = defaultEOSCommitInterval
	}
	c.CommitInterval = d.duration(raw.CommitInterval, "commit_interval", commitDefault)
	d.decodeSessionTimeout(raw.SessionTimeout, body, c)
	d.decodeMemory(&raw, c)
	c.StandbyReplicas = int(d.wholeNumber(raw.StandbyReplicas, "standby_replicas", math.MaxInt32, defaultStandbyReplicas))
	c.AcceptableRecoveryLag = d.wholeNumber(raw.AcceptableRecoveryLag, "acceptable_recovery_lag", math.MaxInt64, defaultAcceptableRecoveryLag)
	c.StateCleanupDelay = d.millisDuration(raw.StateCleanupDelay, "state_cleanup_delay", defaultStateCleanupDelay)
	c.ProbingRebalanceInterval = d.millisDuration(raw.ProbingRebalanceInterval, "probing_rebalance_interval", defaultProbingRebalanceInterval)
	c.RemoveDeadMembers = d.boolean(raw.RemoveDeadMembers, "remove_dead_members", true)

	d.decodeKafka(raw.Kafka, c)
	d.checkKafka(raw.Kafka, c)
	d.decodeEmbeddedBroker(raw.EmbeddedBroker, c)
	if c.Guarantee == ExactlyOnce && len(c.Kafka.Brokers) == 0 {
		d.warnf(raw.ProcessingGuarantee.Range(), "Exactly-once on the embedded broker",
			"Without kafka.brokers the embedded broker runs in this process and dies with it. When the process is killed (SIGKILL, a crash) with a transaction open, the broker aborts that transaction at its next start without writing an abort marker, and read_committed readers then skip every later transaction of this instance: restores from its changelogs and consumers of its outputs miss them. Stop it with SIGINT or SIGTERM only, or give exactly_once a Kafka cluster (kafka.brokers).")
	}
	if c.ApplicationID != "" && checkApplicationID(c.ApplicationID) == "" {
		app := filepath.Join(c.StateDir, c.ApplicationID)
		if within(app, c.EmbeddedBroker.DataDir) || within(c.EmbeddedBroker.DataDir, app) {
			d.errorf(raw.ApplicationID.Range(), "State directory overlaps the broker's",
				"The instance's state directory %s (<state_dir>/<application_id>) and the embedded broker's data_dir %s overlap: deleting the application's state would delete the broker's data. Choose another application_id or embedded_broker.data_dir.", app, c.EmbeddedBroker.DataDir)
		}
	}

	d.decodeAdmin(raw.Admin, body, c)

	for _, rt := range raw.Topics {
		c.Topics = append(c.Topics, d.decodeTopic(rt))
	}
	for _, rr := range raw.Repartitions {
		c.Repartitions = append(c.Repartitions, d.decodeRepartition(rr, c.ApplicationID))
	}
	for _, rp := range raw.Processors {
		c.Processors = append(c.Processors, d.decodeProcessor(rp, opts))
	}
	d.checkTopics(raw, c)
	d.checkProcessors(raw, c)
	d.checkDeadLetters(c)
	d.checkTopology(c)
	d.checkLocal(raw, body, c)
}

func (d *decoder) decodeEmbeddedBroker(re *rawEmbeddedBroker, c *Config) {
	c.EmbeddedBroker = EmbeddedBroker{Listen: defaultBrokerListen, DataDir: filepath.Join(c.StateDir, "broker")}
	if re == nil {
		return
	}
	if len(c.Kafka.Brokers) > 0 {
		d.warnf(re.DefRange, "Embedded broker not used", "The embedded_broker block is ignored because kafka.brokers is set (%s): the embedded broker runs only when there are no brokers.", where(c.Kafka.Range))
	}
	if s, ok := d.str(re.Listen, "listen"); ok {
		c.EmbeddedBroker.Listen = s
		d.hostPort(re.Listen.Range(), "embedded broker listen address", s, defaultBrokerListen, true, true)
	}
	if s, ok := d.str(re.DataDir, "data_dir"); ok {
		if s == "" {
			d.errorf(re.DataDir.Range(), "Invalid data_dir", "The data_dir must not be empty; leave it out for the default <state_dir>/broker.")
		} else {
			c.EmbeddedBroker.DataDir = d.path(s)
		}
	}
	c.EmbeddedBroker.SyncWrites = d.boolean(re.SyncWrites, "sync_writes", false)
}

func (d *decoder) decodeTopic(rt rawTopic) Topic {
	t := Topic{Name: rt.Name, DeclRange: rt.DefRange, PartitionsRange: rt.PartitionsRange}
	if msg := checkTopicName(rt.Name); msg != "" {
		d.errorf(rt.NameRange, "Invalid topic name", "The topic name %q %s.", rt.Name, msg)
	}
	if d.required(rt.Partitions, "partitions", rt.DefRange) {
		t.Partitions = d.partitions(rt.Partitions)
	}
	t.Configs = d.stringMap(rt.Config, "config")
	return t
}

func (d *decoder) decodeRepartition(rr rawRepartition, app string) Repartition {
	r := Repartition{Name: rr.Name, Topic: repartitionTopic(app, rr.Name), DeclRange: rr.DefRange, PartitionsRange: rr.PartitionsRange}
	if msg := checkTopicName(rr.Name); msg != "" {
		d.errorf(rr.NameRange, "Invalid repartition name", "The repartition name %q %s.", rr.Name, msg)
	} else if app != "" && len(r.Topic) > maxTopicLen {
		d.errorf(rr.NameRange, "Repartition name too long", "The repartition topic %q is longer than Kafka's limit of %d characters.", r.Topic, maxTopicLen)
	}
	if d.required(rr.Partitions, "partitions", rr.DefRange) {
		r.Partitions = d.partitions(rr.Partitions)
	}
	return r
}

func (d *decoder) decodeProcessor(rp rawProcessor, opts Options) Processor {
	p := Processor{Name: rp.Name, DeclRange: rp.DefRange, InputsRange: rp.InputsRange}
	if msg := checkProcessorName(rp.Name); msg != "" {
		d.errorf(rp.NameRange, "Invalid processor name", "The processor name %q %s.", rp.Name, msg)
	}

	if d.required(rp.Module, "module", rp.DefRange) {
		p.ModuleRange = rp.Module.Range()
		if s, ok := d.str(rp.Module, "module"); ok {
			if s == "" {
				d.errorf(p.ModuleRange, "Invalid module", "The module must be the path of a .wasm file, not empty.")
			} else {
				p.Module = d.path(s)
				d.checkModule(p.Module, p.ModuleRange, opts)
			}
		}
	}

	if d.required(rp.Inputs, "inputs", rp.DefRange) {
		var present bool
		p.Inputs, p.InputRanges, present = d.stringList(rp.Inputs, "inputs")
		if present && len(p.Inputs) == 0 && !d.hasErrorAt(rp.Inputs.Range()) {
			d.errorf(rp.Inputs.Range(), "No inputs", "The processor %q must read at least one topic: inputs must not be empty.", rp.Name)
		}
	}
	p.Outputs, p.OutputRanges, _ = d.stringList(rp.Outputs, "outputs")
	d.decodeOnError(rp, &p)
	p.EmitBudget = d.byteSize(rp.EmitBudget, "emit_budget", DefaultEmitBudget)

	for _, rs := range rp.Stores {
		p.Stores = append(p.Stores, d.decodeStore(rs))
	}
	return p
}

// hasErrorAt reports whether an error was already recorded on exactly rng.
func (d *decoder) hasErrorAt(rng hcl.Range) bool {
	for _, diag := range d.diags {
		if diag.Severity == hcl.DiagError && diag.Subject != nil && *diag.Subject == rng {
			return true
		}
	}
	return false
}

// checkModule checks that the module file exists, is a regular file that can be read and,
// with opts.CheckModule, is a valid module.
func (d *decoder) checkModule(path string, rng hcl.Range, opts Options) {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		d.errorf(rng, "Module file not found", "The module file %s does not exist (paths are relative to the directory of the configuration file).", path)
		return
	case err != nil:
		d.errorf(rng, "Module file not readable", "The module file %s cannot be read: %v.", path, err)
		return
	case !fi.Mode().IsRegular():
		d.errorf(rng, "Module is not a file", "The module %s is not a regular file.", path)
		return
	}
	if err := readable(path); err != nil {
		d.errorf(rng, "Module file not readable", "The module file %s cannot be read: %v.", path, err)
		return
	}
	if opts.CheckModule != nil {
		if err := opts.CheckModule(path); err != nil {
			d.errorf(rng, "Invalid module", "The module %s is not a valid statehost module: %v.", path, err)
		}
	}
}

// readable returns the error of opening path and reading its first byte, if any.
func readable(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Read(make([]byte, 1)); err != nil && err != io.EOF {
		return err
	}
	return nil
}

func (d *decoder) decodeStore(rs rawStore) Store {
	s := Store{Name: rs.Name, Type: defaultStoreType, Backend: defaultBackend, Logging: true, DeclRange: rs.DefRange}
	if msg := checkTopicName(rs.Name); msg != "" {
		d.errorf(rs.NameRange, "Invalid store name", "The store name %q %s (it names the changelog topic <application_id>-<store>-changelog).", rs.Name, msg)
	}
	// typeKnown is false when the type attribute is invalid: the attributes that depend on the
	// type are then decoded without checking that they apply to it.
	typeKnown := absent(rs.Type)
	if t, ok := d.str(rs.Type, "type"); ok {
		s.Type = t
		switch t {
		case StoreKeyValue, StoreWindow, StoreSession:
			typeKnown = true
		default:
			d.errorf(rs.Type.Range(), "Invalid store type", "The store type %q is not one of the valid values: \"keyvalue\" (the default), \"window\" or \"session\".", t)
		}
	}
	if b, ok := d.str(rs.Backend, "backend"); ok {
		s.Backend = b
		if b != "pebble" && b != "memory" {
			d.errorf(rs.Backend.Range(), "Invalid store backend", "The store backend %q is not one of the valid values: \"pebble\" (the default) or \"memory\".", b)
		}
	}
	s.Coalesce = d.boolean(rs.Coalesce, "coalesce", false)
	if s.Coalesce && (s.Type == StoreWindow || s.Type == StoreSession) {
		d.errorf(rs.Coalesce.Range(), "Coalesce not supported", "The store %q is a %s store: coalesce = true is supported only for keyvalue stores.", rs.Name, s.Type)
	}
	if rs.Logging != nil {
		s.Logging = d.boolean(rs.Logging.Enabled, "enabled", true)
		s.TopicConfigs = d.stringMap(rs.Logging.TopicConfig, "topic_config")
		if !s.Logging && !absent(rs.Logging.TopicConfig) {
			d.warnf(rs.Logging.TopicConfig.Range(), "Changelog config not used", "The topic_config of store %q has no effect because its logging is disabled: the store has no changelog topic.", rs.Name)
		}
	}
	d.decodeStoreTimes(rs, &s, typeKnown)
	d.decodeStoreTTL(rs, &s, typeKnown)
	return s
}

// decodeStoreTimes decodes the durations of window and session stores into s, whose Type is
// decoded (typeKnown is false when the type attribute was invalid). An attribute that does not
// apply to the store's type is an error on that attribute.
func (d *decoder) decodeStoreTimes(rs rawStore, s *Store, typeKnown bool) {
	// attr decodes one duration attribute (zero allows "0s") that applies to the given types.
	// ok is false when it is absent, invalid or does not apply.
	attr := func(expr hcl.Expression, name string, zero bool, types ...string) (dur time.Duration, text string, ok bool) {
		if absent(expr) {
			return 0, "", false
		}
		if typeKnown && !slices.Contains(types, s.Type) {
			is := s.Type
			if absent(rs.Type) {
				is += " store (the default when type is not set)"
			} else {
				is += " store"
			}
			d.errorf(expr.Range(), "Attribute not applicable", "The attribute %q applies only to %s stores; store %q is a %s.", name, strings.Join(types, " and "), s.Name, is)
			return 0, "", false
		}
		dur, text, ok = d.durationValue(expr, name, zero)
		if ok && dur%time.Millisecond != 0 {
			// Windows, sessions and stream time are in milliseconds, as Kafka's timestamps.
			d.errorf(expr.Range(), "Invalid duration", "The %s %q is not a whole number of milliseconds: windows and sessions are measured in milliseconds, as record timestamps are.", name, text)
			return 0, "", false
		}
		return dur, text, ok
	}
	size, sizeText, sizeOK := attr(rs.WindowSize, "window_size", false, StoreWindow)
	advance, advanceText, advanceOK := attr(rs.Advance, "advance", false, StoreWindow)
	gap, _, gapOK := attr(rs.InactivityGap, "inactivity_gap", false, StoreSession)
	grace, _, graceOK := attr(rs.Grace, "grace", true, StoreWindow, StoreSession)
	retention, retentionText, retentionOK := attr(rs.Retention, "retention", false, StoreWindow, StoreSession)
	additional, _, additionalOK := attr(rs.ChangelogAdditionalRetention, "changelog_additional_retention", true, StoreWindow, StoreSession)

	// base is what retention must cover besides grace: a window, or the gap that ends a session.
	var (
		base     time.Duration
		baseName string
		baseOK   bool
	)
	switch s.Type {
	case StoreWindow:
		if absent(rs.WindowSize) {
			d.errorf(rs.DefRange, "Missing required argument", "The argument \"window_size\" is required for a window store, but no definition was found.")
		}
		s.WindowSize, s.Advance = size, size
		if advanceOK {
			s.Advance = advance
			if sizeOK && advance > size {
				d.errorf(rs.Advance.Range(), "Invalid advance", "The advance %q of window store %q is longer than its window_size %q: there would be gaps between the windows. The advance must be at most window_size; leave it out for tumbling windows (advance = window_size).", advanceText, s.Name, sizeText)
			}
		}
		base, baseName, baseOK = size, "window_size", sizeOK
	case StoreSession:
		if absent(rs.InactivityGap) {
			d.errorf(rs.DefRange, "Missing required argument", "The argument \"inactivity_gap\" is required for a session store, but no definition was found.")
		}
		s.InactivityGap = gap
		base, baseName, baseOK = gap, "inactivity_gap", gapOK
	default:
		return
	}

	s.Grace = defaultGrace
	if graceOK {
		s.Grace = grace
	}
	least := addDurations(base, s.Grace)
	// The default keeps closed windows and sessions readable long after they close, so that a
	// punctuation finds them however far the stream time jumps (with retention = size + grace
	// a window would expire the moment it closes): Kafka Streams' former default of a day.
	s.Retention = max(least, defaultRetention)
	if retentionOK {
		s.Retention = retention
		// Compare only with a base and a grace that are valid, or the message would be wrong.
		if baseOK && (graceOK || absent(rs.Grace)) && retention < least {
			d.errorf(rs.Retention.Range(), "Retention too short", "The retention %q of %s store %q is shorter than %s + grace (%s): %ss would expire before they close.", retentionText, s.Type, s.Name, baseName, FormatDuration(least), s.Type)
		}
	}
	s.AdditionalRetention = defaultAdditionalRetention
	if additionalOK {
		s.AdditionalRetention = additional
		if !s.Logging {
			d.warnf(rs.ChangelogAdditionalRetention.Range(), "Changelog config not used", "The changelog_additional_retention of store %q has no effect because its logging is disabled: the store has no changelog topic.", s.Name)
		}
	}
}

// path makes p absolute against the directory of the config file, and cleans it.
func (d *decoder) path(p string) string {
	if !filepath.IsAbs(p) {
		p = filepath.Join(d.dir, p)
	}
	return filepath.Clean(p)
}

// within reports whether path is dir or lies below it (both clean and absolute).
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
