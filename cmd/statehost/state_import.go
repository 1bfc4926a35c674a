package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/changelog"
	"github.com/statehost/statehost/host/runtime"
	"github.com/statehost/statehost/restore"
	"github.com/statehost/statehost/store"
)

// stateImportFlags are the flags of statehost state import.
type stateImportFlags struct {
	stateFlags
	force, repartition *bool
}

func newStateImportFlags(env *cliEnv) stateImportFlags {
	f := stateImportFlags{stateFlags: newStateFlags(env, "import", stateImportSynopsis, stateImportUsage, "the `STORE` to import into (required)")}
	f.force = f.fs.Bool("force", false, "write the entries over a store that holds data")
	f.repartition = f.fs.Bool("repartition", false, "put each entry in the partition of its key's hash, not the partition its line names")
	return f
}

// stateImportCmd is `statehost state import`.
func stateImportCmd(ctx context.Context, env *cliEnv, args []string) int {
	f := newStateImportFlags(env)
	pos, s, code, ok := f.load(env, args, 1, "one FILE")
	if !ok {
		return code
	}
	log := env.Logger.Named("state")
	var in io.Reader = env.Stdin
	name := "standard input"
	if pos[0] != "-" {
		file, err := os.Open(pos[0])
		if err != nil {
			return failed(log, "cannot import", err)
		}
		defer file.Close()
		in, name = file, pos[0]
	}
	entries, err := readImportFile(in, name, s)
	if err != nil {
		return failed(log, "cannot import", err)
	}
	im := &importer{log: log, s: s, entries: entries, force: *f.force, repartition: *f.repartition, timeout: *f.timeout}
	if err := im.run(ctx); err != nil {
		return failed(log, "cannot import", err)
	}
	return exitOK
}

// importer is one run of statehost state import.
type importer struct {
	log                hclog.Logger
	s                  stateStore
	entries            []importEntry
	force, repartition bool
	timeout            time.Duration

	local *store.Manager // the application's local state; nil: none
	kafka *stateKafka
	parts int32 // the store's partition count
}

// run checks the target, then writes the entries.
func (im *importer) run(ctx context.Context) error {
	if im.s.spec.Backend == store.Memory && im.s.topic == "" {
		return fmt.Errorf("store %s is a memory store without logging: it keeps nothing between runs, there is nothing to import into", im.s.spec.Name)
	}
	var err error
	if im.kafka, err = connectState(ctx, im.log, im.s.cfg, im.timeout); err != nil {
		return err
	}
	defer im.kafka.close(im.log)
	if err := im.checkNotRunning(ctx); err != nil {
		return err
	}
	if im.s.spec.Backend == store.Pebble {
		if im.local, err = openLocal(im.log, im.s.cfg, false); err != nil {
			return err
		}
		if im.local == nil && im.s.topic == "" { // the state directory is where such a store lives
			dir := runtime.StateDir(im.s.cfg)
			if im.local, err = store.Open(store.Settings{Dir: dir, MemoryBytes: store.MinMemoryBytes, Logger: im.log, SyncCommits: true}); err != nil {
				return fmt.Errorf("open the state directory %s: %w", dir, err)
			}
		}
		if im.local != nil {
			defer im.local.Close()
		}
	}
	if im.parts, err = im.partitionCount(ctx); err != nil {
		return err
	}
	byPart, err := im.assign()
	if err != nil {
		return err
	}
	if err := im.checkEmpty(ctx); err != nil {
		return err
	}
	if im.s.topic != "" {
		tm, err := changelog.NewTopicManager(im.kafka.adm, changelog.TopicSettings{AppID: im.s.cfg.ApplicationID,
			ReplicationFactor: im.s.cfg.Kafka.ReplicationFactor, Logger: im.log})
		if err != nil {
			return err
		}
		if err := tm.Ensure(ctx, im.parts, changelog.TopicSpecs([]changelog.StoreSpec{im.s.spec})); err != nil {
			return err
		}
	}
	return im.write(ctx, byPart)
}

// checkNotRunning refuses when the application's consumer group keeps members: an instance
// runs somewhere (one that runs here holds the state directory, which openLocal refuses).
// An instance that stopped stays a member for session_timeout (a static member, so that a
// restart takes its tasks back): checkNotRunning waits that long for the members to go.
func (im *importer) checkNotRunning(ctx context.Context) error {
	group := im.s.cfg.ApplicationID
	deadline := time.Now().Add(im.s.cfg.SessionTimeout + 3*time.Second)
	for logged := false; ; {
		groups, err := im.kafka.adm.DescribeGroups(ctx, group)
		g, ok := groups[group]
		if err == nil && ok && g.Err != nil && !errors.Is(g.Err, kerr.GroupIDNotFound) {
			err = g.Err
		}
		switch {
		case err != nil && (!kerr.IsRetriable(err) && !kgo.IsRetryableBrokerErr(err) || time.Now().After(deadline)):
			// A coordinator that is loading or not yet elected (a cluster just started, a
			// broker restarting) answers with a retriable error, and a broker that restarts
			// refuses the connection: asked again below.
			return fmt.Errorf("describe the consumer group %s: %w", group, err)
		case err != nil:
		case !ok || g.Err != nil || len(g.Members) == 0:
			return nil
		case time.Now().After(deadline):
			var who []string
			for _, m := range g.Members {
				who = append(who, m.ClientHost)
			}
			return fmt.Errorf("application %s runs: its consumer group has had %d members (%s) for more than its session_timeout %v; stop every instance first",
				group, len(g.Members), strings.Join(who, ", "), im.s.cfg.SessionTimeout)
		case !logged:
			im.log.Info("waiting for the consumer group's members to go: a stopped instance stays one for session_timeout",
				"group", group, "members", len(g.Members), "session_timeout", im.s.cfg.SessionTimeout)
			logged = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// partitionCount is the partition count of the store: its changelog's, or else its
// processor's inputs' (existing, or as their topic blocks declare them), as a run creates
// the changelog.
func (im *importer) partitionCount(ctx context.Context) (int32, error) {
	topics := append([]string{}, im.s.proc.Inputs...)
	if im.s.topic != "" {
		topics = append([]string{im.s.topic}, topics...)
	}
	details, err := im.kafka.adm.ListTopics(ctx, topics...)
	if err != nil {
		return 0, fmt.Errorf("describe %s: %w", strings.Join(topics, ", "), err)
	}
	for _, t := range topics {
		switch d := details[t]; {
		case d.Err == nil && len(d.Partitions) > 0:
			return int32(len(d.Partitions)), nil
		case d.Err != nil && !errors.Is(d.Err, kerr.UnknownTopicOrPartition):
			return 0, fmt.Errorf("describe %s: %w", t, d.Err)
		}
	}
	for _, in := range im.s.proc.Inputs {
		for _, t := range im.s.cfg.Topics {
			if t.Name == in && t.Partitions > 0 {
				return t.Partitions, nil
			}
		}
		for _, rp := range im.s.cfg.Repartitions {
			if rp.Topic == in && rp.Partitions > 0 {
				return rp.Partitions, nil
			}
		}
	}
	return 0, fmt.Errorf("cannot tell the partition count of store %s: its processor %s's inputs (%s) do not exist and have no topic block with partitions; create them first",
		im.s.spec.Name, im.s.proc.Name, strings.Join(im.s.proc.Inputs, ", "))
}

// assign returns the entries by the partition they go to.
func (im *importer) assign() (map[int32][]importEntry, error) {
	byPart := map[int32][]importEntry{}
	for _, e := range im.entries {
		p := e.Partition
		if im.repartition {
			p = runtime.KeyPartition(e.Key, im.parts, 0)
		} else if p >= im.parts {
			return nil, fmt.Errorf("%s: partition %d: store %s has %d partitions (its processor %s's inputs'); --repartition puts each entry in the partition of its key",
				e.pos, p, im.s.spec.Name, im.parts, im.s.proc.Name)
		}
		byPart[p] = append(byPart[p], e)
	}
	return byPart, nil
}

// checkEmpty refuses, unless --force, when the store holds data: its changelog has records,
// or a partition of the local state has entries.
func (im *importer) checkEmpty(ctx context.Context) error {
	if im.force {
		return nil
	}
	var held []string
	if im.s.topic != "" {
		starts, err := im.kafka.adm.ListStartOffsets(ctx, im.s.topic)
		if err == nil {
			ends, eerr := im.kafka.adm.ListEndOffsets(ctx, im.s.topic)
			err = eerr
			ends.Each(func(o kadm.ListedOffset) {
				if s, ok := starts.Lookup(o.Topic, o.Partition); ok && o.Err == nil && o.Offset > s.Offset {
					held = append(held, fmt.Sprintf("its changelog %s has %d records in partition %d", o.Topic, o.Offset-s.Offset, o.Partition))
				}
			})
		}
		if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) {
			return fmt.Errorf("list the offsets of %s: %w", im.s.topic, err)
		}
	}
	if im.local != nil {
		parts, err := heldPartitions(im.local, im.s)
		if err != nil {
			return err
		}
		for _, p := range slices.Sorted(maps.Keys(parts)) {
			has, err := im.localHasData(p)
			if err != nil {
				return err
			}
			if has {
				held = append(held, fmt.Sprintf("the local state of %s has entries in partition %d", runtime.StateDir(im.s.cfg), p))
			}
		}
	}
	if len(held) > 0 {
		slices.Sort(held)
		return fmt.Errorf("store %s of application %s holds data: %s; --force writes the entries over it", im.s.spec.Name, im.s.cfg.ApplicationID, strings.Join(held, "; "))
	}
	return nil
}

// localHasData reports whether partition p of the store has entries in the local state.
func (im *importer) localHasData(p int32) (bool, error) {
	st, err := openLocalTask(im.local, im.s, p)
	if err != nil {
		return false, err
	}
	defer st.Close()
	return st.Partition(im.s.spec.Name).HasData()
}

// write writes the entries of each partition through a task of the store, as a run writes
// them, into the changelog and the store's local state: the application's, restored first to
// the end of its changelog, for the partitions it holds (every partition of a store without
// a changelog); a temporary one for the others. Each task commits as a run commits.
func (im *importer) write(ctx context.Context, byPart map[int32][]importEntry) error {
	held := map[int32]store.LocalStore{}
	if im.local != nil {
		var err error
		if held, err = heldPartitions(im.local, im.s); err != nil {
			return err
		}
	}
	var localParts, tempParts []int32
	for _, p := range slices.Sorted(maps.Keys(byPart)) {
		if _, ok := held[p]; im.local != nil && (ok || im.s.topic == "") {
			localParts = append(localParts, p)
		} else {
			tempParts = append(tempParts, p)
		}
	}
	tasks := map[int32]*changelog.Task{}
	if len(localParts) > 0 {
		opened, cleanup, err := openTasks(im.log, im.local, im.kafka, im.s, localParts)
		defer cleanup()
		if err != nil {
			return err
		}
		if im.s.topic != "" {
			rs, err := restore.New(im.kafka.cl, im.kafka.adm, restore.Settings{ReadCommitted: true, Logger: im.log})
			if err != nil {
				return err
			}
			if err := rs.Restore(ctx, opened...); err != nil {
				return fmt.Errorf("restore the local state of store %s: %w", im.s.spec.Name, err)
			}
		}
		for _, t := range opened {
			tasks[t.Partition()] = t
		}
	}
	if len(tempParts) > 0 {
		opened, cleanup, err := tempTasks(im.log, im.kafka, im.s, tempParts)
		defer cleanup()
		if err != nil {
			return err
		}
		for _, t := range opened {
			tasks[t.Partition()] = t
		}
	}
	if err := im.checkTTLTime(tasks); err != nil {
		return err
	}
	dropped, written := 0, 0
	for _, p := range slices.Sorted(maps.Keys(byPart)) {
		n, d, err := im.writePartition(ctx, tasks[p], byPart[p])
		written, dropped = written+n, dropped+d
		if err != nil {
			return err
		}
	}
	im.log.Info("imported", "store", im.s.spec.Name, "entries", written, "changelog", im.s.topic,
		"local_state_partitions", localParts, "other_partitions", tempParts)
	if dropped > 0 {
		return fmt.Errorf("%d entries were not written: their windows or sessions are closed or expired at the stream time of their task's local state", dropped)
	}
	return nil
}

// checkTTLTime refuses, before anything is written, to write into a task without a stream
// time the entries of a store whose TTL counts in stream time: the write time of an entry is
// its task's stream time, and an entry written without one counts as written at time 0, so it
// would expire at the task's first record. (Write times are not exported: an imported entry
// is written at the import.)
func (im *importer) checkTTLTime(tasks map[int32]*changelog.Task) error {
	if !im.s.spec.TTL.Enabled() || im.s.spec.TTL.Clock != store.TTLStreamTime {
		return nil
	}
	var none []int32
	for p, t := range tasks {
		if t.StoreTask().StreamTime() == store.NoTime {
			none = append(none, p)
		}
	}
	if len(none) == 0 {
		return nil
	}
	slices.Sort(none)
	return fmt.Errorf("store %s has a ttl counted in stream time, and partitions %v have no stream time yet: the entries written there would count as written at time 0, and expire at the first record; import into a store with ttl_clock = \"wall_clock\", or where the application has run", im.s.spec.Name, none)
}

// time is the event time of a window or session entry: a window's start, a session's end.
func (e importEntry) time(kind store.Kind) int64 {
	if kind == store.Session {
		return e.End
	}
	return e.Start
}

// writePartition puts entries into the store of t and commits (also on the way, when the
// task's uncommitted writes ask for it); it returns the entries written and dropped.
func (im *importer) writePartition(ctx context.Context, t *changelog.Task, entries []importEntry) (written, dropped int, err error) {
	commit := func() error {
		if err := t.Commit(ctx, func(context.Context) error { return nil }); err != nil {
			return fmt.Errorf("commit partition %d of store %s: %w", t.Partition(), im.s.spec.Name, err)
		}
		return nil
	}
	name := im.s.spec.Name
	if im.s.spec.Windowed() {
		// A window or session is written at its own time: the stream time rises to it first,
		// entry by entry in time order. The changelog record is stamped with the stream time
		// (a compact,delete topic: Apache Kafka deletes a record stamped 0 at once), and no
		// entry is closed by a later one's time.
		entries = slices.Clone(entries)
		slices.SortStableFunc(entries, func(a, b importEntry) int { return cmp.Compare(a.time(im.s.spec.Kind), b.time(im.s.spec.Kind)) })
	}
	for _, e := range entries {
		stored := true
		switch im.s.spec.Kind {
		case store.Window:
			t.StoreTask().ObserveTime(e.time(store.Window))
			stored, err = t.WindowStore(name).Put(e.Key, e.Start, e.Value)
		case store.Session:
			t.StoreTask().ObserveTime(e.time(store.Session))
			stored, err = t.SessionStore(name).Put(e.Key, e.Start, e.End, e.Value)
		default:
			err = t.Store(name).Put(e.Key, e.Value)
		}
		if err != nil {
			return written, dropped, fmt.Errorf("%s: %w", e.pos, err)
		}
		if !stored {
			im.log.Warn("entry not written: its window or session is closed or expired", "store", name, "partition", t.Partition(), "line", e.pos)
			dropped++
			continue
		}
		written++
		if t.NeedsCommit() {
			if err := commit(); err != nil {
				return written, dropped, err
			}
		}
	}
	return written, dropped, commit()
}
