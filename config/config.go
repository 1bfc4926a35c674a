package config

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
)

// Guarantee is a processing guarantee.
type Guarantee string

const (
	// AtLeastOnce: state is never lost; a record may be applied twice after a crash.
	AtLeastOnce Guarantee = "at_least_once"
	// ExactlyOnce commits the changelog records, the output records and the input offsets of
	// a commit in one Kafka transaction, and applies the stores after it commits.
	ExactlyOnce Guarantee = "exactly_once"
)

// Options tunes Load and Parse.
type Options struct {
	// CheckModule, when set, validates each processor's module file (called with its absolute path).
	CheckModule func(path string) error
}

// Config is a decoded application configuration. When Load or Parse returned error
// diagnostics it is incomplete and must not be used to run.
type Config struct {
	Path           string               // absolute path of the config file
	Files          map[string]*hcl.File // the parser's file map, for WriteDiagnostics
	ApplicationID  string
	StateDir       string // absolute
	Guarantee      Guarantee
	CommitInterval time.Duration
	SessionTimeout time.Duration
	// SessionTimeoutRange is the session_timeout attribute's value, or the start of the file
	// when it is absent (the default): where a broker's refusal of SessionTimeout points.
	SessionTimeoutRange hcl.Range
	// StateMemory bounds the memory of the instance's state, however many tasks it holds:
	// Pebble's block cache and memtables, the read caches and key filters, the sort buffers
	// of cold restores (store.Settings.MemoryBytes). Default DefaultStateMemory (256 MiB).
	StateMemory int64
	// MemoryLimit is the process's soft memory limit, as GOMEMLIMIT sets it: the garbage
	// collector works harder as the process nears it, instead of letting the heap grow to
	// twice what it holds. 0 (the default): none, or GOMEMLIMIT's. At least StateMemory +
	// MinMemoryBeyondState.
	MemoryLimit int64

	// StandbyReplicas is how many standby copies of each task other instances keep: they
	// restore the task's stores from its changelog, so that one can take the task over without
	// a long restore. Default 0; Kafka Streams' num.standby.replicas.
	StandbyReplicas int
	// AcceptableRecoveryLag is the most changelog records an instance may be behind on a task's
	// stores to be given that task as active. Default 10000; Kafka Streams'
	// acceptable.recovery.lag.
	AcceptableRecoveryLag int64
	// StateCleanupDelay is how long the local state of a task the instance no longer owns is
	// kept, as warm state for assignment, before it is deleted. Default 10m; Kafka Streams'
	// state.cleanup.delay.ms.
	StateCleanupDelay time.Duration
	// ProbingRebalanceInterval is how often an instance that keeps warmup copies of tasks asks
	// for a rebalance to check whether they caught up. Default 10m; Kafka Streams'
	// probing.rebalance.interval.ms.
	ProbingRebalanceInterval time.Duration
	// RemoveDeadMembers: each instance watches the others through their admin listeners, and
	// removes one that died (its listener refuses connections after its watch broke without a
	// goodbye) from the group, so that its tasks move without waiting for SessionTimeout.
	// Default true. Kafka Streams has no such setting; the removal is Kafka's
	// RemoveMembersFromConsumerGroup.
	RemoveDeadMembers bool

	Kafka          Kafka
	EmbeddedBroker EmbeddedBroker
	Admin          Admin
	Topics         []Topic       // in file order
	Repartitions   []Repartition // in file order
	Processors     []Processor   // in file order
}

// EmbeddedBroker is the embedded_broker block, used only when Kafka.Brokers is empty.
type EmbeddedBroker struct {
	Listen  string
	DataDir string // absolute
	// SyncWrites fsyncs every produced batch, and the broker's group and producer logs, before
	// the broker acknowledges them (statehost broker --sync-writes), so that what it
	// acknowledged survives a crash of the machine, at a cost in throughput. Default false:
	// the writes reach the operating system at once (a killed process loses none of them) and
	// the disk when the system flushes them. See README, "The embedded broker's durability".
	SyncWrites bool
}

// Admin is the admin block.
type Admin struct {
	Listen string // "" = disabled
	// Advertise is the address other instances and clients reach the listener at (interactive
	// queries redirect there); "": the listener's address, with the machine's host name when
	// it listens on every interface.
	Advertise string
	// Token, when not empty, is required of every request as "Authorization: Bearer <Token>"
	// (/metrics excepted when MetricsPublic). It comes from admin.token, or from the
	// environment variable AdminTokenEnv, which wins. Without one, Listen is a loopback
	// address (Load refuses any other).
	Token string
	// MetricsPublic opens GET /metrics to requests without the token. Default false.
	MetricsPublic bool
}

// Topic is a topic block: a topic created at start when missing.
type Topic struct {
	Name            string
	Partitions      int32
	Configs         map[string]string
	DeclRange       hcl.Range // the block header
	PartitionsRange hcl.Range // the partitions attribute
}

// Repartition is a repartition block: an internal topic named <application_id>-<name>-repartition.
type Repartition struct {
	Name            string // short name
	Topic           string // <application_id>-<name>-repartition
	Partitions      int32
	DeclRange       hcl.Range
	PartitionsRange hcl.Range
}

// Processor is a processor block.
type Processor struct {
	Name         string
	Module       string      // absolute path
	ModuleRange  hcl.Range   // the module attribute's expression
	Inputs       []string    // resolved full topic names
	InputRanges  []hcl.Range // one per input: the element's expression range in the list
	InputsRange  hcl.Range   // the whole inputs attribute
	Outputs      []string    // resolved full topic names
	OutputRanges []hcl.Range
	Stores       []Store
	DeclRange    hcl.Range

	// OnError is what happens to an input record the plugin fails on. Default OnErrorFail.
	OnError OnError
	// OnErrorRange is the on_error attribute's value, or the block header when it is absent.
	OnErrorRange hcl.Range
	// EmitBudget bounds the bytes (keys, values and headers) the plugin may emit for one
	// input record: the emit that passes it fails, and the record is a poison record (reason
	// emit_budget). Default DefaultEmitBudget (64 MiB).
	EmitBudget int64
}

// The store types, the values of Store.Type.
const (
	// StoreKeyValue is a key-value store, the default type.
	StoreKeyValue = "keyvalue"
	// StoreWindow keeps values per key and time window: windows of WindowSize that start
	// every Advance.
	StoreWindow = "window"
	// StoreSession keeps values per key and session: the records of a key that are no more than
	// InactivityGap apart.
	StoreSession = "session"
)

// Store is a store block inside a processor. The durations are zero where they do not apply
// to the store's type (all but TTL for a key-value store, TTL for the others).
type Store struct {
	Name         string
	Type         string            // StoreKeyValue (the default), StoreWindow or StoreSession
	Backend      string            // "pebble" | "memory"
	Coalesce     bool              // only for key-value stores
	Logging      bool              // default true
	TopicConfigs map[string]string // logging.topic_config
	DeclRange    hcl.Range

	// WindowSize is the length of a window store's windows.
	WindowSize time.Duration
	// Advance is the hop of a window store's hopping windows, in (0, WindowSize]; it defaults
	// to WindowSize (tumbling windows). The store does not use it: plugins read it.
	Advance time.Duration
	// Grace is how long after its end a window or session still accepts out-of-order records.
	// Default 0.
	Grace time.Duration
	// Retention is how long, in stream time, a window or session store keeps its windows or
	// sessions: at least WindowSize + Grace (window) or InactivityGap + Grace (session), so
	// that nothing expires before it closes. Default the larger of that and 24h, so that a
	// punctuation finds closed windows however far the stream time jumps.
	Retention time.Duration
	// InactivityGap is the longest time between two records of one session of a session store.
	InactivityGap time.Duration
	// AdditionalRetention is how much longer than Retention a window or session store's
	// changelog topic keeps its records. Default 24h.
	AdditionalRetention time.Duration

	// TTL is how long an entry of a key-value store lives after its last write, counted in
	// TTLClock; 0 (the default): entries never expire.
	TTL time.Duration
	// TTLClock is what TTL counts in: TTLStreamTime (the default) or TTLWallClock; "" when the
	// store has no TTL.
	TTLClock string
}

// ChangelogRetention returns the retention of the changelog topic of a window or session
// store (its retention.ms): Retention + AdditionalRetention. It returns 0 for a key-value
// store, whose changelog is compacted, not expired by time.
func (s Store) ChangelogRetention() time.Duration {
	if s.Type != StoreWindow && s.Type != StoreSession {
		return 0
	}
	return addDurations(s.Retention, s.AdditionalRetention)
}

// Load reads, decodes and validates the file at path. It returns every diagnostic.
// The *Config is nil only when the file could not be read or parsed at all; when the returned
// diagnostics have errors the Config must not be used to run.
func Load(path string, opts Options) (*Config, hcl.Diagnostics) {
	src, err := os.ReadFile(path)
	if err != nil {
		start := hcl.Pos{Line: 1, Column: 1}
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Failed to read file",
			Detail:   fmt.Sprintf("The configuration file %q could not be read: %v.", path, err),
			Subject:  &hcl.Range{Filename: path, Start: start, End: start},
		}}
	}
	return Parse(src, path, opts)
}

// Parse is Load on bytes already read; filename is used in ranges and for resolving relative
// paths (its directory).
func Parse(src []byte, filename string, opts Options) (*Config, hcl.Diagnostics) {
	abs, err := filepath.Abs(filename)
	if err != nil {
		start := hcl.Pos{Line: 1, Column: 1}
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Invalid file name",
			Detail:   fmt.Sprintf("The configuration file name %q cannot be made absolute: %v.", filename, err),
			Subject:  &hcl.Range{Filename: filename, Start: start, End: start},
		}}
	}
	parser := hclparse.NewParser()
	file, diags := parser.ParseHCL(src, filename)
	if file == nil || file.Body == nil {
		return nil, sortDiagnostics(diags)
	}
	c := &Config{Path: abs, Files: parser.Files()}
	// The parser recovers from a syntax error and returns what it understood: decode it too so
	// that every problem shows up at once, as the caller asked.
	d := &decoder{diags: diags, dir: filepath.Dir(abs)}
	d.decodeFile(file.Body, c, opts)
	return c, sortDiagnostics(d.diags)
}

// sortDiagnostics orders diagnostics by position so that output follows the file.
func sortDiagnostics(diags hcl.Diagnostics) hcl.Diagnostics {
	sort.SliceStable(diags, func(i, j int) bool {
		a, b := diags[i].Subject, diags[j].Subject
		switch {
		case a == nil || b == nil:
			return a != nil && b == nil
		case a.Filename != b.Filename:
			return a.Filename < b.Filename
		default:
			return a.Start.Byte < b.Start.Byte
		}
	})
	return diags
}

// WriteDiagnostics prints all diags. Each starts with a line "file:line:col: severity:
// summary" (the form editors and terminals link to), followed by hcl's text writer's account:
// the file and line, the enclosing block, a source snippet and the detail, wrapped at 100
// columns, without color. files may be nil (then snippets are omitted). A snippet that
// would show a line that may hold a secret (a password or a key written in the file by
// mistake, the sasl block; see secretLines) is left out, and the account says so.
func WriteDiagnostics(w io.Writer, files map[string]*hcl.File, diags hcl.Diagnostics) error {
	const width = 100
	tw := hcl.NewDiagnosticTextWriter(w, files, width, false)
	secrets := map[string]map[int]bool{} // by file name, made when first needed
	for _, d := range diags {
		sev := "error"
		if d.Severity == hcl.DiagWarning {
			sev = "warning"
		}
		var err error
		if d.Subject != nil {
			_, err = fmt.Fprintf(w, "%s:%d:%d: %s: %s\n", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column, sev, d.Summary)
		} else {
			_, err = fmt.Fprintf(w, "%s: %s\n", sev, d.Summary)
		}
		if err != nil {
			return err
		}
		if d.Subject != nil {
			if file := files[d.Subject.Filename]; file != nil && file.Bytes != nil {
				secret, ok := secrets[d.Subject.Filename]
				if !ok {
					secret = secretLines(file)
					secrets[d.Subject.Filename] = secret
				}
				if showsSecret(d, secret) {
					if err := writeWithoutSource(w, file, d, width); err != nil {
						return err
					}
					continue
				}
			}
		}
		if err := tw.WriteDiagnostic(d); err != nil {
			return err
		}
	}
	return nil
}

// writeWithoutSource prints d as hcl's text writer does, but with a note in place of the
// source snippet.
func writeWithoutSource(w io.Writer, file *hcl.File, d *hcl.Diagnostic, width uint) error {
	bare := *d
	bare.Subject, bare.Context, bare.Expression, bare.EvalContext = nil, nil, nil, nil
	var buf bytes.Buffer
	if err := hcl.NewDiagnosticTextWriter(&buf, nil, width, false).WriteDiagnostic(&bare); err != nil {
		return err
	}
	// The writer prints "Severity: summary", a blank line, then the detail.
	head, detail, _ := bytes.Cut(buf.Bytes(), []byte("\n\n"))
	in := ""
	if cs, ok := file.Nav.(interface{ ContextString(offset int) string }); ok {
		if s := cs.ContextString(d.Subject.Start.Byte); s != "" {
			in = ", in " + s
		}
	}
	_, err := fmt.Fprintf(w, "%s\n\n  on %s line %d%s:\n  (source not shown: it may hold a secret)\n\n%s",
		head, d.Subject.Filename, d.Subject.Start.Line, in, detail)
	return err
}

// RepartitionByTopic returns the repartition block whose full topic name is topic, or nil.
func (c *Config) RepartitionByTopic(topic string) *Repartition {
	for i := range c.Repartitions {
		if c.Repartitions[i].Topic == topic {
			return &c.Repartitions[i]
		}
	}
	return nil
}

// TopicByName returns the topic block named name, or nil.
func (c *Config) TopicByName(name string) *Topic {
	for i := range c.Topics {
		if c.Topics[i].Name == name {
			return &c.Topics[i]
		}
	}
	return nil
}

// ChangelogTopic returns the changelog topic of store: <application_id>-<store>-changelog.
func (c *Config) ChangelogTopic(store string) string {
	return changelogTopic(c.ApplicationID, store)
}

func changelogTopic(app, store string) string { return app + "-" + store + "-changelog" }

func repartitionTopic(app, name string) string { return app + "-" + name + "-repartition" }
