package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// TestModuleHashAndCache checks the content hash and that a second engine on the same
// compilation cache directory compiles a Go module from the cache.
func TestModuleHashAndCache(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	compileTimed := func() (*Module, time.Duration) {
		e, _ := testEngine(t, Config{CacheDir: dir})
		start := time.Now()
		m := compile(t, e, "count")
		return m, time.Since(start)
	}
	m1, cold := compileTimed()
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		t.Fatalf("compilation cache %s is empty after a compile (err %v)", dir, err)
	}
	m2, warm := compileTimed()
	t.Logf("compile of count: %v without the cache, %v from it", cold, warm)
	if m1.Hash() != m2.Hash() || len(m1.Hash()) != 64 {
		t.Fatalf("hashes %q and %q: want the same SHA-256", m1.Hash(), m2.Hash())
	}
	e, _ := testEngine(t, Config{})
	other := compile(t, e, "tokenize")
	if other.Hash() == m1.Hash() {
		t.Fatalf("tokenize and count have the same hash")
	}
	if err := other.Close(ctx); err != nil {
		t.Fatal(err)
	}
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
