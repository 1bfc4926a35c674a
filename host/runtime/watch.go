package runtime

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/hashicorp/go-hclog"
)

// watchDebounce is how long the watcher waits after the last change of a module file before it
// deploys it: a build or a copy writes a file in several steps.
const watchDebounce = 500 * time.Millisecond

// moduleWatcher deploys the processors' module files when they change on disk, and reloads
// the configuration file when it changes (reload.go). It watches the files' directories, not
// the files: a deploy that writes a new file and renames it over the module replaces the
// file, and a watch of the file itself would end with the old one.
type moduleWatcher struct {
	r      *Runtime
	log    hclog.Logger
	fw     *fsnotify.Watcher
	files  map[string][]string // module file -> the processors that run it; the config file -> none
	config string              // the configuration file

	mu    sync.Mutex
	dirty map[string]bool // files changed and not deployed yet
	kick  chan struct{}   // wakes the deployer; capacity 1
}

// watchModules watches every processor's module file, and the configuration file, until the
// returned function is called, and deploys a module file (Deploy, once per processor that
// runs it), or reloads the configuration (ReloadFile), watchDebounce after its last change,
// in goroutines of its own; stop cancels a deploy in progress and waits for them. A file that
// disappears is ignored until it comes back. When the files cannot be watched it logs why and
// the application runs on without: deploys and reloads through the admin API still work. The
// module files of processors a reload added are not watched until the next start.
func (r *Runtime) watchModules(ctx context.Context) (stop func()) {
	if r.opts.NoWatch {
		return func() {}
	}
	w, err := r.newModuleWatcher()
	if err != nil {
		r.log.Warn("module files are not watched: deploy with statehost deploy", "error", err)
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { w.watch(ctx) })
	wg.Go(func() { w.deployer(ctx) })
	w.log.Info("watching module files", "files", slices.Sorted(maps.Keys(w.files)))
	return func() {
		cancel()
		_ = w.fw.Close()
		wg.Wait()
	}
}

// newModuleWatcher watches the directories of the processors' module files.
func (r *Runtime) newModuleWatcher() (*moduleWatcher, error) {
	fw, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("runtime: watch the module files: %w", err)
	}
	w := &moduleWatcher{
		r:     r,
		log:   r.log.Named("watch"),
		fw:    fw,
		files: make(map[string][]string),
		dirty: make(map[string]bool),
		kick:  make(chan struct{}, 1),
	}
	for _, p := range r.procs {
		w.files[p.cfg.Module] = append(w.files[p.cfg.Module], p.cfg.Name)
	}
	if r.cfg.Path != "" {
		w.config = filepath.Clean(r.cfg.Path)
		if w.files[w.config] == nil {
			w.files[w.config] = []string{}
		}
	}
	dirs := make(map[string]bool)
	for file := range w.files {
		dir := filepath.Dir(file)
		if dirs[dir] {
			continue
		}
		dirs[dir] = true
		if err := fw.Add(dir); err != nil {
			_ = fw.Close()
			return nil, fmt.Errorf("runtime: watch directory %s of module %s: %w", dir, file, err)
		}
	}
	return w, nil
}

// watch receives the file events until ctx ends, and marks a watched file dirty watchDebounce
// after its last event.
func (w *moduleWatcher) watch(ctx context.Context) {
	timers := make(map[string]*time.Timer)
	defer func() {
		for _, t := range timers {
			t.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.fw.Events:
			if !ok {
				return
			}
			file := filepath.Clean(ev.Name)
			if w.files[file] == nil || ev.Op == fsnotify.Chmod {
				continue // another file in the directory, or only its mode or times changed
			}
			w.log.Trace("module file event", "file", file, "op", ev.Op.String())
			if t := timers[file]; t != nil {
				t.Reset(watchDebounce)
				continue
			}
			timers[file] = time.AfterFunc(watchDebounce, func() { w.changed(file) })
		case err, ok := <-w.fw.Errors:
			if !ok {
				return
			}
			// An overflow of the event queue may have dropped changes: read every file again.
			w.log.Warn("watching module files", "error", err)
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				for file := range w.files {
					w.changed(file)
				}
			}
		}
	}
}

// changed marks file dirty and wakes the deployer.
func (w *moduleWatcher) changed(file string) {
	w.mu.Lock()
	w.dirty[file] = true
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// deployer deploys the dirty files until ctx ends, one at a time. A file that changes while
// it is deployed becomes dirty again and is deployed after.
func (w *moduleWatcher) deployer(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.kick:
		}
		w.mu.Lock()
		files := slices.Sorted(maps.Keys(w.dirty))
		clear(w.dirty)
		w.mu.Unlock()
		for _, file := range files {
			if ctx.Err() != nil {
				return
			}
			w.deploy(ctx, file)
		}
	}
}

// deploy reads file and deploys it to every processor that runs it; or reloads it, the
// configuration file.
func (w *moduleWatcher) deploy(ctx context.Context, file string) {
	if file == w.config {
		if _, err := os.Stat(file); err == nil {
			_, _ = w.r.ReloadFile(ctx, "watch") // logged and emitted by Reload
		}
		return
	}
	wasm, err := os.ReadFile(file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		w.log.Debug("module file is gone: waiting for it to come back", "file", file)
		return
	case err != nil:
		for _, name := range w.files[file] {
			w.r.logDeploy(name, DeployResult{}, fmt.Errorf("read module file: %w", err), "file", file)
		}
		return
	}
	for _, name := range w.files[file] {
		res, err := w.r.Deploy(ctx, name, file, wasm)
		if err != nil && ctx.Err() != nil {
			return // stopping
		}
		w.r.logDeploy(name, res, err, "file", file)
	}
}
