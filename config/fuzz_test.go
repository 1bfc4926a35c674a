package config_test

// FuzzParse feeds arbitrary bytes to Parse, the entry point of Load. Its seed corpus, under
// testdata/fuzz/FuzzParse/, holds ../config.hcl, the files of testdata/errors and broken
// variants of each; the plain `go test` runs them, and .ci/run fuzzes briefly:
//
//	go test -run '^$' -fuzz '^FuzzParse$' -fuzztime 60s ./config
//
// After adding files to testdata/errors, regenerate the seeds (crashers the fuzzer found and
// checked in are kept: the generator only writes files named seed-*):
//
//	go test ./config -run '^TestWriteFuzzSeeds$' -write-fuzz-seeds

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"

	"github.com/statehost/statehost/config"
)

// fuzzFile is the name Parse gets: beside testdata/errors/ok.wasm, so that module = "ok.wasm" is found.
var fuzzFile = filepath.Join("testdata", "errors", "fuzz.hcl")

// FuzzParse checks, for any input, that Parse does not panic; that it returns a Config
// unless it reports an error; that every diagnostic has a summary and a subject range in
// the input (a byte range inside it, whose line and column agree with the bytes before it),
// as do its context ranges; that WriteDiagnostics prints them all; that the same input gives
// the same diagnostics again; and that a Config returned without errors keeps the promises of
// the package documentation (names valid and unique, partitions >= 1, positive durations,
// modules set, inputs given).
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, src []byte) {
		c, diags := config.Parse(src, fuzzFile, config.Options{})
		if c == nil && !diags.HasErrors() {
			t.Fatalf("Parse returned no Config and no error; diagnostics: %v", diags)
		}
		for _, d := range diags {
			checkDiagnostic(t, src, d)
		}
		var files map[string]*hcl.File
		if c != nil {
			files = c.Files
		}
		var out bytes.Buffer
		if err := config.WriteDiagnostics(&out, files, diags); err != nil {
			t.Fatalf("WriteDiagnostics: %v", err)
		}
		for _, d := range diags {
			if !strings.Contains(out.String(), d.Summary) {
				t.Fatalf("WriteDiagnostics left out %q:\n%s", d.Summary, out.String())
			}
		}
		_, again := config.Parse(src, fuzzFile, config.Options{})
		if a, b := describeAll(diags), describeAll(again); a != b {
			t.Fatalf("the same input gave other diagnostics:\n%s\nthen\n%s", a, b)
		}
		if c != nil && !diags.HasErrors() {
			checkValidConfig(t, c)
		}
	})
}

// checkDiagnostic checks that d has a severity, a summary and a subject (and context) range
// that lies in src.
func checkDiagnostic(t *testing.T, src []byte, d *hcl.Diagnostic) {
	t.Helper()
	if d.Severity != hcl.DiagError && d.Severity != hcl.DiagWarning {
		t.Fatalf("diagnostic %q has severity %v", d.Summary, d.Severity)
	}
	if strings.TrimSpace(d.Summary) == "" {
		t.Fatalf("diagnostic without a summary: %+v", d)
	}
	if d.Subject == nil {
		t.Fatalf("diagnostic %q (%s) has no source range", d.Summary, d.Detail)
	}
	checkRange(t, src, "subject", d, *d.Subject)
	if d.Context != nil {
		checkRange(t, src, "context", d, *d.Context)
	}
}

// checkRange checks that r is a range of src in fuzzFile: its byte offsets in order and in
// the input, and (for UTF-8 input) its lines and columns those of its bytes. Lines count
// "\n"; columns count characters (HCL counts grapheme clusters, so a column may be less
// than the characters before it on the line, never more).
func checkRange(t *testing.T, src []byte, what string, d *hcl.Diagnostic, r hcl.Range) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("diagnostic %q (%s): %s range %s (bytes %d-%d) of an input of %d bytes: %s",
			d.Summary, d.Detail, what, r, r.Start.Byte, r.End.Byte, len(src), fmt.Sprintf(format, args...))
	}
	if r.Filename != fuzzFile {
		fail("file %q, want %q", r.Filename, fuzzFile)
	}
	if r.Start.Byte < 0 || r.Start.Byte > r.End.Byte || r.End.Byte > len(src) {
		fail("byte offsets out of order or outside the input")
	}
	if !utf8.Valid(src) {
		// HCL's scanner counts lines and columns oddly around bytes that are not UTF-8: it
		// reports "\xeb\n0" as 1:1-2 over bytes 0-3. The byte range is what matters.
		return
	}
	for _, p := range []hcl.Pos{r.Start, r.End} {
		before := src[:p.Byte]
		line := 1 + bytes.Count(before, []byte("\n"))
		lineStart := bytes.LastIndexByte(before, '\n') + 1
		chars := utf8.RuneCount(before[lineStart:])
		if p.Line != line {
			fail("position %d:%d at byte %d is on line %d", p.Line, p.Column, p.Byte, line)
		}
		if p.Column < 1 || p.Column > chars+1 {
			fail("position %d:%d at byte %d: column past the %d characters before it on its line", p.Line, p.Column, p.Byte, chars)
		}
	}
}

func describeAll(diags hcl.Diagnostics) string {
	var b strings.Builder
	for _, d := range diags {
		fmt.Fprintf(&b, "%s: %s: %s\n", describe(d), d.Summary, d.Detail)
	}
	return b.String()
}

// checkValidConfig checks a Config that Parse accepted against the package documentation.
func checkValidConfig(t *testing.T, c *config.Config) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("Parse accepted a Config that breaks its documentation: "+format, args...)
	}
	validName := func(s string, most int) bool {
		if s == "" || len(s) > most || s == "." || s == ".." {
			return false
		}
		for _, r := range s {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
				return false
			}
		}
		return true
	}
	if !validName(c.ApplicationID, 200) {
		fail("application_id %q", c.ApplicationID)
	}
	if c.Guarantee != config.AtLeastOnce && c.Guarantee != config.ExactlyOnce {
		fail("processing_guarantee %q", c.Guarantee)
	}
	if c.CommitInterval <= 0 || c.SessionTimeout <= 0 || c.StateCleanupDelay <= 0 || c.ProbingRebalanceInterval <= 0 {
		fail("durations commit_interval %v, session_timeout %v, state_cleanup_delay %v, probing_rebalance_interval %v",
			c.CommitInterval, c.SessionTimeout, c.StateCleanupDelay, c.ProbingRebalanceInterval)
	}
	if c.StandbyReplicas < 0 || c.AcceptableRecoveryLag < 0 {
		fail("standby_replicas %d, acceptable_recovery_lag %d", c.StandbyReplicas, c.AcceptableRecoveryLag)
	}
	if !filepath.IsAbs(c.StateDir) || !filepath.IsAbs(c.EmbeddedBroker.DataDir) {
		fail("state_dir %q and embedded_broker.data_dir %q are not absolute", c.StateDir, c.EmbeddedBroker.DataDir)
	}
	topics := map[string]bool{}
	for _, tp := range c.Topics {
		if !validName(tp.Name, 249) || tp.Partitions < 1 || topics[tp.Name] {
			fail("topic %q with %d partitions (duplicate: %v)", tp.Name, tp.Partitions, topics[tp.Name])
		}
		topics[tp.Name] = true
	}
	for _, rp := range c.Repartitions {
		if !validName(rp.Name, 249) || !validName(rp.Topic, 249) || rp.Partitions < 1 || topics[rp.Name] || topics[rp.Topic] {
			fail("repartition %q (%s) with %d partitions", rp.Name, rp.Topic, rp.Partitions)
		}
		topics[rp.Name] = true
	}
	processors, stores := map[string]bool{}, map[string]bool{}
	for _, p := range c.Processors {
		if !validName(p.Name, 200) || strings.HasPrefix(p.Name, ".") || processors[p.Name] {
			fail("processor name %q", p.Name)
		}
		processors[p.Name] = true
		if !filepath.IsAbs(p.Module) {
			fail("processor %q: module %q is not absolute", p.Name, p.Module)
		}
		if len(p.Inputs) == 0 || len(p.InputRanges) != len(p.Inputs) || len(p.OutputRanges) != len(p.Outputs) {
			fail("processor %q: %d inputs (%d ranges), %d outputs (%d ranges)", p.Name, len(p.Inputs), len(p.InputRanges), len(p.Outputs), len(p.OutputRanges))
		}
		seen := map[string]bool{}
		for _, in := range p.Inputs {
			if seen[in] || !validName(in, 249) {
				fail("processor %q: input %q", p.Name, in)
			}
			seen[in] = true
		}
		outs := map[string]bool{}
		for _, out := range p.Outputs {
			if seen[out] || outs[out] || !validName(out, 249) {
				fail("processor %q: output %q is an input, a duplicate or not a topic name", p.Name, out)
			}
			outs[out] = true
		}
		for _, s := range p.Stores {
			if !validName(s.Name, 249) || stores[s.Name] || !validName(c.ChangelogTopic(s.Name), 249) {
				fail("processor %q: store %q (changelog topic %q)", p.Name, s.Name, c.ChangelogTopic(s.Name))
			}
			stores[s.Name] = true
			if s.Backend != "pebble" && s.Backend != "memory" {
				fail("store %q: backend %q", s.Name, s.Backend)
			}
			switch s.Type {
			case config.StoreKeyValue:
				if s.WindowSize != 0 || s.Advance != 0 || s.Grace != 0 || s.Retention != 0 || s.InactivityGap != 0 {
					fail("key-value store %q with window durations %+v", s.Name, s)
				}
			case config.StoreWindow:
				if s.Coalesce || s.WindowSize <= 0 || s.Advance <= 0 || s.Advance > s.WindowSize || s.Grace < 0 ||
					s.Retention < s.WindowSize+s.Grace || s.InactivityGap != 0 || s.AdditionalRetention < 0 {
					fail("window store %q: %+v", s.Name, s)
				}
			case config.StoreSession:
				if s.Coalesce || s.InactivityGap <= 0 || s.Grace < 0 || s.Retention < s.InactivityGap+s.Grace ||
					s.WindowSize != 0 || s.Advance != 0 || s.AdditionalRetention < 0 {
					fail("session store %q: %+v", s.Name, s)
				}
			default:
				fail("store %q: type %q", s.Name, s.Type)
			}
		}
	}
}

var writeFuzzSeeds = flag.Bool("write-fuzz-seeds", false, "write the seed corpus of FuzzParse to testdata/fuzz/FuzzParse")

// TestWriteFuzzSeeds writes FuzzParse's seed corpus when -write-fuzz-seeds is given: each
// configuration file of the repository and broken variants of it, as files seed-*.
func TestWriteFuzzSeeds(t *testing.T) {
	if !*writeFuzzSeeds {
		t.Skip("a generator: run with -write-fuzz-seeds")
	}
	sources, err := filepath.Glob(filepath.Join("testdata", "errors", "*.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	sources = append([]string{filepath.Join("..", "config.hcl")}, sources...)
	dir := filepath.Join("testdata", "fuzz", "FuzzParse")
	old, _ := filepath.Glob(filepath.Join(dir, "seed-*"))
	for _, p := range old {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name string, src []byte) {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", src)
		if err := os.WriteFile(filepath.Join(dir, "seed-"+name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, path := range sources {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(filepath.Base(path), ".hcl")
		if path == sources[0] {
			name = "demo"
		}
		write(name, src)
		for variant, b := range brokenVariants(src) {
			// Every variant of the demo and of the cases of several blocks, three of the others.
			if name == "demo" || name == "many_errors" || name == "window_store" || fewVariants[variant] {
				write(name+"-"+variant, b)
			}
		}
	}
	for name, src := range extraSeeds {
		write(name, []byte(src))
	}
}

// fewVariants are the broken variants written for most configuration files.
var fewVariants = map[string]bool{"cut-half": true, "no-first-quote": true, "no-last-brace": true}

// brokenVariants returns broken forms of a configuration file, by name.
func brokenVariants(src []byte) map[string][]byte {
	s := string(src)
	out := map[string][]byte{
		"cut-third":    src[:len(src)/3],
		"cut-half":     src[:len(src)/2],
		"crlf":         []byte(strings.ReplaceAll(s, "\n", "\r\n")),
		"bom":          append([]byte("\uFEFF"), src...),
		"invalid-utf8": []byte(strings.Replace(s, "=", "= \xff\xfe", 1)),
		"nul":          []byte(strings.Replace(s, "\n", "\n\x00", 2)),
	}
	if i := strings.LastIndex(s, "}"); i >= 0 {
		out["no-last-brace"] = []byte(s[:i] + s[i+1:])
	}
	if i := strings.Index(s, "\""); i >= 0 {
		out["no-first-quote"] = []byte(s[:i] + s[i+1:])
	}
	if i := strings.Index(s, "\n"); i >= 0 {
		out["first-line-twice"] = []byte(s[:i+1] + s)
	}
	if i := strings.Index(s, "{"); i >= 0 {
		out["brace-doubled"] = []byte(s[:i] + "{" + s[i:])
	}
	return out
}

// extraSeeds are inputs that reach corners of HCL: templates, heredocs, numbers, nesting.
var extraSeeds = map[string]string{
	"empty":              "",
	"interpolation":      "application_id = \"a-${x}\"\nstate_dir = \"${\"",
	"template-directive": "application_id = \"%{ if true }a%{ endif }\"",
	"heredoc":            "application_id = <<EOT\nwordcount\nEOT\nstate_dir = <<-X\n  s\n",
	"numbers":            "application_id = \"a\"\ntopic \"t\" {\n  partitions = 1e400\n}\nrepartition \"r\" {\n  partitions = -0\n}\ntopic \"u\" {\n  partitions = 99999999999999999999\n}\n",
	"durations":          "application_id = \"a\"\ncommit_interval = \"-1s\"\nsession_timeout = \"9223372036854775807ns\"\nstate_cleanup_delay = \"1.5ms\"\n",
	"nested":             strings.Repeat("processor \"p\" {\n", 40) + strings.Repeat("}\n", 40),
	"unicode-names":      "application_id = \"wörd\"\nprocessor \"ä\" {\n  module = \"ok.wasm\"\n  inputs = [\"\u00e9\"]\n}\n",
	"functions":          "application_id = upper(\"a\")\nstate_dir = var.x\ncommit_interval = [for x in [1]: x]\n",
	"window-store": `application_id = "w"
topic "in" {
  partitions = 2
}
processor "p" {
  module = "ok.wasm"
  inputs = ["in"]
  store "w" {
    type        = "window"
    window_size = "1m"
    advance     = "30s"
    grace       = "2562047h"
    retention   = "2562047h"
  }
  store "s" {
    type           = "session"
    inactivity_gap = "1ns"
  }
}
`,
}
