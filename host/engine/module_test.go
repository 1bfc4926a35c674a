package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/statehost/statehost/host/engine/internal/loopcheck"
	"github.com/statehost/statehost/pluginsdk/wasmbuild"
)

// TestModuleRefused loads modules that break the module requirements and checks that each
// is refused with a *ModuleError that names the file and every problem.
func TestModuleRefused(t *testing.T) {
	e, _ := testEngine(t, Config{})
	for _, tc := range []struct {
		guest string
		want  []string
	}{
		{"version2", []string{"declares ABI version 2, this host supports version 1"}},
		{"noversion", []string{"declares no ABI version: export statehost_abi_version_1 is missing"}},
		{"noexport", []string{"required export statehost_process_batch (i32) -> (i32) is missing"}},
		{"badsig", []string{"export statehost_process_batch has signature (i64) -> (i64), want (i32) -> (i32)"}},
		{"badimport", []string{
			"import env.getenv_raw is not allowed",
			"imports statehost.state_get with signature (i32) -> (i32), want (i32, i32, i32, i32, i32) -> (i32)",
			"imports statehost.state_frobnicate, which this host does not provide",
		}},
	} {
		t.Run(tc.guest, func(t *testing.T) {
			path := guestPaths[tc.guest]
			_, err := e.CompileFile(context.Background(), path)
			var me *ModuleError
			if !errors.As(err, &me) || !errors.Is(err, ErrInvalidModule) {
				t.Fatalf("CompileFile(%s) = %v, want a *ModuleError", tc.guest, err)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file %s", err, path)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if len(me.Problems) != len(tc.want) {
				t.Errorf("problems = %q, want %d", me.Problems, len(tc.want))
			}
		})
	}
	t.Run("not wasm", func(t *testing.T) {
		_, err := e.Compile(context.Background(), "junk.wasm", []byte("not a module"))
		if err == nil || !strings.Contains(err.Error(), "junk.wasm") {
			t.Fatalf("Compile(junk) = %v, want an error naming junk.wasm", err)
		}
	})
}

// TestCommandModuleRefused: the Go probe built as a WASI command (go build without
// -buildmode=c-shared: it exports _start, and no _initialize) is refused with one problem,
// which says to build a reactor; the same package built as a reactor loads.
func TestCommandModuleRefused(t *testing.T) {
	e, _ := testEngine(t, Config{})
	out := filepath.Join(t.TempDir(), "command.wasm")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", out, ".")
	cmd.Dir = filepath.Join(moduleRoot, goGuests["goprobe"])
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	_, err := e.CompileFile(t.Context(), out)
	var me *ModuleError
	if !errors.As(err, &me) || !strings.Contains(err.Error(), out) {
		t.Fatalf("CompileFile(command) = %v, want a *ModuleError naming %s", err, out)
	}
	if len(me.Problems) != 1 || !strings.Contains(me.Problems[0], "exports _start and no _initialize") ||
		!strings.Contains(me.Problems[0], "build it as a reactor") || !strings.Contains(me.Problems[0], "-buildmode=c-shared") {
		t.Errorf("problems = %q, want one that says to build a reactor", me.Problems)
	}
	if _, err := e.CompileFile(t.Context(), guestPaths["goprobe"]); err != nil {
		t.Errorf("the reactor build of the same package: %v", err)
	}
}

// TestModuleHashAndCache checks the content hash, and that a second engine on the same
// compilation cache directory takes a module from the cache: wazero writes a cache entry
// for every module it compiles that is not in the cache (a new file), so a second compile
// of the same module that writes nothing while one of a new module does write shows the
// hit. C modules keep it fast; the cache does not care about the language.
func TestModuleHashAndCache(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	m1 := compile(t, mustEngine(t, dir), "count_c")
	before := cacheFiles(t, dir)
	if len(before) == 0 {
		t.Fatalf("compilation cache %s is empty after a compile", dir)
	}

	e2 := mustEngine(t, dir) // a new runtime: nothing compiled in memory
	m2 := compile(t, e2, "count_c")
	if after := cacheFiles(t, dir); !maps.Equal(before, after) {
		t.Fatalf("compiling count_c again on the same cache changed it:\nbefore %v\nafter  %v", before, after)
	}
	if m1.Hash() != m2.Hash() || len(m1.Hash()) != 64 {
		t.Fatalf("hashes %q and %q: want the same SHA-256", m1.Hash(), m2.Hash())
	}
	// The second engine does use the cache: a module it has not seen is written to it.
	other := compile(t, e2, "probe")
	if after := cacheFiles(t, dir); len(after) != len(before)+1 {
		t.Fatalf("compiling probe added %d cache files, want 1", len(after)-len(before))
	}
	if other.Hash() == m1.Hash() {
		t.Fatalf("probe and count_c have the same hash")
	}
	if err := other.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// mustEngine returns an engine on the compilation cache dir.
func mustEngine(t *testing.T, dir string) *Engine {
	e, _ := testEngine(t, Config{CacheDir: dir})
	return e
}

// cacheFiles returns the files under dir, by path, with their size and modification time.
func cacheFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		files[path] = fmt.Sprintf("%d bytes %s", info.Size(), info.ModTime().Format(time.RFC3339Nano))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestStartSection checks that a module with a start section is refused at once, without
// running it: wazero runs a start function on every instantiation, and this one loops
// forever. The module is assembled here (see startModule); without its start section the
// same module compiles, so the start section is what is refused.
func TestStartSection(t *testing.T) {
	e, _ := testEngine(t, Config{BatchTimeout: time.Minute})
	ctx := context.Background()
	if _, err := e.Compile(ctx, "nostart.wasm", startModule(false)); err != nil {
		t.Fatalf("the module without its start section: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := e.Compile(ctx, "start.wasm", startModule(true))
		done <- err
	}()
	select {
	case err := <-done:
		var me *ModuleError
		if !errors.As(err, &me) || !strings.Contains(err.Error(), "start.wasm") || !strings.Contains(err.Error(), "has a start section") {
			t.Fatalf("Compile = %v, want a *ModuleError naming start.wasm and its start section", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Compile of a module whose start function loops has not returned after 10 s")
	}
	hasStart := func(wasm []byte) bool {
		t.Helper()
		res, err := loopcheck.Instrument(wasm, interruptExport)
		if err != nil {
			t.Fatal(err)
		}
		return res.Start
	}
	if hasStart(startModule(false)) || !hasStart(startModule(true)) {
		t.Errorf("the start section of the assembled module is not told right")
	}
	for _, name := range []string{"probe", "count", "count_c"} {
		wasm, err := os.ReadFile(guestPaths[name])
		if err != nil {
			t.Fatal(err)
		}
		if hasStart(wasm) {
			t.Errorf("%s has a start section, says loopcheck", name)
		}
	}
}

// startModule assembles a minimal guest that meets the module requirements, with, when
// start is set, a start section naming a function that loops forever:
//
//	(module
//	  (type $v (func))                       ;; type 0: () -> ()
//	  (type $b (func (param i32) (result i32)))  ;; type 1
//	  (func $spin (type $v) (loop $l (br $l)))   ;; func 0
//	  (func $batch (type $b) (i32.const 0))      ;; func 1
//	  (func $version (type $v))                  ;; func 2
//	  (memory 1)
//	  (export "memory" (memory 0))
//	  (export "statehost_process_batch" (func $batch))
//	  (export "statehost_abi_version_1" (func $version))
//	  (start $spin))
func startModule(start bool) []byte {
	section := func(id byte, payload ...byte) []byte {
		return append([]byte{id, byte(len(payload))}, payload...) // sizes < 128: one LEB128 byte
	}
	name := func(s string) []byte { return append([]byte{byte(len(s))}, s...) }
	const funcType, i32, exportFunc, exportMemory = 0x60, 0x7f, 0x00, 0x02
	const opLoop, opBr, opEnd, opI32Const, blockEmpty = 0x03, 0x0c, 0x0b, 0x41, 0x40

	m := []byte{0x00, 'a', 's', 'm', 0x01, 0x00, 0x00, 0x00} // magic, version 1

	types := []byte{2, // 2 types
		funcType, 0, 0, // () -> ()
		funcType, 1, i32, 1, i32, // (i32) -> (i32)
	}
	m = append(m, section(1, types...)...)
	m = append(m, section(3, 3, 0, 1, 0)...) // function section: 3 functions of types 0, 1, 0
	m = append(m, section(5, 1, 0x00, 1)...) // memory section: 1 memory, min 1 page, no max
	exports := []byte{3}
	exports = append(append(exports, name("memory")...), exportMemory, 0)
	exports = append(append(exports, name("statehost_process_batch")...), exportFunc, 1)
	exports = append(append(exports, name("statehost_abi_version_1")...), exportFunc, 2)
	m = append(m, section(7, exports...)...)
	if start {
		m = append(m, section(8, 0)...) // start section: function 0
	}
	code := []byte{3, // 3 bodies: size, 0 local declarations, instructions
		7, 0, opLoop, blockEmpty, opBr, 0, opEnd, opEnd, // func 0: loop br 0 end
		4, 0, opI32Const, 0, opEnd, // func 1: i32.const 0
		2, 0, opEnd, // func 2: nothing
	}
	m = append(m, section(10, code...)...)
	return m
}

// TestConfig checks defaults and refused settings.
func TestConfig(t *testing.T) {
	c, err := Config{}.withDefaults()
	if err != nil || c.MemoryLimit != 64<<20 || c.BatchTimeout != 10*time.Second || c.Logger == nil {
		t.Fatalf("defaults = %+v, %v", c, err)
	}
	if c.memoryLimitPages() != 1024 {
		t.Errorf("64 MiB = %d pages, want 1024", c.memoryLimitPages())
	}
	if _, err := (Config{MemoryLimit: 5 << 30}).withDefaults(); err == nil {
		t.Errorf("MemoryLimit 5 GiB accepted")
	}
	if _, err := New(context.Background(), Config{MemoryLimit: 1}); err == nil {
		t.Errorf("New accepted MemoryLimit 1")
	}
}

// TestCPrebuiltsCurrent checks that the checked-in C guest builds match their sources (only
// where clang is present): run go test ./host/engine -run TestCPrebuiltsCurrent -rewrite
// after changing a C guest.
func TestCPrebuiltsCurrent(t *testing.T) {
	if !builtC {
		t.Skip("clang for wasm32-wasi not found")
	}
	for name, c := range cGuests {
		fresh, err := os.ReadFile(guestPaths[name])
		if err != nil {
			t.Fatal(err)
		}
		old, err := os.ReadFile(filepath.Join(moduleRoot, c[1]))
		if err != nil {
			t.Fatal(err)
		}
		if string(fresh) != string(old) {
			t.Errorf("%s is stale: rebuild with: clang %s (or run this test with -rewrite)",
				c[1], strings.Join(wasmbuild.ClangArgs(c[0], c[1], "abi"), " "))
		}
	}
}

// TestInstancePerTaskMarker: a module that exports abi.ExportInstancePerTask (a Go plugin
// that imports pluginsdk/pertask) says so; one that does not may share its instances.
func TestInstancePerTaskMarker(t *testing.T) {
	e, _ := testEngine(t, Config{})
	if !compile(t, e, "gopertask").InstancePerTask() {
		t.Error("gopertask: InstancePerTask is false")
	}
	for _, name := range []string{"count", "count_c"} {
		if compile(t, e, name).InstancePerTask() {
			t.Errorf("%s: InstancePerTask is true", name)
		}
	}
}

// TestCHeaderPedantic: a C guest that declares its ABI version and asks for an instance per
// task as abi/statehost.h says (STATEHOST_DECLARE_ABI_VERSION; and
// STATEHOST_DECLARE_INSTANCE_PER_TASK;, at file scope) compiles without a warning under
// -std=c11 -Wall -Wextra -pedantic -Werror, and so does every C guest of the repository; the
// module it makes loads, and asks for an instance per task.
func TestCHeaderPedantic(t *testing.T) {
	if !builtC {
		t.Skip("clang for wasm32-wasi not found")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "guest.c")
	guest := `#include <stdint.h>
#include "statehost.h"

STATEHOST_DECLARE_ABI_VERSION;
STATEHOST_DECLARE_INSTANCE_PER_TASK;

SH_EXPORT("statehost_process_batch") int32_t process_batch(int32_t n) { return n < 0; }
`
	if err := os.WriteFile(src, []byte(guest), 0o644); err != nil {
		t.Fatal(err)
	}
	strict := []string{"-std=c11", "-Wall", "-Wextra", "-pedantic", "-Werror"}
	build := func(src, out string) {
		t.Helper()
		args := append(strict, wasmbuild.ClangArgs(src, out, filepath.Join(moduleRoot, "abi"))...)
		if b, err := exec.CommandContext(t.Context(), "clang", args...).CombinedOutput(); err != nil {
			t.Errorf("clang %s: %v\n%s", strings.Join(args, " "), err, b)
		}
	}
	out := filepath.Join(dir, "guest.wasm")
	build(src, out)
	for name, c := range cGuests {
		build(filepath.Join(moduleRoot, c[0]), filepath.Join(dir, name+".wasm"))
	}
	if t.Failed() {
		return
	}
	e, _ := testEngine(t, Config{})
	m, err := e.CompileFile(t.Context(), out)
	if err != nil {
		t.Fatal(err)
	}
	if !m.InstancePerTask() {
		t.Error("the guest's module does not ask for an instance per task")
	}
}
