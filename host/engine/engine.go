package engine

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"github.com/statehost/statehost/abi"
)

// Engine compiles guest modules and runs their instances in one wazero runtime.
//
// An Engine is safe for concurrent use; create one per process.
type Engine struct {
	cfg   Config
	log   hclog.Logger
	rt    wazero.Runtime
	cache wazero.CompilationCache

	// imports maps "module\x00name" to the definition of every function a guest may import.
	imports map[string]api.FunctionDefinition

	mu     sync.Mutex
	closed bool
}

// New creates an Engine: a wazero runtime with the memory limit, the compilation cache and
// the termination checks of cfg, and the host modules "statehost" and
// "wasi_snapshot_preview1" instantiated in it.
func New(ctx context.Context, cfg Config) (*Engine, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	// No WithCloseOnContextDone: Compile puts cheaper checks into the guest's loops
	// (interrupt.go).
	rc := wazero.NewRuntimeConfig().
		WithMemoryLimitPages(cfg.memoryLimitPages())
	var cache wazero.CompilationCache
	if cfg.CacheDir != "" {
		if err := os.MkdirAll(cfg.CacheDir, 0o755); err != nil {
			return nil, fmt.Errorf("engine: compilation cache: %w", err)
		}
		if cache, err = wazero.NewCompilationCacheWithDir(cfg.CacheDir); err != nil {
			return nil, fmt.Errorf("engine: compilation cache %s: %w", cfg.CacheDir, err)
		}
		rc = rc.WithCompilationCache(cache)
	}
	e := &Engine{
		cfg:     cfg,
		log:     cfg.Logger.Named("engine"),
		rt:      wazero.NewRuntimeWithConfig(ctx, rc),
		cache:   cache,
		imports: map[string]api.FunctionDefinition{},
	}
	if err := e.instantiateHostModules(ctx); err != nil {
		_ = e.Close(ctx)
		return nil, err
	}
	return e, nil
}

// instantiateHostModules instantiates the WASI and statehost host modules and records the
// functions they export, against which guest imports are validated.
func (e *Engine) instantiateHostModules(ctx context.Context) error {
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, e.rt); err != nil {
		return fmt.Errorf("engine: instantiate WASI: %w", err)
	}
	b := e.rt.NewHostModuleBuilder(abi.ModuleName)
	for _, f := range hostFunctions() {
		params := make([]api.ValueType, len(abi.Signatures[f.name]))
		for i, name := range abi.Signatures[f.name] {
			params[i] = api.ValueTypeI32
			if abi.IsI64Param(name) {
				params[i] = api.ValueTypeI64
			}
		}
		b.NewFunctionBuilder().
			WithGoModuleFunction(goModuleFunc(f.fn), params, []api.ValueType{api.ValueTypeI32}).
			WithParameterNames(abi.Signatures[f.name]...).
			WithResultNames("result").
			Export(f.name)
	}
	if _, err := b.Instantiate(ctx); err != nil {
		return fmt.Errorf("engine: instantiate host module %s: %w", abi.ModuleName, err)
	}
	for _, name := range []string{abi.ModuleName, abi.WASIModuleName} {
		for fn, def := range e.rt.Module(name).ExportedFunctionDefinitions() {
			e.imports[name+"\x00"+fn] = def
		}
	}
	return nil
}

// Close closes the runtime: every module and instance of the engine, and the cache handle.
func (e *Engine) Close(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	err := e.rt.Close(ctx)
	if e.cache != nil {
		if cerr := e.cache.Close(ctx); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("engine: close: %w", err)
	}
	return nil
}

// isClosed reports whether Close was called.
func (e *Engine) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}
