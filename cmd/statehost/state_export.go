package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/statehost/statehost/changelog"
	"github.com/statehost/statehost/config"
	"github.com/statehost/statehost/restore"
	"github.com/statehost/statehost/store"
)

// stateExportFlags are the flags of statehost state export.
type stateExportFlags struct {
	stateFlags
	partition, src *string
}

func newStateExportFlags(env *cliEnv) stateExportFlags {
	f := stateExportFlags{stateFlags: newStateFlags(env, "export", stateExportSynopsis, stateExportUsage, "the `STORE` to export (required)")}
	f.partition = f.fs.String("partition", "", "export only partition `N` of the store")
	f.src = f.fs.String("from", "auto", "where to read the entries, `FROM`: auto, local or changelog (see above)")
	return f
}

// Where export reads a partition.
const (
	fromAuto      = "auto"
	fromLocal     = "local"
	fromChangelog = "changelog"
)

// stateExportCmd is `statehost state export`.
func stateExportCmd(ctx context.Context, env *cliEnv, args []string) int {
	f := newStateExportFlags(env)
	_, s, code, ok := f.load(env, args, 0, "no arguments")
	if !ok {
		return code
	}
	if *f.src != fromAuto && *f.src != fromLocal && *f.src != fromChangelog {
		return usageError(f.fs, "--from %q: want auto, local or changelog", *f.src)
	}
	part := int32(-1)
	if *f.partition != "" {
		n, err := strconv.ParseInt(*f.partition, 10, 32)
		if err != nil || n < 0 {
			return usageError(f.fs, "--partition %q: want a partition number, from 0", *f.partition)
		}
		part = int32(n)
	}
	log := env.Logger.Named("state")
	out := bufio.NewWriterSize(env.Stdout, 64<<10)
	x := &exporter{log: log, s: s, from: *f.src, part: part, timeout: *f.timeout, out: out}
	err := x.run(ctx)
	if ferr := out.Flush(); err == nil && ferr != nil {
		err = fmt.Errorf("write the entries: %w", ferr)
	}
	if err != nil {
		return failed(log, "cannot export", err)
	}
	return exitOK
}

// exporter is one run of statehost state export.
type exporter struct {
	log     hclog.Logger
	s       stateStore
	from    string // fromAuto, fromLocal or fromChangelog
	part    int32  // -1: every partition
	timeout time.Duration
	out     *bufio.Writer

	local *store.Manager             // nil: not read
	held  map[int32]store.LocalStore // the store's partitions in the local state
	kafka *stateKafka                // nil: not read
	parts []int32                    // the changelog's partitions
	offs  *listedOffsets             // the changelog's offsets
}

// run writes the entries of the store's partitions, each read where the plan says.
func (x *exporter) run(ctx context.Context) error {
	if err := x.openLocal(); err != nil {
		return err
	}
	if x.local != nil {
		defer x.local.Close()
	}
	if err := x.connect(ctx); err != nil {
		return err
	}
	if x.kafka != nil {
		defer x.kafka.close(x.log)
	}
	local, fromLog, err := x.plan()
	if err != nil {
		return err
	}
	readers := map[int32]storeReader{}
	for _, p := range local {
		st, err := openLocalTask(x.local, x.s, p)
		if err != nil {
			return err
		}
		defer st.Close()
		readers[p] = st
	}
	if len(fromLog) > 0 {
		restored, cleanup, err := x.restore(ctx, fromLog)
		defer cleanup()
		if err != nil {
			return err
		}
		maps.Copy(readers, restored)
	}
	n := 0
	for _, p := range slices.Sorted(maps.Keys(readers)) {
		k, err := writePartition(x.out, readers[p], x.s, p)
		n += k
		if err != nil {
			return err
		}
	}
	x.log.Info("exported", "store", x.s.spec.Name, "entries", n, "from_local_state", local, "from_changelog", fromLog)
	return nil
}

// openLocal opens the local state read-only, unless export reads only the changelogs, and
// finds the store's partitions there.
func (x *exporter) openLocal() error {
	if x.from == fromChangelog {
		return nil
	}
	if x.s.spec.Backend == store.Memory {
		if x.from == fromLocal {
			return fmt.Errorf("store %s is a memory store: it keeps no local state (read its changelog with --from changelog)", x.s.spec.Name)
		}
		return nil
	}
	m, err := openLocal(x.log, x.s.cfg, true)
	if err != nil || m == nil {
		return err
	}
	x.local = m
	x.held, err = heldPartitions(m, x.s)
	return err
}

// heldPartitions returns the partitions of the store that the local state of m holds.
func heldPartitions(m *store.Manager, s stateStore) (map[int32]store.LocalStore, error) {
	tasks, err := m.LocalTasks()
	if err != nil {
		return nil, fmt.Errorf("read the local state: %w", err)
	}
	held := map[int32]store.LocalStore{}
	for _, t := range tasks {
		if t.ID.Processor != s.proc.Name {
			continue
		}
		for _, ls := range t.Stores {
			if ls.Name == s.spec.Name {
				held[t.ID.Partition] = ls
			}
		}
	}
	return held, nil
}

// connect connects to the brokers unless export reads only the local state, and lists the
// changelog's partitions and offsets. In auto, brokers that do not answer leave the local
// state alone to read.
func (x *exporter) connect(ctx context.Context) error {
	switch {
	case x.from == fromLocal:
		return nil
	case x.s.topic == "":
		if x.from == fromChangelog {
			return fmt.Errorf("store %s has logging disabled: it has no changelog", x.s.spec.Name)
		}
		return nil
	}
	k, err := connectState(ctx, x.log, x.s.cfg, x.timeout)
	if errors.Is(err, errNoBroker) && x.from == fromAuto && len(x.held) > 0 {
		x.log.Warn("no broker answers: exporting the local state alone, not checked against the changelog", "error", err)
		return nil
	}
	if err != nil {
		return err
	}
	x.kafka = k
	topics, err := k.adm.ListTopics(ctx, x.s.topic)
	if err != nil {
		return fmt.Errorf("describe %s: %w", x.s.topic, err)
	}
	d := topics[x.s.topic]
	switch {
	case errors.Is(d.Err, kerr.UnknownTopicOrPartition):
		return nil // no changelog yet: nothing was ever logged
	case d.Err != nil:
		return fmt.Errorf("describe %s: %w", x.s.topic, d.Err)
	}
	x.parts = d.Partitions.Numbers()
	slices.Sort(x.parts)
	x.offs = &listedOffsets{}
	if x.offs.starts, err = k.adm.ListStartOffsets(ctx, x.s.topic); err == nil {
		x.offs.ends, err = k.adm.ListEndOffsets(ctx, x.s.topic)
	}
	if err != nil {
		return fmt.Errorf("list the offsets of %s: %w", x.s.topic, err)
	}
	return nil
}

// plan decides where each partition is read: the local state when it holds it and its
// checkpoint is at the end of the changelog (or it has no changelog, or the changelog could
// not be read), else the changelog.
func (x *exporter) plan() (local, fromLog []int32, err error) {
	all := map[int32]bool{}
	for p := range x.held {
		all[p] = true
	}
	for _, p := range x.parts {
		all[p] = true
	}
	if x.part >= 0 {
		if !all[x.part] {
			return nil, nil, fmt.Errorf("partition %d of store %s: %s", x.part, x.s.spec.Name, x.nowhere())
		}
		all = map[int32]bool{x.part: true}
	}
	inLog := func(p int32) bool { return slices.Contains(x.parts, p) }
	for _, p := range slices.Sorted(maps.Keys(all)) {
		_, held := x.held[p]
		switch {
		case held && (x.from == fromLocal || x.s.topic == "" || x.kafka == nil || x.current(p)):
			local = append(local, p)
		case x.kafka != nil && inLog(p):
			fromLog = append(fromLog, p)
		default:
			x.log.Warn("partition not exported: the local state does not hold it, and no broker answers", "store", x.s.spec.Name, "partition", p)
		}
	}
	if len(local) == 0 && len(fromLog) == 0 && x.from == fromLocal && x.local == nil {
		return nil, nil, fmt.Errorf("store %s: %s", x.s.spec.Name, x.nowhere())
	}
	return local, fromLog, nil
}

// nowhere says why a partition cannot be read.
func (x *exporter) nowhere() string {
	switch {
	case x.from == fromLocal:
		return "the local state of " + x.s.cfg.StateDir + " does not hold it"
	case x.kafka == nil && x.s.topic != "":
		return "the local state does not hold it, and no broker answers"
	case x.s.topic == "":
		return "the local state does not hold it, and the store has no changelog"
	}
	return "neither the local state nor the changelog " + x.s.topic + " holds it"
}

// current reports whether the local checkpoint of partition p is at the end of the
// changelog, as a restore would judge it (inspect's lag).
func (x *exporter) current(p int32) bool {
	ls := x.held[p]
	if !ls.HasCheckpoint || x.offs == nil {
		return false
	}
	r := &inspectChangelog{Topic: x.s.topic, Partition: p, Processor: x.s.proc.Name, Checkpoint: ptr(ls.Checkpoint)}
	if o, ok := x.offs.starts.Lookup(x.s.topic, p); ok && o.Err == nil {
		r.StartOffset = ptr(o.Offset)
	}
	if o, ok := x.offs.ends.Lookup(x.s.topic, p); ok && o.Err == nil {
		r.EndOffset = ptr(o.Offset)
	}
	lagOf(r, x.s.cfg.Guarantee == config.ExactlyOnce, x.s.spec.Backend.String())
	return r.Lag != nil && *r.Lag == 0
}

// restore restores the partitions parts of the store from its changelog into a temporary
// directory, as a run restores them, and returns a reader of each; cleanup closes them and
// removes the directory.
func (x *exporter) restore(ctx context.Context, parts []int32) (map[int32]storeReader, func(), error) {
	readers := map[int32]storeReader{}
	tasks, cleanup, err := tempTasks(x.log, x.kafka, x.s, parts)
	if err != nil {
		return nil, cleanup, err
	}
	rs, err := restore.New(x.kafka.cl, x.kafka.adm, restore.Settings{ReadCommitted: true, Logger: x.log})
	if err != nil {
		return nil, cleanup, err
	}
	if err := rs.Restore(ctx, tasks...); err != nil {
		return nil, cleanup, fmt.Errorf("restore %s: %w", x.s.topic, err)
	}
	for _, t := range tasks {
		readers[t.Partition()] = t
	}
	return readers, cleanup, nil
}

// tempTasks opens a task of the store's processor for each partition of parts, with the
// store alone (in Pebble: a memory store's changelog may not fit the heap), in a new
// temporary state directory; cleanup closes them and removes the directory.
func tempTasks(log hclog.Logger, k *stateKafka, s stateStore, parts []int32) ([]*changelog.Task, func(), error) {
	dir, err := os.MkdirTemp("", "statehost-state-")
	if err != nil {
		return nil, func() {}, err
	}
	m, err := store.Open(store.Settings{Dir: dir, MemoryBytes: 4 * store.MinMemoryBytes, Logger: log})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, func() {}, err
	}
	s.spec.Backend = store.Pebble
	tasks, closeTasks, err := openTasks(log, m, k, s, parts)
	return tasks, func() {
		closeTasks()
		_ = m.Close()
		_ = os.RemoveAll(dir)
	}, err
}

// openTasks opens in m a task of the store's processor for each partition of parts, with the
// store alone, logging it through a producer of k; cleanup closes them.
func openTasks(log hclog.Logger, m *store.Manager, k *stateKafka, s stateStore, parts []int32) ([]*changelog.Task, func(), error) {
	var tasks []*changelog.Task
	cleanup := func() {
		for _, t := range tasks {
			if err := t.Close(context.Background()); err != nil {
				log.Warn("closing a task", "partition", t.Partition(), "error", err)
			}
		}
	}
	prod, err := changelog.NewProducer(k.cl)
	if err != nil {
		return nil, cleanup, err
	}
	spec := s.spec
	spec.Metrics = nil
	for _, p := range parts {
		t, err := changelog.OpenTask(m, prod, changelog.TaskConfig{AppID: s.cfg.ApplicationID, Processor: s.proc.Name,
			Partition: p, Stores: []changelog.StoreSpec{spec}, Logger: log})
		if err != nil {
			return nil, cleanup, err
		}
		tasks = append(tasks, t)
	}
	return tasks, cleanup, nil
}
