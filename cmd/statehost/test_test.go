package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/statehost/statehost/pluginsdk/wasmbuild"
)

// countFixture holds the input of count's contract and the outputs and final stores it must
// give, for every guest that implements the contract (count in Go, count_c in C, ...).
const countFixture = "testdata/test/count"

// countArgs returns the arguments of statehost test that run module as count's processor on
// the fixture's input, followed by more.
func countArgs(module string, more ...string) []string {
	return append([]string{"test", "--module", module, "--processor", "count", "--input", "words", "--output", "word-counts",
		"--store", "counts", "--partitions", "3", filepath.Join(countFixture, "input.jsonl")}, more...)
}

// checkCountFixture runs module, a guest of count's contract, through statehost test on the
// count fixture, and fails the test unless its outputs and final stores are the expected
// ones, exactly.
func checkCountFixture(t *testing.T, module string) {
	t.Helper()
	r := runCLI(t.Context(), "", countArgs(module, "--expect-outputs", filepath.Join(countFixture, "outputs.jsonl"),
		"--expect-stores", filepath.Join(countFixture, "stores.jsonl"))...)
	if r.code != exitOK || !strings.Contains(r.stdout, "ok: 16 outputs as in") || !strings.Contains(r.stdout, "ok: 10 store entries as in") {
		t.Fatalf("statehost test of %s on the count fixture: %v", module, r)
	}
}

// goModule builds the Go plugin package at dir (from the module root) to a module in a
// temporary directory of the test.
func goModule(t *testing.T, dir string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), filepath.Base(dir)+".wasm")
	if err := wasmbuild.Go(t.Context(), filepath.Join("..", "..", dir), out); err != nil {
		t.Fatal(err)
	}
	return out
}

// countCModule returns count_c's module: built from source when clang for wasm32-wasi is
// installed, else its checked-in build.
func countCModule(t *testing.T) string {
	t.Helper()
	if !wasmbuild.HaveClang() {
		return filepath.Join("..", "..", "plugins", "count_c", "testdata", "count_c.wasm")
	}
	out := filepath.Join(t.TempDir(), "count_c.wasm")
	if err := wasmbuild.C(t.Context(), filepath.Join("..", "..", "plugins", "count_c", "count_c.c"), out, filepath.Join("..", "..", "abi")); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTestCountInGoAndC runs count (Go) and count_c (C) through statehost test on the same
// input: both give the checked-in outputs and final stores, and print the same lines.
func TestTestCountInGoAndC(t *testing.T) {
	modules := map[string]string{"count": goModule(t, "plugins/count"), "count_c": countCModule(t)}
	printed := map[string]string{}
	for name, mod := range modules {
		checkCountFixture(t, mod)
		r := runCLI(t.Context(), "", countArgs(mod)...)
		if r.code != exitOK || strings.Count(r.stdout, "\n") != 26 {
			t.Fatalf("%s: %v\nwant 16 outputs and 10 store entries", name, r)
		}
		printed[name] = r.stdout
	}
	if printed["count"] != printed["count_c"] {
		t.Errorf("count and count_c printed different lines:\ncount:\n%s\ncount_c:\n%s", printed["count"], printed["count_c"])
	}
}

// TestTestMismatch checks that expected files that differ from the run fail it, exit 1, with
// a unified diff of each.
func TestTestMismatch(t *testing.T) {
	dir := t.TempDir()
	outs, err := os.ReadFile(filepath.Join(countFixture, "outputs.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	stores, err := os.ReadFile(filepath.Join(countFixture, "stores.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	// The third count of "the" said 4, and the store lost the entry of "dog".
	third := `"key":"the","value":"3","timestamp":1007}`
	if !strings.Contains(string(outs), third) {
		t.Fatalf("the fixture lacks %s", third)
	}
	outs = []byte(strings.Replace(string(outs), third, `"key":"the","value":"4","timestamp":1007}`, 1))
	dog := `{"store":"counts","partition":2,"key":"dog","value":"1"}` + "\n"
	if !strings.Contains(string(stores), dog) {
		t.Fatalf("the fixture lacks %s", dog)
	}
	stores = []byte(strings.Replace(string(stores), dog, "", 1))
	wantOuts, wantStores := filepath.Join(dir, "outputs.jsonl"), filepath.Join(dir, "stores.jsonl")
	if err := os.WriteFile(wantOuts, outs, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(wantStores, stores, 0o644); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t.Context(), "", countArgs(countCModule(t), "--expect-outputs", wantOuts, "--expect-stores", wantStores)...)
	want := []string{
		"--- " + wantOuts + " (expected)\n+++ outputs (actual)\n@@ -6,5 +6,5 @@\n",
		`-{"topic":"word-counts","partition":2,"key":"the","value":"4","timestamp":1007}` + "\n" +
			`+{"topic":"word-counts","partition":2,"key":"the","value":"3","timestamp":1007}` + "\n",
		"--- " + wantStores + " (expected)\n+++ stores (actual)\n@@ -7,3 +7,4 @@\n",
		"\n+" + dog,
	}
	if r.code != exitFailure || !strings.Contains(r.stderr, "differ from the expected ones") {
		t.Fatalf("statehost test with wrong expectations: %v\nwant exit 1", r)
	}
	for _, w := range want {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("the diff lacks %q:\n%s", w, r.stdout)
		}
	}
}

// TestTestWindowsAndTime runs windowcount, whose stream-time punctuation emits each window
// once it closes, through statehost test with a configuration: the stream time of each task
// moves with its records, and the checked-in outputs and stores come out.
func TestTestWindowsAndTime(t *testing.T) {
	dir := t.TempDir()
	fixture := filepath.Join("testdata", "test", "windowcount")
	app, err := os.ReadFile(filepath.Join(fixture, "app.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "app.hcl"), app, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(goModule(t, "plugins/windowcount"), filepath.Join(dir, "windowcount.wasm")); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t.Context(), "", "test", "--config", filepath.Join(dir, "app.hcl"), filepath.Join(fixture, "input.jsonl"),
		"--expect-outputs", filepath.Join(fixture, "outputs.jsonl"), "--expect-stores", filepath.Join(fixture, "stores.jsonl"))
	if r.code != exitOK || !strings.Contains(r.stdout, "ok: 2 outputs") || !strings.Contains(r.stdout, "ok: 2 store entries") {
		t.Fatalf("statehost test of windowcount: %v", r)
	}
}

// TestTestUpdate checks that --update writes expected files that the same run then passes.
func TestTestUpdate(t *testing.T) {
	dir := t.TempDir()
	outs, stores := filepath.Join(dir, "outputs.jsonl"), filepath.Join(dir, "stores.jsonl")
	mod := countCModule(t)
	r := runCLI(t.Context(), "", countArgs(mod, "--expect-outputs", outs, "--expect-stores", stores, "--update")...)
	if r.code != exitOK || !strings.Contains(r.stdout, "wrote "+outs+": 16 outputs") {
		t.Fatalf("statehost test --update: %v", r)
	}
	for _, name := range []string{"outputs.jsonl", "stores.jsonl"} {
		got, _ := os.ReadFile(filepath.Join(dir, name))
		want, _ := os.ReadFile(filepath.Join(countFixture, name))
		if string(got) != string(want) {
			t.Errorf("--update wrote %s:\n%s\nwant the fixture's:\n%s", name, got, want)
		}
	}
	if r := runCLI(t.Context(), "", countArgs(mod, "--expect-outputs", outs, "--expect-stores", stores)...); r.code != exitOK {
		t.Errorf("statehost test against what --update wrote: %v", r)
	}
}

// TestTestFailures checks the command lines statehost test refuses (exit 2) and the runs that
// fail (exit 1), each with a message that says where.
func TestTestFailures(t *testing.T) {
	mod := countCModule(t)
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	if err := os.WriteFile(bad, []byte("{\"key\":\"a\"}\n# fine so far\n{\"key\":\"a\",\"valu\":\"x\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args   []string
		stdin  string
		code   int
		stderr string
	}{
		{args: []string{"test", "--module", mod}, code: exitUsage, stderr: "--module needs at least one --input"},
		{args: []string{"test", "--module", mod, "--config", "c.hcl", "--input", "i"}, code: exitUsage, stderr: "--module and --config exclude each other"},
		{args: []string{"test", "--input", "i"}, code: exitUsage, stderr: "describe the processor of --module"},
		{args: []string{"test", "--module", mod, "--input", "i", "--update"}, code: exitUsage, stderr: "--update writes the files"},
		{args: []string{"test", "--module", mod, "--input", "i", "--wall-clock", "noon"}, code: exitUsage, stderr: "--wall-clock: want RFC 3339"},
		{args: []string{"test", "--module", mod, "--input", "i", "a", "b"}, code: exitUsage, stderr: "want at most one INPUT"},
		// A store attribute the configuration does not know is its diagnostic.
		{args: []string{"test", "--module", mod, "--input", "i", "--store", "counts:size=1"}, code: exitFailure, stderr: `An argument named "size" is not expected here`},
		{args: []string{"test", "--module", mod, "--input", "i", "--store", "counts", bad}, code: exitFailure, stderr: bad + `:3: unknown field valu`},
		// count_c emits to its first output: without one, the record fails, naming the input line.
		{args: []string{"test", "--module", mod, "--input", "i", "--store", "counts"}, stdin: `{"key":"a","value":"1"}`,
			code: exitFailure, stderr: `stdin:1: engine: processor \"count_c\" partition 0 offset 0`},
	} {
		r := runCLI(t.Context(), tc.stdin, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.stderr) {
			t.Errorf("statehost %q: %v\nwant exit %d and %q", tc.args, r, tc.code, tc.stderr)
		}
	}
}
