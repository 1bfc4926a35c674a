// Package astest builds the AssemblyScript guests (plugins/count_as, plugins/windowcount_as,
// the SDK's test guest) for the tests of other packages, once per test process, and skips the
// tests that need them where Node.js and npm are missing, saying what to install: Node stays
// optional for go test ./... .
package astest

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/statehost/statehost/pluginsdk/wasmbuild"
)

// Skip skips t, saying what to install, unless Node.js and npm are on PATH.
func Skip(t testing.TB) {
	t.Helper()
	if why := wasmbuild.MissingNode(); why != "" {
		t.Skipf("AssemblyScript guest: %s; .ci/run installs them", why)
	}
}

// build is one project's build, shared by the tests of a process.
type build struct {
	once sync.Once
	path string
	err  error
}

var (
	mu     sync.Mutex
	builds = map[string]*build{}
)

// Build builds the AssemblyScript project in dir (npm ci, then asc) into outDir/<base of
// dir>.wasm, once per process and project, and returns the module's path. It skips t (Skip)
// without Node.js, and fails it when the build fails.
func Build(t testing.TB, dir, outDir string) string {
	t.Helper()
	Skip(t)
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	b := builds[abs]
	if b == nil {
		b = &build{}
		builds[abs] = b
	}
	mu.Unlock()
	b.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		b.path = filepath.Join(outDir, filepath.Base(abs)+".wasm")
		b.err = wasmbuild.AssemblyScript(ctx, abs, b.path)
	})
	if b.err != nil {
		t.Fatalf("build %s: %v", dir, b.err)
	}
	return b.path
}
