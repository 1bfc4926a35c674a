package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/changelog"
	"github.com/statehost/statehost/config"
	"github.com/statehost/statehost/host/runtime"
	"github.com/statehost/statehost/internal/kafkaclient"
	"github.com/statehost/statehost/restore"
	"github.com/statehost/statehost/store"
)

const inspectSynopsis = "[--config FILE] [--json] [--timeout DURATION]"

const inspectUsage = `Prints what an application keeps, without running it: the stores of the configuration, the
task directories of its state directory with their checkpoints, and for each changelog
partition its end offset on the brokers and the lag of the local checkpoint behind it (the
records a restore would read). It works while the application runs, here or elsewhere.

The checkpoints come from the task directories' .checkpoint files, and from the instance's
database when no process holds the state directory (inspect then holds its lock for the
moment it reads it: an instance started on the same directory at that moment refuses to
start). When a running instance holds it, the .checkpoint files, which it rewrites at every
commit, are what inspect reads. The brokers are kafka.brokers, or the embedded broker's
listen address, which answers only while the application runs; when no broker answers,
inspect prints the local part. Exits 0 when it printed what it could read, 1 on a
configuration problem or local state it cannot read.
`

// inspectReport is what `statehost inspect` prints; --json prints it as it is.
type inspectReport struct {
	ApplicationID string `json:"application_id"`
	Config        string `json:"config"`
	Guarantee     string `json:"processing_guarantee"`
	StateDir      string `json:"state_dir"`
	// State is "open" (the database was read), "locked" (a running process holds the state
	// directory: only the checkpoint files were read), "unreadable" (no permission to open
	// the database: only the checkpoint files were read), "missing" (no state directory) or
	// "error" (StateError says why).
	State      string `json:"state"`
	StateError string `json:"state_error,omitempty"`

	Brokers        []string `json:"brokers"`
	EmbeddedBroker bool     `json:"embedded_broker"`
	// BrokerError says why the changelogs' offsets are not known; empty when they are.
	BrokerError string `json:"broker_error,omitempty"`

	Stores     []inspectStore     `json:"stores"`
	Tasks      []inspectTask      `json:"tasks"`
	Changelogs []inspectChangelog `json:"changelogs"`
	// Problems are what inspect could not read, each naming its file or topic.
	Problems []string `json:"problems,omitempty"`
}

// inspectStore is a store of the configuration.
type inspectStore struct {
	Processor string `json:"processor"`
	Store     string `json:"store"`
	Type      string `json:"type"`
	Backend   string `json:"backend"`
	Logging   bool   `json:"logging"`
	Changelog string `json:"changelog,omitempty"` // its topic; empty without logging
}

// inspectTask is a task directory, or a task that has state in the database.
type inspectTask struct {
	Task      string `json:"task"` // <processor>_<partition>
	Processor string `json:"processor"`
	Partition int32  `json:"partition"`
	Dir       string `json:"dir,omitempty"` // empty: no directory, only state in the database
	// Configured is false for a processor the configuration does not have (any more).
	Configured bool `json:"configured"`
	// CheckpointFile is the content of the .checkpoint file; nil without one.
	CheckpointFile []inspectCheckpoint `json:"checkpoint_file"`
	// Database are the store partitions the database holds state of; nil when it was not read.
	Database []inspectLocalStore `json:"database,omitempty"`
}

// inspectCheckpoint is a line of a .checkpoint file.
type inspectCheckpoint struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// inspectLocalStore is a store partition of a task in the database.
type inspectLocalStore struct {
	Store string `json:"store"`
	// Checkpoint is the offset of the last changelog record applied; nil for data without a
	// checkpoint.
	Checkpoint *int64 `json:"checkpoint"`
}

// inspectChangelog is a changelog partition.
type inspectChangelog struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Processor string `json:"processor,omitempty"` // empty: a topic of no store of the configuration
	Store     string `json:"store,omitempty"`
	// StartOffset and EndOffset are the partition's log start and end offsets on the brokers;
	// nil when they are not known.
	StartOffset *int64 `json:"start_offset"`
	EndOffset   *int64 `json:"end_offset"`
	// Checkpoint is the offset of the last record the local store applied, from the database
	// (CheckpointFrom "database") or the task's .checkpoint file ("file"); nil without one.
	Checkpoint     *int64 `json:"checkpoint"`
	CheckpointFrom string `json:"checkpoint_from,omitempty"`
	// Lag is the changelog lag (restore.Lag) of a restore of the partition now: from the
	// checkpoint, or from the log start without a usable one. Nil when the offsets are not
	// known.
	Lag  *int64 `json:"lag"`
	Note string `json:"note,omitempty"`
}

// inspectCmd is `statehost inspect [--config FILE] [--json]`.
func inspectCmd(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "inspect", inspectSynopsis, inspectUsage)
	path := fs.String("config", "config.hcl", "the application's configuration `file`")
	asJSON := fs.Bool("json", false, "print a JSON object instead of tables")
	timeout := fs.Duration("timeout", 10*time.Second, "how long to wait for the brokers: a `DURATION` such as 10s")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if len(pos) > 0 {
		return usageError(fs, "unexpected argument %q", pos[0])
	}
	cfg, ok := loadConfig(env, *path, config.Options{})
	if !ok {
		return exitFailure
	}
	log := env.Logger.Named("inspect")
	rep, failedLocal := inspect(ctx, log, cfg, *timeout)
	if *asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return failed(log, "cannot write the report", err)
		}
	} else {
		printInspect(env.Stdout, rep)
	}
	if failedLocal {
		return exitFailure
	}
	return exitOK
}

// inspect gathers the report of cfg; failedLocal reports local state that exists but could
// not be read.
func inspect(ctx context.Context, log hclog.Logger, cfg *config.Config, timeout time.Duration) (rep *inspectReport, failedLocal bool) {
	rep = &inspectReport{
		ApplicationID: cfg.ApplicationID,
		Config:        cfg.Path,
		Guarantee:     string(cfg.Guarantee),
		StateDir:      runtime.StateDir(cfg),
		Brokers:       cfg.Kafka.Brokers,
		Stores:        []inspectStore{},
		Tasks:         []inspectTask{},
		Changelogs:    []inspectChangelog{},
	}
	if len(rep.Brokers) == 0 {
		rep.Brokers, rep.EmbeddedBroker = []string{cfg.EmbeddedBroker.Listen}, true
	}

	// The stores, and which store each changelog topic is of.
	type storeOf struct{ processor, store, backend string }
	logged := map[string]storeOf{} // changelog topic ->
	procs := map[string]bool{}
	var topics []string
	for _, p := range cfg.Processors {
		procs[p.Name] = true
		for _, s := range p.Stores {
			typ := s.Type
			if typ == "" {
				typ = config.StoreKeyValue
			}
			is := inspectStore{Processor: p.Name, Store: s.Name, Type: typ, Backend: s.Backend, Logging: s.Logging}
			if s.Logging {
				is.Changelog = changelog.TopicName(cfg.ApplicationID, s.Name)
				logged[is.Changelog] = storeOf{p.Name, s.Name, s.Backend}
				topics = append(topics, is.Changelog)
			}
			rep.Stores = append(rep.Stores, is)
		}
	}

	// The local state: task directories, their checkpoint files, and the database.
	tasks := map[string]*inspectTask{}
	task := func(name string, proc string, part int32) *inspectTask {
		t := tasks[name]
		if t == nil {
			t = &inspectTask{Task: name, Processor: proc, Partition: part, Configured: procs[proc]}
			tasks[name] = t
		}
		return t
	}
	failedLocal = readTaskDirs(rep, task) || failedLocal
	failedLocal = readDatabase(log, rep, task) || failedLocal
	for _, name := range slices.Sorted(maps.Keys(tasks)) {
		rep.Tasks = append(rep.Tasks, *tasks[name])
	}

	// The checkpoints of the changelog partitions: the database's when it was read (a file
	// may be stale: one a deletion left behind), else the files'.
	type tp struct {
		topic string
		part  int32
	}
	type cpAt struct {
		offset int64
		from   string
		file   *int64 // the file's, when the database's differs
	}
	cps := map[tp]cpAt{}
	for _, t := range rep.Tasks {
		if rep.State != "open" { // with the database read, it is the truth: a file may be stale
			for _, e := range t.CheckpointFile {
				cps[tp{e.Topic, e.Partition}] = cpAt{offset: e.Offset, from: "file"}
			}
		}
		for _, ls := range t.Database {
			if ls.Checkpoint == nil {
				continue
			}
			k := tp{changelog.TopicName(cfg.ApplicationID, ls.Store), t.Partition}
			c := cpAt{offset: *ls.Checkpoint, from: "database"}
			for _, e := range t.CheckpointFile {
				if e.Topic == k.topic && e.Partition == k.part && e.Offset != c.offset {
					c.file = &e.Offset
				}
			}
			cps[k] = c
		}
	}

	// The changelogs on the brokers.
	var (
		offs *listedOffsets
		err  error
	)
	if _, port, _ := net.SplitHostPort(cfg.EmbeddedBroker.Listen); rep.EmbeddedBroker && port == "0" {
		rep.BrokerError = fmt.Sprintf("the embedded broker listens on a port chosen at each start (embedded_broker.listen = %q)", cfg.EmbeddedBroker.Listen)
	} else if offs, err = changelogOffsets(ctx, log, cfg.Kafka, rep.Brokers, topics, timeout); err != nil {
		rep.BrokerError = err.Error()
	}
	rows := map[tp]*inspectChangelog{}
	row := func(k tp) *inspectChangelog {
		r := rows[k]
		if r == nil {
			s := logged[k.topic]
			r = &inspectChangelog{Topic: k.topic, Partition: k.part, Processor: s.processor, Store: s.store}
			rows[k] = r
		}
		return r
	}
	if offs != nil {
		for _, topic := range topics {
			if e := offs.errs[topic]; e != nil {
				rep.Problems = append(rep.Problems, e.Error())
				continue
			}
			for _, p := range offs.parts[topic] {
				r := row(tp{topic, p})
				if o, ok := offs.starts.Lookup(topic, p); ok && o.Err == nil {
					r.StartOffset = ptr(o.Offset)
				}
				if o, ok := offs.ends.Lookup(topic, p); ok && o.Err == nil {
					r.EndOffset = ptr(o.Offset)
				}
				if r.StartOffset == nil || r.EndOffset == nil {
					rep.Problems = append(rep.Problems, fmt.Sprintf("no offsets for %s partition %d", topic, p))
				}
			}
		}
	}
	for k, c := range cps {
		r := row(k)
		r.Checkpoint, r.CheckpointFrom = ptr(c.offset), c.from
		if c.file != nil {
			r.Note = fmt.Sprintf("the .checkpoint file says %d", *c.file)
		}
	}
	for _, r := range rows {
		lagOf(r, cfg.Guarantee == config.ExactlyOnce, logged[r.Topic].backend)
		rep.Changelogs = append(rep.Changelogs, *r)
	}
	slices.SortFunc(rep.Changelogs, func(a, b inspectChangelog) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	return rep, failedLocal
}

// lagOf sets r.Lag (and a note) from its offsets and checkpoint, as the restore would judge
// the checkpoint: one at or past the end, or before the log start, is not used.
func lagOf(r *inspectChangelog, exactlyOnce bool, backend string) {
	note := func(s string) {
		if r.Note == "" {
			r.Note = s
		} else {
			r.Note += "; " + s
		}
	}
	if r.Processor == "" {
		note("not the changelog of a store of the configuration")
	}
	if backend == "memory" && r.Checkpoint == nil {
		note("memory store: restored in full at each start")
	}
	if r.StartOffset == nil || r.EndOffset == nil {
		return
	}
	start, end := *r.StartOffset, *r.EndOffset
	var position int64 // no usable checkpoint: from the log start
	switch {
	case r.Checkpoint == nil:
	case *r.Checkpoint >= end:
		note("checkpoint at or past the end (topic recreated?): a restore starts over")
	case *r.Checkpoint+1 < start:
		note("checkpoint before the log start (truncated): a restore starts over")
	default:
		position = *r.Checkpoint + 1
	}
	var markers int64
	if exactlyOnce {
		markers = 1 // the commit marker that ends the partition
	}
	r.Lag = ptr(restore.Lag(start, end, position, markers))
}

// readTaskDirs adds the task directories of rep.StateDir and their checkpoint files; it
// reports a directory or file that exists but cannot be read.
func readTaskDirs(rep *inspectReport, task func(name, proc string, part int32) *inspectTask) (failedLocal bool) {
	dir := filepath.Join(rep.StateDir, "tasks")
	ents, err := os.ReadDir(dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			rep.Problems = append(rep.Problems, fmt.Sprintf("cannot read the task directories: %v", err))
			return true
		}
		return false
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		i := strings.LastIndexByte(e.Name(), '_')
		part, perr := strconv.ParseInt(e.Name()[i+1:], 10, 32)
		if i <= 0 || perr != nil {
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: not a task directory (<processor>_<partition>)", filepath.Join(dir, e.Name())))
			continue
		}
		t := task(e.Name(), e.Name()[:i], int32(part))
		t.Dir = filepath.Join(dir, e.Name())
		path := filepath.Join(t.Dir, store.CheckpointFileName)
		entries, err := store.ReadCheckpointFile(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			rep.Problems = append(rep.Problems, err.Error()) // names the file
			failedLocal = true
		default:
			t.CheckpointFile = []inspectCheckpoint{}
			for _, c := range entries {
				t.CheckpointFile = append(t.CheckpointFile, inspectCheckpoint{Topic: c.Topic, Partition: c.Partition, Offset: c.Offset})
			}
		}
	}
	return failedLocal
}

// readDatabase reads the checkpoints of the instance's database unless a running process
// holds the state directory, and sets rep.State.
func readDatabase(log hclog.Logger, rep *inspectReport, task func(name, proc string, part int32) *inspectTask) (failedLocal bool) {
	if _, err := os.Stat(rep.StateDir); errors.Is(err, fs.ErrNotExist) {
		rep.State = "missing"
		return false
	}
	if _, err := os.Stat(filepath.Join(rep.StateDir, "pebble")); errors.Is(err, fs.ErrNotExist) {
		rep.State = "missing" // a state directory that never held a database: nothing to open
		return false
	}
	// Read-only: nothing in the directory changes, and the lock is held only while reading.
	m, err := store.Open(store.Settings{Dir: rep.StateDir, MemoryBytes: store.MinMemoryBytes, Logger: log, ReadOnly: true})
	if errors.Is(err, store.ErrLocked) {
		rep.State = "locked"
		return false
	}
	if errors.Is(err, fs.ErrPermission) {
		// A user who may read the checkpoint files but not the database: they are what it sees.
		rep.State, rep.StateError = "unreadable", err.Error()
		return false
	}
	if err != nil {
		rep.State, rep.StateError = "error", err.Error()
		return true
	}
	defer func() {
		if err := m.Close(); err != nil {
			rep.Problems = append(rep.Problems, fmt.Sprintf("closing the database of %s: %v", rep.StateDir, err))
		}
	}()
	held, err := m.LocalTasks()
	if err != nil {
		rep.State, rep.StateError = "error", fmt.Sprintf("read the database of %s: %v", rep.StateDir, err)
		return true
	}
	rep.State = "open"
	for _, lt := range held {
		t := task(lt.ID.String(), lt.ID.Processor, lt.ID.Partition)
		t.Database = []inspectLocalStore{}
		for _, s := range lt.Stores {
			ls := inspectLocalStore{Store: s.Name}
			if s.HasCheckpoint {
				ls.Checkpoint = ptr(s.Checkpoint)
			}
			t.Database = append(t.Database, ls)
		}
	}
	return false
}

// listedOffsets are the changelogs' partitions and offsets on the brokers.
type listedOffsets struct {
	parts        map[string][]int32 // topic -> its partitions, sorted
	errs         map[string]error   // topic -> why it has no partitions
	starts, ends kadm.ListedOffsets
}

// changelogOffsets lists the partitions and the start and end offsets of topics. It fails
// at once when no broker accepts a connection, and after timeout when they do not answer.
func changelogOffsets(ctx context.Context, log hclog.Logger, k config.Kafka, brokers, topics []string, timeout time.Duration) (*listedOffsets, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	all := strings.Join(brokers, ",")
	if err := kafkaclient.Check(ctx, k, brokers); err != nil {
		if _, ok := errors.AsType[*kafkaclient.UnreachableError](err); ok {
			return nil, fmt.Errorf("no broker reachable at %s: %w", all, err)
		}
		return nil, err // the brokers accept connections, but not these settings
	}
	if len(topics) == 0 {
		return &listedOffsets{}, nil
	}
	cl, err := kgo.NewClient(kafkaclient.Opts(k, brokers, "inspect", log.Named("kafka"))...)
	if err != nil {
		return nil, fmt.Errorf("client of %s: %w", all, err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	wrap := func(what string, err error) error {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("no answer from the brokers %s within %s", all, timeout)
		}
		return fmt.Errorf("%s on %s: %w", what, all, err)
	}
	md, err := adm.Metadata(ctx, topics...)
	if err != nil {
		return nil, wrap("describe the changelog topics", err)
	}
	out := &listedOffsets{parts: map[string][]int32{}, errs: map[string]error{}}
	var present []string
	for _, t := range topics {
		d, ok := md.Topics[t]
		switch {
		case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
			out.errs[t] = fmt.Errorf("changelog topic %s does not exist on %s (the application has not run yet?)", t, all)
		case d.Err != nil:
			out.errs[t] = fmt.Errorf("changelog topic %s on %s: %w", t, all, d.Err)
		default:
			out.parts[t] = d.Partitions.Numbers()
			slices.Sort(out.parts[t])
			present = append(present, t)
		}
	}
	if len(present) == 0 {
		return out, nil
	}
	if out.starts, err = adm.ListStartOffsets(ctx, present...); err != nil {
		return nil, wrap("list the start offsets of the changelogs", err)
	}
	if out.ends, err = adm.ListEndOffsets(ctx, present...); err != nil {
		return nil, wrap("list the end offsets of the changelogs", err)
	}
	return out, nil
}

// printInspect prints rep as tables.
func printInspect(w io.Writer, rep *inspectReport) {
	fmt.Fprintf(w, "Application %s (%s), configuration %s\n", rep.ApplicationID, rep.Guarantee, rep.Config)
	fmt.Fprintf(w, "State directory %s: ", rep.StateDir)
	switch rep.State {
	case "open":
		fmt.Fprintln(w, "not in use; checkpoints from its database")
	case "locked":
		fmt.Fprintln(w, "locked by a running statehost process; checkpoints from the .checkpoint files")
	case "missing":
		fmt.Fprintln(w, "no local state")
	default:
		fmt.Fprintf(w, "cannot read the database: %s; checkpoints from the .checkpoint files\n", rep.StateError)
	}
	switch {
	case !rep.EmbeddedBroker:
		fmt.Fprintf(w, "Brokers %s", strings.Join(rep.Brokers, ","))
		if rep.BrokerError != "" {
			fmt.Fprintf(w, ": unreachable, end offsets and lag unknown: %s", rep.BrokerError)
		}
	case rep.BrokerError != "":
		fmt.Fprintf(w, "Embedded broker %s: not running (it runs inside statehost run), end offsets and lag unknown: %s", rep.Brokers[0], rep.BrokerError)
	default:
		fmt.Fprintf(w, "Embedded broker %s (of a running statehost run)", rep.Brokers[0])
	}
	fmt.Fprintln(w)

	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w)
	if len(rep.Stores) == 0 {
		fmt.Fprintln(w, "No stores.")
	} else {
		fmt.Fprintln(tw, "PROCESSOR\tSTORE\tTYPE\tBACKEND\tLOGGING\tCHANGELOG")
		for _, s := range rep.Stores {
			logging, topic := "on", s.Changelog
			if !s.Logging {
				logging, topic = "off", "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Processor, s.Store, s.Type, s.Backend, logging, topic)
		}
		tw.Flush()
	}

	storeOfTopic := map[string]string{} // changelog topic -> store
	for _, s := range rep.Stores {
		if s.Changelog != "" {
			storeOfTopic[s.Changelog] = s.Store
		}
	}
	fmt.Fprintln(w)
	if len(rep.Tasks) == 0 {
		fmt.Fprintln(w, "No task directories.")
	} else {
		db := rep.State == "open"
		if db {
			fmt.Fprintln(tw, "TASK\tDIRECTORY\tCHECKPOINT FILE\tDATABASE")
		} else {
			fmt.Fprintln(tw, "TASK\tDIRECTORY\tCHECKPOINT FILE")
		}
		for _, t := range rep.Tasks {
			dir := "-"
			if t.Dir != "" {
				dir = filepath.Join("tasks", filepath.Base(t.Dir))
			}
			name := t.Task
			if !t.Configured {
				name += " (not configured)"
			}
			file := "none"
			if t.CheckpointFile != nil {
				var parts []string
				for _, c := range t.CheckpointFile {
					if st, ok := storeOfTopic[c.Topic]; ok && c.Partition == t.Partition {
						parts = append(parts, fmt.Sprintf("%s@%d", st, c.Offset))
					} else {
						parts = append(parts, fmt.Sprintf("%s/%d@%d", c.Topic, c.Partition, c.Offset))
					}
				}
				file = strings.Join(parts, " ")
				if file == "" {
					file = "empty"
				}
			}
			if !db {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", name, dir, file)
				continue
			}
			var stores []string
			for _, s := range t.Database {
				if s.Checkpoint == nil {
					stores = append(stores, s.Store+" (data, no checkpoint)")
				} else {
					stores = append(stores, fmt.Sprintf("%s@%d", s.Store, *s.Checkpoint))
				}
			}
			dbs := strings.Join(stores, " ")
			if dbs == "" {
				dbs = "no state"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", name, dir, file, dbs)
		}
		tw.Flush()
	}

	fmt.Fprintln(w)
	if len(rep.Changelogs) == 0 {
		fmt.Fprintln(w, "No changelog partitions known.")
	} else {
		notes := slices.ContainsFunc(rep.Changelogs, func(c inspectChangelog) bool { return c.Note != "" })
		if notes {
			fmt.Fprintln(tw, "CHANGELOG\tPARTITION\tSTART\tEND\tCHECKPOINT\tLAG\tNOTE")
		} else {
			fmt.Fprintln(tw, "CHANGELOG\tPARTITION\tSTART\tEND\tCHECKPOINT\tLAG")
		}
		opt := func(p *int64) string {
			if p == nil {
				return "?"
			}
			return strconv.FormatInt(*p, 10)
		}
		for _, c := range rep.Changelogs {
			cp := "-"
			if c.Checkpoint != nil {
				cp = strconv.FormatInt(*c.Checkpoint, 10)
				if c.CheckpointFrom == "file" && rep.State == "open" {
					cp += " (file)"
				}
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s", c.Topic, c.Partition, opt(c.StartOffset), opt(c.EndOffset), cp, opt(c.Lag))
			if notes {
				fmt.Fprintf(tw, "\t%s", c.Note)
			}
			fmt.Fprintln(tw)
		}
		tw.Flush()
	}
	if len(rep.Problems) > 0 {
		fmt.Fprintln(w)
		for _, p := range rep.Problems {
			fmt.Fprintf(w, "problem: %s\n", p)
		}
	}
}

func ptr[T any](v T) *T { return &v }
