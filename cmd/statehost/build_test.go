package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/statehost/statehost/internal/astest"
	"github.com/statehost/statehost/pluginsdk/wasmbuild"
)

const wasmMagic = "\x00asm"

func checkWasm(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b, []byte(wasmMagic)) {
		t.Errorf("%s does not start with the wasm magic: % x", path, b[:min(len(b), 8)])
	}
}

func TestBuildGo(t *testing.T) {
	out := filepath.Join(t.TempDir(), "tok.wasm")
	// The output flag after the directory.
	r := runCLI(t.Context(), "", "build", "../../plugins/tokenize", "-o", out)
	if r.code != 0 || r.stdout != "built "+out+"\n" {
		t.Fatalf("build: %v", r)
	}
	checkWasm(t, out)
}

func TestBuildDefaultOutput(t *testing.T) {
	// A module of its own with the smallest Go guest, so the default output lands in a
	// temporary directory.
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"go.mod":  "module tiny\n\ngo 1.26\n",
		"main.go": "package main\n\nfunc main() {}\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := runCLI(t.Context(), "", "build", dir)
	want := filepath.Join(dir, "tiny.wasm")
	if r.code != 0 || r.stdout != "built "+want+"\n" {
		t.Fatalf("build: %v", r)
	}
	checkWasm(t, want)
}

func TestBuildC(t *testing.T) {
	out := filepath.Join(t.TempDir(), "count_c.wasm")
	r := runCLI(t.Context(), "", "build", "--o", out, "../../plugins/count_c")
	if !wasmbuild.HaveClang() {
		if r.code != 1 || !strings.Contains(r.stderr, "needs clang") {
			t.Fatalf("build of a C plugin without clang: %v", r)
		}
		return
	}
	if r.code != 0 {
		t.Fatalf("build: %v", r)
	}
	checkWasm(t, out)
}

func TestBuildNothingToBuild(t *testing.T) {
	dir := t.TempDir()
	r := runCLI(t.Context(), "", "build", dir)
	if r.code != 1 || !strings.Contains(r.stderr, "no Go files and no "+filepath.Base(dir)+".c") {
		t.Errorf("build of an empty dir: %v", r)
	}
	r = runCLI(t.Context(), "", "build", filepath.Join(dir, "missing"))
	if r.code != 1 || !strings.Contains(r.stderr, "missing") {
		t.Errorf("build of a missing dir: %v", r)
	}
}

func TestBuildAssemblyScript(t *testing.T) {
	astest.Skip(t)
	out := filepath.Join(t.TempDir(), "count_as.wasm")
	r := runCLI(t.Context(), "", "build", "../../plugins/count_as", "-o", out)
	if r.code != 0 || r.stdout != "built "+out+"\n" {
		t.Fatalf("build: %v", r)
	}
	checkWasm(t, out)
}

// TestBuildAssemblyScriptWithoutNode checks that building an AssemblyScript project without
// Node.js names the project and what to install.
func TestBuildAssemblyScriptWithoutNode(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	r := runCLI(t.Context(), "", "build", "../../plugins/count_as")
	for _, want := range []string{"building AssemblyScript plugin ../../plugins/count_as", "Node.js", "npm", "install"} {
		if r.code != 1 || !strings.Contains(r.stderr, want) {
			t.Errorf("build without Node.js: %v\nwant exit 1 and %q", r, want)
		}
	}
}

// TestBuildAssemblyScriptNoLockfile checks that a project without package-lock.json, which npm
// ci needs, is refused with a sentence that says how to make one.
func TestBuildAssemblyScriptNoLockfile(t *testing.T) {
	astest.Skip(t)
	dir := t.TempDir()
	for _, name := range []string{"package.json", "asconfig.json"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("{}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := runCLI(t.Context(), "", "build", dir)
	if r.code != 1 || !strings.Contains(r.stderr, "has no package-lock.json: run npm install there once") {
		t.Errorf("build without a lockfile: %v", r)
	}
}
