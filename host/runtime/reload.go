package runtime

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/statehost/statehost/config"
)

// Configuration reloads: the configuration file is read again while the application runs (its
// change on disk, SIGHUP, POST /v1/reload) and what a running instance can apply applies,
// without a restart or a rebalance of the other tasks; everything else is refused with the
// diagnostics of config.Diff, and the running configuration stays. See config.Diff for what is
// live and what is refused, and docs/decisions/20261205_config_reload.md.
//
// A reload runs in three steps:
//
//  1. Reload (this file) loads the file and compares it with the running configuration
//     (config.Diff), then checks what it would apply against the instance and the broker
//     (reload_prepare.go): the modules of new processors compile and start, a removed store's
//     changelog is empty, a changed commit_interval keeps the transaction timeout of
//     exactly-once, changed changelog configs are accepted (validate only), and new topics
//     pass the checks of the start (topics.go). Any problem refuses the whole reload.
//  2. It creates the new topics and alters the changed changelog configs, as the start would
//     have.
//  3. The loop applies the rest at a commit boundary where no job runs, no task holds records
//     and every task is committed (reload_apply.go): commit_interval; on_error (the tasks take
//     the new policy for their next call); a store added or removed (its processor's tasks
//     close and restore again from their checkpoints); a new processor, which waits
//     (processor.pending) until the group enables it: every member of the group has it
//     (balancer_fleet.go). Reload waits for that boundary, for up to reloadWait; meanwhile
//     the instance fetches nothing, so that the tasks finish what they hold and the next
//     commit (reasonReload) takes all of it.
//
// A reload holds the deploys' lock: a deploy waits for it, and it for a deploy.

// reloadWait bounds how long Reload waits for the loop to apply a reload: a job that runs
// for its whole time limit holds the commit boundary back.
const reloadWait = 2 * time.Minute

// ErrReloadRefused: a reload was refused, for the diagnostics of a *ReloadError; the running
// configuration stays.
var ErrReloadRefused = errors.New("runtime: configuration reload refused")

// ReloadError is a refused reload: the problems of the new file, or what of it cannot change
// while the application runs, each with its file and line. The running configuration stays.
type ReloadError struct {
	Diags hcl.Diagnostics
	Files map[string]*hcl.File // the new file, for config.WriteDiagnostics
}

func (e *ReloadError) Error() string {
	errs := e.Diags.Errs()
	if len(errs) == 0 {
		return ErrReloadRefused.Error()
	}
	if len(errs) == 1 {
		return fmt.Sprintf("%v: %v", ErrReloadRefused, errs[0])
	}
	return fmt.Sprintf("%v: %v (and %d more problems)", ErrReloadRefused, errs[0], len(errs)-1)
}

func (e *ReloadError) Unwrap() error { return ErrReloadRefused }

// ReloadResult is what a reload did: the body of POST /v1/reload.
type ReloadResult struct {
	File string `json:"file"` // the configuration file read
	// Changes are what applied, in words (config.Change.String); none when the file changed
	// nothing the application runs with.
	Changes []string `json:"changes,omitempty"`
	// Pending are the processors the reload added that wait for every instance of the group
	// to have them (a processor_enabled event follows on each instance).
	Pending []string `json:"pending,omitempty"`
	// Diagnostics are why the reload was refused; Error says it in one line.
	Diagnostics []Diagnostic `json:"diagnostics,omitempty"`
	Error       string       `json:"error,omitempty"`
}

// Diagnostic is a configuration problem in JSON: an hcl.Diagnostic with its position.
type Diagnostic struct {
	Severity string `json:"severity"` // "error" or "warning"
	Summary  string `json:"summary"`
	Detail   string `json:"detail,omitempty"`
	File     string `json:"file,omitempty"`
	Line     int    `json:"line,omitempty"`
	Column   int    `json:"column,omitempty"`
}

// diagnostics converts diags.
func diagnostics(diags hcl.Diagnostics) []Diagnostic {
	out := make([]Diagnostic, 0, len(diags))
	for _, d := range diags {
		jd := Diagnostic{Severity: "error", Summary: d.Summary, Detail: d.Detail}
		if d.Severity == hcl.DiagWarning {
			jd.Severity = "warning"
		}
		if d.Subject != nil {
			jd.File, jd.Line, jd.Column = d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column
		}
		out = append(out, jd)
	}
	return out
}

// reloads is the reload side of a Runtime.
type reloads struct {
	rt *Runtime

	serial  sync.Mutex     // one reload at a time
	current *config.Config // the configuration that runs: New's, then each reload's (guarded by serial)

	mu     sync.Mutex  // a leaf lock: guards plan and its drained, and resume
	plan   *reloadPlan // prepared, waiting for the loop's next commit boundary (atBoundary)
	resume []string    // the topics a withdrawn plan drained, for the loop to fetch again

	pending  atomic.Int32                     // processors added by reloads that the group has not enabled yet
	adv      atomic.Pointer[[]advertisedProc] // the processors this member advertises (publish)
	joined   atomic.Pointer[map[string]bool]  // the processors its last join advertised
	balancer atomic.Pointer[taskBalancer]     // the group consumer's balancer (wire)
}

func (rl *reloads) init(r *Runtime) {
	rl.rt = r
	rl.current = r.cfg
}

// ReloadFile reads the configuration file the application runs with again and reloads it
// (Reload); reason says what asked: "watch", "signal" or "api".
func (r *Runtime) ReloadFile(ctx context.Context, reason string) (ReloadResult, error) {
	next, diags := config.Load(r.cfg.Path, config.Options{})
	return r.Reload(ctx, next, diags, reason)
}

// Reload applies the configuration next (loaded with the diagnostics loadDiags) to the running
// application, as the package's doc on reloads says; reason says what asked for it. It
// returns a *ReloadError (matching ErrReloadRefused) when next has errors or changes what
// cannot change while the application runs: nothing is changed then. Its outcome is logged and
// emitted (config_reloaded, config_refused).
func (r *Runtime) Reload(ctx context.Context, next *config.Config, loadDiags hcl.Diagnostics, reason string) (res ReloadResult, err error) {
	rl := &r.reload
	rl.serial.Lock()
	defer rl.serial.Unlock()
	res.File = r.cfg.Path
	defer func() { rl.report(&res, err, reason) }()
	files := map[string]*hcl.File{}
	if next != nil {
		files = next.Files
	}
	if loadDiags.HasErrors() {
		return res, &ReloadError{Diags: errorsOf(loadDiags), Files: files}
	}
	r.tasks.mu.Lock()
	running := r.deploy.running
	r.tasks.mu.Unlock()
	if !running {
		return res, fmt.Errorf("%w: reload %s: the application is not running", ErrNotRunning, r.cfg.Path)
	}
	r.deploy.mu.Lock() // no deploy meanwhile: a trial reads its processor's stores
	defer r.deploy.mu.Unlock()

	changes, diags := config.Diff(rl.current, next)
	if diags.HasErrors() {
		return res, &ReloadError{Diags: diags, Files: files}
	}
	if len(changes) == 0 {
		rl.current = next
		return res, nil
	}
	plan, diags := rl.prepare(ctx, next, changes)
	if diags.HasErrors() {
		plan.discard()
		return res, &ReloadError{Diags: diags, Files: files}
	}
	if err := rl.effect(ctx, plan); err != nil {
		plan.discard()
		if de, ok := errors.AsType[*DiagnosticsError](err); ok {
			return res, &ReloadError{Diags: de.Diags, Files: files}
		}
		return res, fmt.Errorf("runtime: reload %s: %w", r.cfg.Path, err)
	}
	if err := rl.await(ctx, plan); err != nil {
		plan.discard()
		return res, fmt.Errorf("runtime: reload %s: %w", r.cfg.Path, err)
	}
	rl.current = next
	for _, c := range changes {
		res.Changes = append(res.Changes, c.String())
	}
	for _, p := range plan.added {
		if p.pending.Load() {
			res.Pending = append(res.Pending, p.cfg.Name)
		}
	}
	return res, nil
}

// errorsOf returns the errors among diags.
func errorsOf(diags hcl.Diagnostics) hcl.Diagnostics {
	var out hcl.Diagnostics
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			out = append(out, d)
		}
	}
	return out
}

// report logs and emits the outcome of a reload, and fills res's diagnostics and error.
func (rl *reloads) report(res *ReloadResult, err error, reason string) {
	r := rl.rt
	if err == nil {
		r.log.Info("configuration reloaded", "file", res.File, "reason", reason, "changes", res.Changes, "pending", res.Pending)
		r.emit(Event{Kind: EventConfigReloaded, File: res.File, Reason: reason, Changes: res.Changes, Pending: res.Pending})
		return
	}
	res.Error = err.Error()
	if re, ok := errors.AsType[*ReloadError](err); ok {
		res.Diagnostics = diagnostics(re.Diags)
	}
	r.log.Error("configuration reload refused: the running configuration stays", "file", res.File, "reason", reason, "error", err)
	r.emit(Event{Kind: EventConfigRefused, File: res.File, Reason: reason, Error: res.Error, Diagnostics: res.Diagnostics})
}

// await hands plan to the loop, which applies it at its next commit boundary without jobs
// (atBoundary), and waits for that, for up to reloadWait. A plan the loop has not taken when
// the wait ends, or when the application stops, is withdrawn.
func (rl *reloads) await(ctx context.Context, plan *reloadPlan) error {
	rl.mu.Lock()
	rl.plan = plan
	rl.mu.Unlock()
	rl.rt.signals.wakeLoop()
	wctx, cancel := context.WithTimeout(ctx, reloadWait)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-plan.applied:
			return nil
		case <-tick.C:
		case <-wctx.Done():
		}
		rl.rt.tasks.mu.Lock()
		running := rl.rt.deploy.running
		rl.rt.tasks.mu.Unlock()
		if running && wctx.Err() == nil {
			continue
		}
		rl.mu.Lock()
		taken := rl.plan != plan
		if !taken {
			rl.plan = nil
			rl.resume = plan.drained // the loop fetches them again (due)
		}
		rl.mu.Unlock()
		if taken {
			<-plan.applied
			return nil
		}
		if !running {
			return fmt.Errorf("%w: the application stopped before the reload applied", ErrNotRunning)
		}
		return fmt.Errorf("the tasks reached no commit boundary without a running job: %w (nothing of the reload applied but its new topics and topic configs)", context.Cause(wctx))
	}
}

// wakeLoop wakes the loop's poll or sleep: it has something to do.
func (s *signals) wakeLoop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wake = true
	s.wakeLocked()
}

// due reports whether a reload waits and the loop should commit now (reasonReload) so that it
// applies at that boundary: no job runs and no task holds records. While a reload waits, the
// instance fetches nothing (drain): the jobs finish the records the tasks hold, and the
// commit finds every task settled. The caller holds no lock.
func (rl *reloads) due() bool {
	rl.mu.Lock()
	p := rl.plan
	if rl.resume != nil { // a plan withdrawn while it drained
		rl.rt.kafka.consumer.ResumeFetchTopics(rl.resume...)
		rl.resume = nil
	}
	rl.mu.Unlock()
	if p == nil {
		return false
	}
	rl.drain(p)
	rl.rt.tasks.mu.Lock()
	defer rl.rt.tasks.mu.Unlock()
	return rl.idle()
}

// idle reports whether no job runs and no task holds records. The caller holds the table's
// lock.
func (rl *reloads) idle() bool {
	for _, t := range rl.rt.tasks.active {
		if t.busy() || len(t.held) > 0 {
			return false
		}
	}
	return true
}

// drain stops fetching the input topics until p applies (undrain) or is withdrawn (due
// resumes them), once. From the loop's goroutine.
func (rl *reloads) drain(p *reloadPlan) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	if p.drained != nil || rl.plan != p {
		return
	}
	p.drained = slices.Sorted(maps.Keys(rl.rt.readers))
	rl.rt.kafka.consumer.PauseFetchTopics(p.drained...)
}

// undrain fetches again what drain stopped. The caller holds rl.mu; from the loop's goroutine.
func (rl *reloads) undrain(p *reloadPlan) {
	if len(p.drained) > 0 {
		rl.rt.kafka.consumer.ResumeFetchTopics(p.drained...)
	}
}

// publish records the processors this member advertises in its next join. The caller holds
// the table's lock, or New does.
func (rl *reloads) publish() {
	procs := rl.rt.procs
	adv := make([]advertisedProc, 0, len(procs))
	for _, p := range procs {
		adv = append(adv, advertisedProc{name: p.cfg.Name, inputs: p.cfg.Inputs, enabled: !p.pending.Load()})
	}
	rl.adv.Store(&adv)
}

// wire makes b advertise this member's processors, and hand over the processors the group
// enables.
func (rl *reloads) wire(b *taskBalancer) {
	report := b.state
	b.state = func() memberState {
		var s memberState
		if report != nil {
			s = report()
		}
		if adv := rl.adv.Load(); adv != nil {
			s.procs = *adv
			joined := make(map[string]bool, len(*adv))
			for _, p := range *adv {
				joined[p.name] = true
			}
			rl.joined.Store(&joined)
		}
		return s
	}
	b.onEnabled = rl.onEnabled
	rl.balancer.Store(b)
}

// enabledEvent is what the group enables, handed to the loop: the processors it runs
// (gated; all of this member's otherwise), of those this member advertised in the join
// the assignment answers (a pending processor it did not advertise yet stays pending).
type enabledEvent struct {
	gated      bool
	names      []string
	advertised map[string]bool
}

// onEnabled hands the processors the group enables in a sync assignment to the loop, when
// this member has processors that wait for them. From the group's goroutine.
func (rl *reloads) onEnabled(sa standbyAssignment) {
	if rl.pending.Load() == 0 {
		return
	}
	var advertised map[string]bool
	if j := rl.joined.Load(); j != nil {
		advertised = *j
	}
	rl.rt.signals.post(groupEvent{enabled: &enabledEvent{gated: sa.gated, names: sa.enabled, advertised: advertised}})
}
