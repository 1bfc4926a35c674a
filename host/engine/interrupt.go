package engine

import (
	"context"
	"fmt"
	"sync"

	"github.com/tetratelabs/wazero/api"

	"github.com/statehost/statehost/host/engine/internal/loopcheck"
)

// interruptExport is the name under which Compile exports the global that stops a guest
// (package loopcheck). The dot keeps it out of the names toolchains generate; a module
// exporting it is refused.
const interruptExport = "statehost.interrupt"

// instrument adds the loop checks to wasm. A binary it cannot walk is malformed: wazero's
// error on the original then says how, else (a bug here) the instrumentation's.
func (e *Engine) instrument(ctx context.Context, name string, wasm []byte) ([]byte, error) {
	res, err := loopcheck.Instrument(wasm, interruptExport)
	if err == nil {
		return res.Wasm, nil
	}
	cm, cerr := e.rt.CompileModule(ctx, wasm)
	if cerr != nil {
		return nil, fmt.Errorf("engine: %s: compile: %w", name, cerr)
	}
	_ = cm.Close(ctx)
	return nil, &ModuleError{Module: name, Problems: []string{"cannot be instrumented for the batch time limit: " + err.Error()}}
}

// interrupter stops an instance's running guest call when the call's context is done: it
// sets the instance's interrupt global, and the guest traps at its next loop iteration.
type interrupter struct {
	global api.MutableGlobal

	mu    sync.Mutex // orders the watcher's Set against disarm's
	armed bool       // a call is running
	fired bool       // the global was set during this call
}

// watch arms the interrupter for one guest call under ctx and returns the function that
// disarms it after the call, reporting whether the guest was interrupted. The global is
// zero again afterwards.
func (it *interrupter) watch(ctx context.Context) (disarm func() bool) {
	if ctx.Done() == nil {
		return func() bool { return false }
	}
	it.mu.Lock()
	it.armed, it.fired = true, false
	it.mu.Unlock()
	stop := context.AfterFunc(ctx, it.interrupt)
	return func() bool {
		stop()
		it.mu.Lock()
		defer it.mu.Unlock()
		it.armed = false
		if it.fired {
			it.global.Set(0)
		}
		return it.fired
	}
}

// interrupt sets the global if a call is running. It runs on the context's goroutine, while
// the guest runs: the compiled code reads the global at every loop head, and an aligned
// 8-byte store is seen there whole.
func (it *interrupter) interrupt() {
	it.mu.Lock()
	defer it.mu.Unlock()
	if it.armed {
		it.global.Set(1)
		it.fired = true
	}
}
