package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/statehost/statehost/host/engine"
)

// Canaries, promotions and rollbacks (docs/decisions/20261205_canary_rollback.md).
//
// A canary deploy (DeployCanary) runs a new module on the tasks of some partitions of a
// processor only; the others run on the processor's module. The canary is this instance's: it
// applies to the tasks of those partitions whenever they run here (a task that a rebalance
// brings here starts the canary's module), and ends with the process, as every deploy through
// the API does. Promote makes the canary's module the processor's, on every task. Rollback
// ends a canary (its tasks go back to the processor's module), or, without one, makes the
// module before the last deploy the processor's again, read from the copy kept on disk by
// hash (<state dir>/modules/<hash>.wasm). A rollback over stores that the module it leaves
// migrated is possible only when that module declares the migrations reversible: the stores
// then migrate back through it, as a deploy's migrate (migrate.go), task by task, each in one
// commit; otherwise it is refused, and nothing changes.

// The operations, as DeployResult.Action and ProcessorStatus.InProgress name them.
const (
	opDeploy   = "deploy"
	opCanary   = "canary"
	opPromote  = "promote"
	opRollback = "rollback"
)

// Errors of DeployCanary, Promote and Rollback.
var (
	// ErrCanaryPending: the processor runs a canary; promote it or roll it back first.
	ErrCanaryPending = errors.New("runtime: a canary is in progress")
	// ErrNoCanary: Promote of a processor that runs no canary.
	ErrNoCanary = errors.New("runtime: no canary to promote")
	// ErrBadPartitions: a canary's partitions are empty or not the processor's.
	ErrBadPartitions = errors.New("runtime: bad canary partitions")
	// ErrNoPrevious: Rollback of a processor with no module before its current one.
	ErrNoPrevious = errors.New("runtime: no previous module")
	// ErrRollbackRefused: the rollback would leave stores in a form the older module cannot
	// read, or their reverse migration fails; nothing changed.
	ErrRollbackRefused = errors.New("runtime: rollback refused")
)

// canary is a processor's canary: mod runs on the tasks of partitions.
type canary struct {
	mod        *engine.Module
	version    ModuleVersion
	partitions []int32 // sorted
}

// CanaryStatus is a processor's canary in GET /v1/processors.
type CanaryStatus struct {
	Version    ModuleVersion `json:"version"`
	Partitions []int32       `json:"partitions"`
}

// TaskModule is a running task of a processor in GET /v1/processors: the module it runs (none
// while it migrates) and the versions of its stores.
type TaskModule struct {
	Partition     int32             `json:"partition"`
	Module        string            `json:"module,omitempty"`
	Canary        bool              `json:"canary,omitempty"` // it is a canary's task
	Migrating     bool              `json:"migrating,omitempty"`
	StoreVersions map[string]uint32 `json:"store_versions,omitempty"`
}

// backModule is a module a rollback leaves: the versions it declares, and how far back it can
// migrate each store (statehost_store_reversible).
type backModule struct {
	mod      *engine.Module
	versions map[string]uint32
	floors   map[string]uint32
}

// reverses reports whether b migrates the store name from version from back to version to.
func (b *backModule) reverses(name string, from, to uint32) bool {
	return b != nil && b.versions[name] == from && b.floors[name] <= to
}

// modFor returns the module task t is to run: its processor's canary's for a canary partition,
// else its processor's. The caller holds the table's lock.
func (dp *deploys) modFor(t *task) *engine.Module {
	if c := dp.canaries[t.proc]; c != nil && slices.Contains(c.partitions, t.id.Partition) {
		return c.mod
	}
	return t.proc.mod
}

// setOp shows op in progress for p ("" ends it). The caller holds the table's lock.
func (dp *deploys) setOp(p *processor, op string) {
	if dp.ops == nil {
		dp.ops = map[*processor]string{}
	}
	if op == "" {
		delete(dp.ops, p)
	} else {
		dp.ops[p] = op
	}
}

// forgetBack forgets the module p's last rollback left: a deploy replaces it. The caller holds
// the table's lock.
func (dp *deploys) forgetBack(p *processor) {
	if b := dp.backs[p]; b != nil {
		if !slices.Contains(dp.retired, b.mod) {
			dp.retired = append(dp.retired, b.mod)
		}
		delete(dp.backs, p)
	}
}

// describe adds p's canary, its tasks' modules and what is in progress to ps. The caller holds
// the table's lock.
func (dp *deploys) describe(p *processor, ps *ProcessorStatus) {
	c := dp.canaries[p]
	if c != nil {
		ps.Canary = &CanaryStatus{Version: c.version, Partitions: slices.Clone(c.partitions)}
		ps.InProgress = append(ps.InProgress, opCanary)
		done, left, _ := dp.switchProgress(p, c.mod)
		ps.Tasks += done + left
		ps.Switched += done
	}
	if op := dp.ops[p]; op != "" && op != opCanary {
		ps.InProgress = append(ps.InProgress, op)
	}
	ps.TaskModules = []TaskModule{}
	migrating := false
	for _, t := range dp.rt.tasks.active {
		if t.proc != p || t.state != stateRunning {
			continue
		}
		tm := TaskModule{Partition: t.id.Partition, Canary: c != nil && dp.modFor(t) == c.mod, Migrating: t.mig != nil}
		if t.mod != nil && t.mig == nil {
			tm.Module = t.mod.Hash()
		}
		if t.cl != nil {
			tm.StoreVersions = t.storeVersions()
		}
		migrating = migrating || tm.Migrating
		ps.TaskModules = append(ps.TaskModules, tm)
	}
	slices.SortFunc(ps.TaskModules, func(a, b TaskModule) int { return int(a.Partition - b.Partition) })
	if migrating {
		ps.InProgress = append(ps.InProgress, "migration")
	}
}

// ready returns why p cannot take a deploy, a canary, a promotion or a rollback now: the
// application is not running, or a switch is still pending; or p runs a canary and canaryOK
// is false. The caller holds the table's lock.
func (dp *deploys) ready(p *processor, canaryOK bool) error {
	name := p.cfg.Name
	if !dp.running {
		return fmt.Errorf("%w: processor %s: the application is not running", ErrNotRunning, name)
	}
	mods := []*engine.Module{p.mod}
	c := dp.canaries[p]
	if c != nil {
		if !canaryOK {
			return fmt.Errorf("%w: processor %s runs module %s on partitions %v: promote it (deploy --promote) or roll it back (rollback) first",
				ErrCanaryPending, name, short(c.mod.Hash()), c.partitions)
		}
		mods = append(mods, c.mod)
	}
	for _, mod := range mods {
		if _, unswitched, _ := dp.switchProgress(p, mod); unswitched > 0 {
			return fmt.Errorf("%w: processor %s: %d tasks have not switched to %s yet", ErrSwitchPending, name, unswitched, short(mod.Hash()))
		}
	}
	return nil
}

// DeployCanary runs wasm (from source) on the tasks of p's partitions only, as Deploy runs a
// module on all: checked, tried (its migrations over those tasks here), then switched at each
// task's next commit. The processor's other tasks run on their module. Promote extends it to
// every task; Rollback ends it.
func (r *Runtime) DeployCanary(ctx context.Context, name, source string, wasm []byte, partitions []int32) (res DeployResult, err error) {
	defer func() { r.metrics.deployed(name, res, err) }()
	r.deploy.mu.Lock()
	defer r.deploy.mu.Unlock()
	p := r.procByName(name)
	if p == nil {
		return DeployResult{}, fmt.Errorf("%w %q", ErrUnknownProcessor, name)
	}
	parts := slices.Sorted(slices.Values(partitions))
	parts = slices.Compact(parts)
	res = DeployResult{Processor: name, Action: opCanary, Previous: p.version, Partitions: parts}
	if len(parts) == 0 || parts[0] < 0 || parts[len(parts)-1] >= p.partitions {
		return res, fmt.Errorf("%w: processor %s: partitions %v: want partitions from 0 to %d", ErrBadPartitions, name, partitions, p.partitions-1)
	}
	r.tasks.mu.Lock()
	err = r.deploy.ready(p, false)
	r.tasks.mu.Unlock()
	if err != nil {
		return res, err
	}
	if sum := sha256.Sum256(wasm); hex.EncodeToString(sum[:]) == p.version.Hash {
		res.Version, res.Unchanged = p.version, true
		return res, nil
	}
	mod, err := r.eng.Compile(ctx, source, wasm)
	if err != nil {
		return res, fmt.Errorf("%w: processor %s: %w", ErrInvalidModule, name, err)
	}
	inCanary := func(t *task) bool { return slices.Contains(parts, t.id.Partition) }
	versions, err := r.deploy.probe(ctx, p, mod)
	if err == nil {
		err = r.deploy.tryMigrationsOf(ctx, p, mod, versions, nil, inCanary)
	}
	if err != nil {
		r.deploy.forget(mod)
		_ = mod.Close(ctx)
		return res, fmt.Errorf("%w: processor %s: %w", ErrInvalidModule, name, err)
	}
	res.Version = ModuleVersion{Hash: mod.Hash(), Source: source, LoadedAt: time.Now()}
	r.tasks.mu.Lock()
	if r.deploy.canaries == nil {
		r.deploy.canaries = map[*processor]*canary{}
	}
	r.deploy.canaries[p] = &canary{mod: mod, version: res.Version, partitions: parts}
	p.switchErr = nil
	r.deploy.forgetBack(p)
	r.tasks.mu.Unlock()
	r.deploy.keep(p, wasm, p.version)
	r.log.Info("canary validated, switching at the next commit", "processor", name, "hash", short(mod.Hash()),
		"partitions", fmt.Sprint(parts), "source", source)
	res.Tasks, err = r.deploy.awaitSwitch(ctx, p, mod, p.version, opCanary)
	return res, err
}

// beginCanaryOp begins the Promote or Rollback (op) of the processor name; the caller holds
// the deploys' lock. It returns the processor (nil, with an ErrUnknownProcessor, when there
// is none), its canary (nil without one), the module before its last deploy, the result to
// fill, and why the processor cannot take the operation now (deploys.ready).
func (r *Runtime) beginCanaryOp(name, op string) (p *processor, c *canary, previous *ModuleVersion, res DeployResult, err error) {
	if p = r.procByName(name); p == nil {
		return nil, nil, nil, DeployResult{}, fmt.Errorf("%w %q", ErrUnknownProcessor, name)
	}
	r.tasks.mu.Lock()
	defer r.tasks.mu.Unlock()
	res = DeployResult{Processor: name, Action: op, Previous: p.version}
	return p, r.deploy.canaries[p], p.previous, res, r.deploy.ready(p, true)
}

// Promote makes the module of p's canary p's module: the canary's migrations are tried over
// p's other tasks here, then they switch to it at their next commit, as in a Deploy. The
// module p ran becomes the previous one (Rollback's).
func (r *Runtime) Promote(ctx context.Context, name string) (res DeployResult, err error) {
	defer func() { r.metrics.deployed(name, res, err) }()
	r.deploy.mu.Lock()
	defer r.deploy.mu.Unlock()
	p, c, _, res, err := r.beginCanaryOp(name, opPromote)
	switch {
	case err != nil: // an unknown processor (p nil) too
		return res, err
	case c == nil:
		return res, fmt.Errorf("%w: processor %s runs no canary (deploy --partitions first)", ErrNoCanary, name)
	}
	res.Version = c.version
	versions, err := r.deploy.versionsOf(ctx, p, c.mod)
	if err == nil {
		err = r.deploy.tryMigrationsOf(ctx, p, c.mod, versions, nil, func(t *task) bool { return !slices.Contains(c.partitions, t.id.Partition) })
	}
	if err != nil {
		return res, fmt.Errorf("%w: processor %s: the canary's module %s: %w", ErrInvalidModule, name, short(c.mod.Hash()), err)
	}
	r.tasks.mu.Lock()
	old, prev := p.mod, p.version
	delete(r.deploy.canaries, p)
	p.mod, p.version, p.previous, p.prevMod, p.switchErr = c.mod, c.version, &prev, old, nil
	r.deploy.retired = append(r.deploy.retired, old)
	r.tasks.mu.Unlock()
	r.deploy.recordLineage(p, c.version, &prev)
	r.log.Info("canary promoted, switching at the next commit", "processor", name, "hash", short(c.mod.Hash()), "previous", short(prev.Hash))
	res.Tasks, err = r.deploy.awaitSwitch(ctx, p, c.mod, prev, opPromote)
	return res, err
}

// Rollback ends p's canary, its tasks going back to p's module; or, without a canary, makes
// the module before p's last deploy (ProcessorStatus.Previous, read from the copy kept on disk
// by its hash) p's module again. Stores that the module left behind migrated to a version
// the older module does not read are migrated back through it when it declares those
// migrations reversible (tried first over every task here, as a deploy's migrations); else
// the rollback is refused with ErrRollbackRefused, and nothing changes.
func (r *Runtime) Rollback(ctx context.Context, name string) (res DeployResult, err error) {
	defer func() { r.metrics.deployed(name, res, err) }()
	r.deploy.mu.Lock()
	defer r.deploy.mu.Unlock()
	p, c, prevVersion, res, err := r.beginCanaryOp(name, opRollback)
	if err != nil {
		return res, err
	}
	// from is the module left, to the module rolled back to; in selects the tasks that go back.
	var from, to *engine.Module
	in := func(*task) bool { return true }
	switch {
	case c != nil:
		from, to = c.mod, p.mod
		res.Previous, res.Version, res.Partitions = c.version, p.version, c.partitions
		in = func(t *task) bool { return slices.Contains(c.partitions, t.id.Partition) }
	case prevVersion == nil:
		return res, fmt.Errorf("%w: processor %s runs the module it started with, %s: there is nothing to roll back to", ErrNoPrevious, name, short(p.version.Hash))
	default:
		wasm, err := r.deploy.kept(prevVersion.Hash)
		if err != nil {
			return res, fmt.Errorf("%w: processor %s: %w", ErrNoPrevious, name, err)
		}
		if to, err = r.eng.Compile(ctx, "rollback", wasm); err != nil {
			return res, fmt.Errorf("%w: processor %s: module %s: %w", ErrInvalidModule, name, short(prevVersion.Hash), err)
		}
		from = p.mod
		res.Version = ModuleVersion{Hash: to.Hash(), Source: opRollback, LoadedAt: time.Now()}
	}
	back, err := r.deploy.backOf(ctx, p, from)
	var versions map[string]uint32
	if err == nil {
		versions, err = r.deploy.probe(ctx, p, to)
	}
	if err == nil {
		err = r.deploy.tryMigrationsOf(ctx, p, to, versions, back, in)
	}
	if err != nil {
		if c == nil {
			r.deploy.forget(to)
			_ = to.Close(ctx)
		}
		return res, fmt.Errorf("%w: processor %s: from %s to %s: %w", ErrRollbackRefused, name, short(from.Hash()), short(res.Version.Hash), err)
	}
	r.tasks.mu.Lock()
	if r.deploy.backs == nil {
		r.deploy.backs = map[*processor]*backModule{}
	}
	r.deploy.forgetBack(p)
	r.deploy.backs[p] = back
	var left *ModuleVersion // the module p leaves, which becomes its previous one
	if c != nil {
		delete(r.deploy.canaries, p)
	} else {
		v := p.version
		left = &v
		p.mod, p.version, p.previous, p.prevMod, p.switchErr = to, res.Version, left, from, nil
	}
	r.tasks.mu.Unlock()
	if left != nil {
		r.deploy.recordLineage(p, res.Version, left)
	}
	r.log.Info("rollback validated, switching at the next commit", "processor", name, "hash", short(to.Hash()), "from", short(from.Hash()))
	res.Tasks, err = r.deploy.awaitSwitch(ctx, p, to, res.Previous, opRollback)
	return res, err
}

// backOf returns what mod, a module p leaves at a rollback, declares of p's stores: their
// versions and how far back it migrates them.
func (dp *deploys) backOf(ctx context.Context, p *processor, mod *engine.Module) (*backModule, error) {
	versions, err := dp.versionsOf(ctx, p, mod)
	if err != nil {
		return nil, err
	}
	b := &backModule{mod: mod, versions: versions}
	if err := dp.withTrialInstance(ctx, p, mod, func(in *engine.Instance) (err error) {
		b.floors, err = in.ReversibleTo(ctx)
		return err
	}); err != nil {
		return nil, err
	}
	return b, nil
}

// modulesDir is where deployed modules are kept by hash, for rollbacks: <state dir>/modules.
func (dp *deploys) modulesDir() string { return filepath.Join(StateDir(dp.rt.cfg), "modules") }

// keep keeps wasm, a module deployed to p, on disk by its hash, and prev, the module it
// replaces, when it is not kept yet and its file still holds it (a module loaded from the
// configuration). A module that cannot be kept is logged: a rollback to it is then refused.
func (dp *deploys) keep(p *processor, wasm []byte, prev ModuleVersion) {
	keepOne := func(b []byte) error {
		sum := sha256.Sum256(b)
		path := filepath.Join(dp.modulesDir(), hex.EncodeToString(sum[:])+".wasm")
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		if err := os.MkdirAll(dp.modulesDir(), 0o755); err != nil {
			return err
		}
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, b, 0o644); err != nil {
			return err
		}
		return os.Rename(tmp, path)
	}
	err := keepOne(wasm)
	if _, kerr := os.Stat(filepath.Join(dp.modulesDir(), prev.Hash+".wasm")); kerr != nil && err == nil {
		var b []byte
		if b, err = os.ReadFile(prev.Source); err == nil {
			if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) == prev.Hash {
				err = keepOne(b)
			} else {
				err = fmt.Errorf("module file %s no longer holds module %s", prev.Source, short(prev.Hash))
			}
		}
	}
	if err != nil {
		dp.rt.log.Warn("a module is not kept for rollbacks", "processor", p.cfg.Name, "error", err)
	}
}

// kept returns the module of hash kept on disk.
func (dp *deploys) kept(hash string) ([]byte, error) {
	b, err := os.ReadFile(filepath.Join(dp.modulesDir(), hash+".wasm"))
	if err != nil {
		return nil, fmt.Errorf("module %s is not kept on disk: %w", short(hash), err)
	}
	return b, nil
}

// postPromote is POST /v1/processors/{name}/promote.
func (r *Runtime) postPromote(w http.ResponseWriter, req *http.Request) {
	name := req.PathValue("name")
	res, err := r.Promote(req.Context(), name)
	r.answerDeploy(w, req, name, res, err)
}

// postRollback is POST /v1/processors/{name}/rollback.
func (r *Runtime) postRollback(w http.ResponseWriter, req *http.Request) {
	name := req.PathValue("name")
	res, err := r.Rollback(req.Context(), name)
	r.answerDeploy(w, req, name, res, err)
}

// parsePartitions parses a list of partitions, "0,3".
func parsePartitions(s string) ([]int32, error) {
	var out []int32
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%w: %q is not a list of partitions such as 0,3", ErrBadPartitions, s)
		}
		out = append(out, int32(n))
	}
	return out, nil
}
