package main

import (
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/mattn/go-isatty"
	"github.com/vbauerster/cupwriter"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/statehost/statehost/restore"
)

// The values of `statehost run --progress`.
const (
	progressAuto = "auto" // bars when stderr is a terminal (and logs are text), log lines otherwise
	progressLog  = "log"  // log lines
	progressOff  = "off"  // neither: only the restorer's "restore started" and "restore done" lines
)

// defaultProgressInterval is the default of `statehost run --progress-interval`: how often a
// progress line is logged per restoring store partition.
const defaultProgressInterval = 5 * time.Second

// barDelay is how long a restore runs before it gets a bar: a restore that ends sooner (most
// of them, after a clean stop) does not flash one.
const barDelay = 250 * time.Millisecond

// maxShownRestores is how many restores at once have a bar or log lines of their own: the
// restores that start while that many are shown are summed up in one bar, or one log line
// ("restores progress"), for all of them. An instance of 4,096 tasks restores thousands of
// store partitions at once: a bar each does not fit a terminal, and a line each every
// interval floods the log.
const maxShownRestores = 8

// staleAfter is how long a restore may go without an event, while the runtime no longer
// lists its task as restoring (the task was revoked, or the run stopped it), before its bar
// or its log lines go.
const staleAfter = time.Second

// useBars reports whether `statehost run` shows progress bars on f: f is a terminal that is
// not dumb, and the logs are text (JSON logs are for machines: they get log lines).
func useBars(f *os.File, logJSON bool) bool {
	return !logJSON && os.Getenv("TERM") != "dumb" && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// restoreProgress shows the restores of `statehost run` as they go: a progress bar per
// restoring store partition on a terminal, or a log line every interval per store partition
// whose restore has run that long; past maxShownRestores at once, one bar or line sums up
// the others (restTally). It is a restore.Listener: the restore goroutine calls it,
// and its handlers only update a table (and a bar). A goroutine of its own logs the lines,
// shows the bars of restores that stall before their first batch, drops those of restores
// that stopped without an end (a revocation interrupts a restore without one), and removes
// the bars' container once no restore runs.
//
// Progress is counted in changelog offsets: a restore reads [start offset, end offset), and
// the offsets that hold no record (transaction markers, compacted records) count as read.
type restoreProgress struct {
	log      hclog.Logger
	interval time.Duration // between two log lines of one restore
	bars     *barUI        // nil: log lines

	mu      sync.Mutex
	active  map[restoreKey]*restoring
	alive   func(processor string, partition int32) bool // nil: every restore lives until its end event
	stopped bool

	shown int       // the active restores with a bar or lines of their own (restoring.own)
	rest  restTally // the others, summed up

	migrations func() []migrationView // lists the store migrations in progress; nil: none (progress_migrate.go)
	migs       map[restoreKey]*restoring

	stop chan struct{}
	done chan struct{}
}

var _ restore.Listener = (*restoreProgress)(nil)

// restoreKey names a store partition.
type restoreKey struct {
	processor string
	store     string
	partition int32
}

// restoring is a restore in progress.
type restoring struct {
	key        restoreKey
	topic      string
	start, end int64 // the restore reads the offsets [start, end)
	pos        int64 // the next offset to read
	began      time.Time
	lastEvent  time.Time
	lastLog    time.Time // zero: not logged yet
	bar        *mpb.Bar  // nil: not shown (yet)
	own        bool      // it has a bar or lines of its own; else it is one of rest
}

// restTally sums up the restores past maxShownRestores, from the first of them until they
// have all ended: one bar or one log line shows them.
type restTally struct {
	began       time.Time // when the first began; zero: none
	total, done int64     // their offsets to read, and read
	lastLog     time.Time
	bar         *mpb.Bar
	// n counts them, ended those that ended (or stopped); atomic: the bar's name reads them.
	n, ended atomic.Int64
}

// running reports whether some of the tally's restores are still running.
func (t *restTally) running() bool { return t.n.Load() > t.ended.Load() }

// newRestoreProgress returns the progress of the restores: with bars, shown on their
// terminal with the logs printed above them, or else log lines logged with log every
// interval (default defaultProgressInterval). Close stops it.
func newRestoreProgress(log hclog.Logger, bars *barUI, interval time.Duration) *restoreProgress {
	if interval <= 0 {
		interval = defaultProgressInterval
	}
	p := &restoreProgress{
		log:      log,
		interval: interval,
		bars:     bars,
		active:   make(map[restoreKey]*restoring),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	go p.loop()
	return p
}

// setAlive sets the function that tells whether a task is still restoring; a restore whose
// task is not, and that has had no event for staleAfter, is dropped.
func (p *restoreProgress) setAlive(alive func(processor string, partition int32) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.alive = alive
}

func (p *restoreProgress) OnRestoreStart(e restore.StartEvent) {
	k := restoreKey{e.Processor, e.Store, e.Partition}
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	if old := p.active[k]; old != nil { // a restore that was interrupted, again
		p.removeLocked(old, false)
	}
	if e.EndOffset <= e.StartOffset {
		return // nothing to restore: its end event follows at once
	}
	r := &restoring{key: k, topic: e.Topic, start: e.StartOffset, end: e.EndOffset, pos: e.StartOffset, began: now, lastEvent: now,
		own: p.shown < maxShownRestores}
	p.active[k] = r
	if r.own {
		p.shown++
		return
	}
	if !p.rest.running() {
		p.rest.began = now
	}
	p.rest.n.Add(1)
	p.rest.total += r.end - r.start
}

// removeLocked removes r from the active restores: it ended (done), or stopped without an
// end. Its bar, or its part of the tally, goes. The caller holds p.mu.
func (p *restoreProgress) removeLocked(r *restoring, done bool) {
	delete(p.active, r.key)
	if r.own {
		p.shown--
		if r.bar != nil && done {
			r.bar.SetTotal(r.end-r.start, true) // complete: the bar goes at the next frame
		} else if r.bar != nil {
			r.bar.Abort(true)
		}
		return
	}
	t := &p.rest
	if done {
		t.done += r.end - r.pos
	} else {
		t.total -= r.end - r.pos // never read
	}
	t.ended.Add(1)
	if t.running() {
		return
	}
	if t.bar != nil {
		t.bar.SetTotal(t.total, true)
	}
	t.bar, t.total, t.done, t.began, t.lastLog = nil, 0, 0, time.Time{}, time.Time{}
	t.n.Store(0)
	t.ended.Store(0)
}

func (p *restoreProgress) OnBatchRestored(e restore.BatchEvent) {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.active[restoreKey{e.Processor, e.Store, e.Partition}]
	if r == nil {
		return
	}
	pos := min(max(r.pos, e.Offset+1), r.end)
	if !r.own {
		p.rest.done += pos - r.pos
	}
	r.pos = pos
	r.lastEvent = now
	if p.bars == nil || !r.own {
		return
	}
	if r.bar == nil && now.Sub(r.began) >= barDelay {
		r.bar = p.bars.add(r)
	}
	if r.bar != nil {
		r.bar.SetCurrent(r.pos - r.start)
	}
}

func (p *restoreProgress) OnRestoreEnd(e restore.EndEvent) {
	k := restoreKey{e.Processor, e.Store, e.Partition}
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := p.active[k]; r != nil {
		p.removeLocked(r, true)
	}
}

// Close removes the bars of the restores still running (the run stopped them) and stops
// the progress; later events are ignored.
func (p *restoreProgress) Close() {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return
	}
	p.stopped = true
	close(p.stop)
	p.mu.Unlock()
	<-p.done

	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.active {
		p.removeLocked(r, false)
	}
	for _, r := range p.migs {
		p.endMigrationLocked(r, false)
	}
	if p.bars != nil {
		p.bars.close()
	}
}

// loop logs the progress lines, shows the bars of stalled restores, drops the restores that
// stopped without an end, and removes the bars' container when no bar is left.
func (p *restoreProgress) loop() {
	defer close(p.done)
	tick := min(max(p.interval/4, 50*time.Millisecond), time.Second)
	if p.bars != nil {
		tick = barDelay
	}
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
		}
		// The runtime's status is read before p.mu is taken: the restore goroutine sends
		// events to the runtime's status board and then to p, never holding both.
		p.mu.Lock()
		alive, migrations := p.alive, p.migrations
		p.mu.Unlock()
		var ms []migrationView
		if migrations != nil {
			ms = migrations()
		}
		var gone map[restoreKey]bool
		if alive != nil {
			p.mu.Lock()
			var stale []restoreKey
			for k, r := range p.active {
				if time.Since(r.lastEvent) >= staleAfter {
					stale = append(stale, k)
				}
			}
			p.mu.Unlock()
			for _, k := range stale {
				if !alive(k.processor, k.partition) {
					if gone == nil {
						gone = make(map[restoreKey]bool)
					}
					gone[k] = true
				}
			}
		}
		lines := p.tick(time.Now(), gone, ms)
		for _, l := range lines {
			switch l[0] {
			case tallyLine:
				p.log.Info("restores progress", l[1:]...)
				continue
			case migrationLine:
				p.log.Info("migration progress", l[1:]...)
				continue
			}
			p.log.Info("restore progress", l...)
		}
	}
}

// tick drops the restores in gone (if they still had no event since), takes in the
// migrations ms, shows the bars due, removes the container without bars, and returns the
// progress lines due.
func (p *restoreProgress) tick(now time.Time, gone map[restoreKey]bool, ms []migrationView) [][]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return nil
	}
	p.syncMigrationsLocked(now, ms)
	for k := range gone {
		if r := p.active[k]; r != nil && now.Sub(r.lastEvent) >= staleAfter {
			p.removeLocked(r, false)
		}
	}
	t := &p.rest
	if p.bars != nil {
		for _, r := range p.sortedLocked() {
			if r.own && r.bar == nil && now.Sub(r.began) >= barDelay {
				r.bar = p.bars.add(r)
			}
		}
		if t.running() && t.bar == nil && now.Sub(t.began) >= barDelay {
			t.bar = p.bars.addTally(t)
		}
		if t.bar != nil {
			t.bar.SetTotal(t.total, false)
			t.bar.SetCurrent(t.done)
		}
		p.migrationBarsLocked(now)
		if len(p.active) == 0 && len(p.migs) == 0 {
			p.bars.close() // holds p.mu: no bar is added meanwhile
		}
		return nil
	}
	lines := p.migrationLinesLocked(now)
	for _, r := range p.sortedLocked() {
		if !r.own || now.Sub(r.began) < p.interval || now.Sub(r.lastLog) < p.interval {
			continue
		}
		r.lastLog = now
		done, total := r.pos-r.start, r.end-r.start
		rate := rateOf(done, now.Sub(r.began))
		lines = append(lines, []any{
			"processor", r.key.processor, "store", r.key.store, "partition", r.key.partition,
			"offset", r.pos - 1, // the last offset read: the store's checkpoint
			"restored", done, "total", total, "percent", percentOf(done, total),
			"rate", int64(rate), "eta", etaOf(total-done, rate),
			"topic", r.topic,
		})
	}
	if t.running() && now.Sub(t.began) >= p.interval && now.Sub(t.lastLog) >= p.interval {
		t.lastLog = now
		rate := rateOf(t.done, now.Sub(t.began))
		lines = append(lines, []any{
			tallyLine, "restores", t.n.Load() - t.ended.Load(), "ended", t.ended.Load(),
			"restored", t.done, "total", t.total, "percent", percentOf(t.done, t.total),
			"rate", int64(rate), "eta", etaOf(t.total-t.done, rate),
		})
	}
	return lines
}

// tallyLine marks the line of tick that sums up the restores past maxShownRestores: loop
// logs it as "restores progress", the others as "restore progress".
const tallyLine = "summed"

// sortedLocked returns the active restores by processor, store and partition. The caller
// holds p.mu.
func (p *restoreProgress) sortedLocked() []*restoring {
	out := make([]*restoring, 0, len(p.active))
	for _, r := range p.active {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].key, out[j].key
		if a.processor != b.processor {
			return a.processor < b.processor
		}
		if a.store != b.store {
			return a.store < b.store
		}
		return a.partition < b.partition
	})
	return out
}

// rateOf returns n per second over d.
func rateOf(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// percentOf returns done as a whole percentage of total.
func percentOf(done, total int64) int64 {
	if total <= 0 {
		return 100
	}
	return done * 100 / total
}

// etaOf returns how long left records take at rate, rounded to the second; 0 when the rate
// is not known yet.
func etaOf(left int64, rate float64) time.Duration {
	if rate <= 0 || left <= 0 {
		return 0
	}
	return secondsDuration(float64(left) / rate)
}

// secondsDuration converts seconds to a duration rounded to the second, clamped to a
// thousand days (a stalled restore's estimate would overflow a Duration).
func secondsDuration(secs float64) time.Duration {
	const most = 1000 * 24 * time.Hour
	if secs >= most.Seconds() {
		return most
	}
	return time.Duration(secs * float64(time.Second)).Round(time.Second)
}

// compact formats n for a bar: 987, 12.3k, 4.56M, 7.89G.
func compact(n int64) string {
	switch {
	case n < 10_000:
		return fmt.Sprint(n)
	case n < 1_000_000:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	case n < 1_000_000_000:
		return fmt.Sprintf("%.2fM", float64(n)/1e6)
	}
	return fmt.Sprintf("%.2fG", float64(n)/1e9)
}

// barUI shows the restores' bars on a terminal, in an mpb container that exists while there
// are bars. While it exists, the logger writes its lines through it (see stderrWriter), and
// mpb prints them above the bars; otherwise the logger writes to the terminal directly.
type barUI struct {
	out *os.File
	lw  *stderrWriter

	// The fields below are guarded by the restoreProgress's mu.
	p  *mpb.Progress
	cw termWriter
}

// newBarUI returns the bars' UI on the terminal out, and the writer the logger must write
// to: out, or the bars' container while bars show.
func newBarUI(out *os.File) (*barUI, *stderrWriter) {
	lw := &stderrWriter{out: out}
	return &barUI{out: out, lw: lw}, lw
}

// add shows a bar for r, creating the container when there is none; it returns nil when
// the container cannot draw.
func (u *barUI) add(r *restoring) *mpb.Bar {
	name := fmt.Sprintf("%s/%s p%d", r.key.processor, r.key.store, r.key.partition)
	return u.addBar(r.end-r.start, r.pos-r.start, r.began, decor.Name(name, decor.WC{C: decor.DSyncWidthR | decor.DextraSpace}))
}

// addBar shows a bar of total offsets, current of them read since began, named by name.
func (u *barUI) addBar(total, current int64, began time.Time, name decor.Decorator) *mpb.Bar {
	if u.p == nil {
		u.cw = termWriter{cupwriter.New(u.out, false)}
		u.p = mpb.New(mpb.WithConsoleWriter(u.cw), mpb.WithRefreshRate(150*time.Millisecond))
		u.lw.route(u.p)
	}
	bar, err := u.p.Add(total, mpb.BarStyle().Build(),
		mpb.BarRemoveOnComplete(),
		mpb.PrependDecorators(name),
		mpb.AppendDecorators(
			decor.Any(func(s decor.Statistics) string {
				return compact(s.Current) + " of " + compact(s.Total)
			}, decor.WC{C: decor.DSyncWidth | decor.DextraSpace}),
			decor.Any(func(s decor.Statistics) string {
				return fmt.Sprintf(" %d%%", percentOf(s.Current, s.Total))
			}, decor.WC{C: decor.DSyncWidth | decor.DextraSpace}),
			decor.Any(func(s decor.Statistics) string {
				return " " + compact(int64(rateOf(s.Current, time.Since(began)))) + "/s"
			}, decor.WC{C: decor.DSyncWidth | decor.DextraSpace}),
			decor.Any(func(s decor.Statistics) string {
				if s.Current == 0 {
					return " eta ?"
				}
				return " eta " + etaOf(s.Total-s.Current, rateOf(s.Current, time.Since(began))).String()
			}, decor.WC{C: decor.DSyncWidth | decor.DextraSpace}),
		),
	)
	if err != nil {
		// The container ended: it could not draw on the terminal (p.Error says why). The
		// restore goes on without a bar; the logger writes to the terminal directly.
		return nil
	}
	bar.SetCurrent(current)
	return bar
}

// addTally shows the bar of the restores that t sums up; nil when the container cannot draw.
func (u *barUI) addTally(t *restTally) *mpb.Bar {
	return u.addBar(t.total, t.done, t.began, decor.Any(func(decor.Statistics) string {
		n, ended := t.n.Load(), t.ended.Load()
		return fmt.Sprintf("%d more restores, %d ended", n, ended)
	}, decor.WC{C: decor.DSyncWidthR | decor.DextraSpace}))
}

// close removes the container once its bars are gone (every bar must be complete or
// aborted): it waits for its last frame, prints the log lines it still held, and routes the
// logger to the terminal again.
func (u *barUI) close() {
	if u.p == nil {
		return
	}
	p, cw := u.p, u.cw
	u.p = nil
	u.lw.unroute(func() {
		p.Wait()
		if cw.Len() > 0 { // lines written after the last frame
			_ = cw.Flush(0)
		}
	})
}

// termWriter is the bars' terminal: a cupwriter whose size falls back to 80x24 when the
// terminal reports none (a pseudo-terminal nobody sized).
type termWriter struct{ *cupwriter.Writer }

func (w termWriter) GetTermSize() (width, height int, err error) {
	width, height, err = w.Writer.GetTermSize()
	if err != nil || width <= 0 || height <= 0 {
		return 80, 24, nil
	}
	return width, height, nil
}

// stderrWriter is the logger's output when progress bars may show: the terminal, or while
// bars show, their container, which prints each line above the bars at its next frame.
type stderrWriter struct {
	mu  sync.Mutex
	out *os.File
	p   *mpb.Progress
}

func (w *stderrWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.p != nil {
		if n, err := w.p.Write(b); err == nil {
			return n, nil
		}
	}
	return w.out.Write(b)
}

// SupportsColor tells hclog (with hclog.AutoColor) that it writes to a terminal.
func (w *stderrWriter) SupportsColor() bool { return true }

// route sends the lines to p from now on.
func (w *stderrWriter) route(p *mpb.Progress) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.p = p
}

// unroute runs drain, which ends the container, while no line is written, and then sends
// the lines to the terminal again.
func (w *stderrWriter) unroute(drain func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	drain()
	w.p = nil
}
