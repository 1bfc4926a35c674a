package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/statehost/statehost/abi"
)

// Module is a compiled and validated guest module, ready to be instantiated for tasks.
//
// A Module is safe for concurrent use. Compile it once per content (Hash) and off the
// processing path; Close it when no new instance will be made from it (instances already
// made keep running).
type Module struct {
	eng      *Engine
	name     string
	hash     string
	compiled wazero.CompiledModule
	// hasInitialize, hasInit: the module exports _initialize, statehost_init.
	hasInitialize, hasInit bool
	// hasPunctuate: the module exports statehost_punctuate, so it may schedule punctuations.
	hasPunctuate bool
	// perTask: the module exports statehost_instance_per_task (InstancePerTask).
	perTask bool
	// hasStoreVersion, hasMigrate: the module exports statehost_store_version,
	// statehost_migrate (migrate.go).
	hasStoreVersion, hasMigrate bool
	// hasStoreReversible, hasMigrateReverse: it exports statehost_store_reversible,
	// statehost_migrate_reverse (migrate.go).
	hasStoreReversible, hasMigrateReverse bool
	// initState: the statehost_init of one of its instances read or wrote a store or read
	// the stream time (InitUsesState).
	initState atomic.Bool
}

// InitUsesState reports whether the statehost_init of an instance of the module has read or
// written a store, or read the stream time: per-task work (store_info is not). Such an init
// must run for each task its instance serves, so a Pool then lends a task only an instance
// whose init ran for that task (a new one, or one made for it before), as the instances of
// ABI v1 did before they were pooled.
func (m *Module) InitUsesState() bool { return m.initState.Load() }

// InstancePerTask reports whether the module asks for an instance of its own for each task
// (it exports abi.ExportInstancePerTask): its instances must not serve more than one task,
// so a Pool for it must be the task's alone (NewPool with size 1). Without the marker, an
// instance may serve every task of its processor, one at a time.
func (m *Module) InstancePerTask() bool { return m.perTask }

// Name returns the name given to Compile (the file path for CompileFile).
func (m *Module) Name() string { return m.name }

// Hash returns the hex SHA-256 of the module's bytes: its version.
func (m *Module) Hash() string { return m.hash }

// Close releases the compiled code once no instance uses it.
func (m *Module) Close(ctx context.Context) error {
	if err := m.compiled.Close(ctx); err != nil {
		return fmt.Errorf("engine: close module %s: %w", m.name, err)
	}
	return nil
}

// CompileFile reads the module at path and compiles it with Compile, named by path.
func (e *Engine) CompileFile(ctx context.Context, path string) (*Module, error) {
	wasm, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("engine: read module: %w", err)
	}
	return e.Compile(ctx, path, wasm)
}

// Compile compiles a guest module and checks it against the ABI's module requirements:
// the version marker, the required exports and their signatures, the imports (only
// statehost and WASI functions that exist, with their signatures), and no start section.
// A module that fails a check is refused with a *ModuleError naming name and every problem.
// Compile runs no guest code.
//
// Compiling the same bytes again is cheap within a process (wazero shares the code) and
// across processes with Config.CacheDir.
func (e *Engine) Compile(ctx context.Context, name string, wasm []byte) (*Module, error) {
	if e.isClosed() {
		return nil, ErrClosed
	}
	sum := sha256.Sum256(wasm)
	checked, err := e.instrument(ctx, name, wasm)
	if err != nil {
		return nil, err
	}
	cm, err := e.rt.CompileModule(ctx, checked.Wasm)
	if err != nil {
		return nil, fmt.Errorf("engine: %s: compile: %w", name, err)
	}
	m := &Module{eng: e, name: name, hash: hex.EncodeToString(sum[:]), compiled: cm}
	problems := e.validate(cm)
	if checked.Start {
		// wazero runs a start function on every instantiation, without a way to turn it off
		// (WithStartFunctions only governs exported ones like _initialize): the link check
		// below would run guest code.
		problems = append(problems, "has a start section: a guest must not have one (run setup in _initialize or statehost_init)")
	}
	if len(problems) > 0 {
		_ = cm.Close(ctx)
		return nil, &ModuleError{Module: name, Problems: problems}
	}
	if err := e.linkCheck(ctx, cm); err != nil {
		_ = cm.Close(ctx)
		return nil, &ModuleError{Module: name, Problems: []string{"cannot be instantiated: " + err.Error()}}
	}
	_, m.hasInitialize = cm.ExportedFunctions()[abi.ExportInitialize]
	_, m.hasInit = cm.ExportedFunctions()[abi.ExportInit]
	_, m.hasPunctuate = cm.ExportedFunctions()[abi.ExportPunctuate]
	_, m.perTask = cm.ExportedFunctions()[abi.ExportInstancePerTask]
	_, m.hasStoreVersion = cm.ExportedFunctions()[abi.ExportStoreVersion]
	_, m.hasMigrate = cm.ExportedFunctions()[abi.ExportMigrate]
	_, m.hasStoreReversible = cm.ExportedFunctions()[abi.ExportStoreReversible]
	_, m.hasMigrateReverse = cm.ExportedFunctions()[abi.ExportMigrateReverse]
	e.log.Debug("compiled module", "module", name, "hash", m.hash[:12], "bytes", len(wasm))
	return m, nil
}

// linkCheck instantiates cm once without calling any export, so that problems wazero finds
// only at instantiation (imported tables or globals, a memory above the limit) show up at
// compile time. It runs no guest code: modules with a start section are refused first.
func (e *Engine) linkCheck(ctx context.Context, cm wazero.CompiledModule) error {
	probe, err := e.rt.InstantiateModule(ctx, cm, wazero.NewModuleConfig().WithName("").WithStartFunctions())
	if err != nil {
		return err
	}
	return probe.Close(context.WithoutCancel(ctx))
}

// validate returns every way in which cm breaks the ABI's module requirements.
func (e *Engine) validate(cm wazero.CompiledModule) []string {
	var problems []string
	exports := cm.ExportedFunctions()

	var versions []string
	for name := range exports {
		if strings.HasPrefix(name, abi.VersionExportPrefix) {
			versions = append(versions, name)
		}
	}
	slices.Sort(versions)
	switch {
	case len(versions) == 0:
		problems = append(problems, fmt.Sprintf("declares no ABI version: export %s is missing", abi.VersionExport))
	case len(versions) > 1:
		problems = append(problems, fmt.Sprintf("declares several ABI versions: %s", strings.Join(versions, ", ")))
	case versions[0] != abi.VersionExport:
		v := strings.TrimPrefix(versions[0], abi.VersionExportPrefix)
		if _, err := strconv.Atoi(v); err != nil {
			problems = append(problems, fmt.Sprintf("malformed ABI version marker %s", versions[0]))
		} else {
			problems = append(problems, fmt.Sprintf("declares ABI version %s, this host supports version %d", v, abi.Version))
		}
	}

	i32 := []api.ValueType{api.ValueTypeI32}
	for _, want := range []struct {
		name            string
		params, results []api.ValueType
		required        bool
	}{
		{abi.ExportProcessBatch, i32, i32, true},
		{abi.ExportInit, nil, i32, false},
		{abi.ExportInitialize, nil, nil, false},
		{abi.ExportPunctuate, []api.ValueType{api.ValueTypeI32, api.ValueTypeI64}, i32, false},
		{abi.VersionExport, nil, nil, false},
		{abi.ExportInstancePerTask, nil, nil, false},
		{abi.ExportStoreVersion, i32, i32, false},
		{abi.ExportMigrate, []api.ValueType{api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32}, i32, false},
		{abi.ExportStoreReversible, i32, i32, false},
		{abi.ExportMigrateReverse, []api.ValueType{api.ValueTypeI32, api.ValueTypeI32, api.ValueTypeI32}, i32, false},
	} {
		def, ok := exports[want.name]
		if !ok {
			if want.required {
				problems = append(problems, fmt.Sprintf("required export %s %s is missing", want.name, signature(want.params, want.results)))
			}
			continue
		}
		if !slices.Equal(def.ParamTypes(), want.params) || !slices.Equal(def.ResultTypes(), want.results) {
			problems = append(problems, fmt.Sprintf("export %s has signature %s, want %s", want.name,
				signature(def.ParamTypes(), def.ResultTypes()), signature(want.params, want.results)))
		}
	}
	if _, start := exports[abi.ExportCommandStart]; start {
		if _, init := exports[abi.ExportInitialize]; !init {
			problems = append(problems, fmt.Sprintf("is a WASI command (it exports %s and no %s), not a reactor: build it as a reactor, "+
				"Go with go build -buildmode=c-shared, C with clang -mexec-model=reactor (statehost build does both)",
				abi.ExportCommandStart, abi.ExportInitialize))
		}
	}
	if _, ok := cm.ExportedMemories()[abi.ExportMemory]; !ok {
		problems = append(problems, fmt.Sprintf("required export %q (the linear memory) is missing", abi.ExportMemory))
	}
	for _, mem := range cm.ImportedMemories() {
		mod, name, _ := mem.Import()
		problems = append(problems, fmt.Sprintf("imports memory %s.%s: a guest must define its own memory", mod, name))
	}

	for _, def := range cm.ImportedFunctions() {
		mod, name, _ := def.Import()
		if mod != abi.ModuleName && mod != abi.WASIModuleName {
			problems = append(problems, fmt.Sprintf("import %s.%s is not allowed: only %s and %s functions may be imported",
				mod, name, abi.ModuleName, abi.WASIModuleName))
			continue
		}
		host, ok := e.imports[mod+"\x00"+name]
		if !ok {
			problems = append(problems, fmt.Sprintf("imports %s.%s, which this host does not provide", mod, name))
			continue
		}
		if !slices.Equal(def.ParamTypes(), host.ParamTypes()) || !slices.Equal(def.ResultTypes(), host.ResultTypes()) {
			problems = append(problems, fmt.Sprintf("imports %s.%s with signature %s, want %s", mod, name,
				signature(def.ParamTypes(), def.ResultTypes()), signature(host.ParamTypes(), host.ResultTypes())))
		}
	}
	return problems
}

// signature formats a function type as "(i32, i32) -> i32".
func signature(params, results []api.ValueType) string {
	names := func(ts []api.ValueType) string {
		s := make([]string, len(ts))
		for i, t := range ts {
			s[i] = api.ValueTypeName(t)
		}
		return strings.Join(s, ", ")
	}
	return "(" + names(params) + ") -> (" + names(results) + ")"
}
