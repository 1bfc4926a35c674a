package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// syncBuffer is a bytes.Buffer that commands and the test may use at once.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// result is what a command run in-process printed and returned.
type result struct {
	code           int
	stdout, stderr string
}

// runCLI runs the command line args in-process with stdin and returns what it printed.
func runCLI(ctx context.Context, stdin string, args ...string) result {
	var stdout, stderr syncBuffer
	code := run(ctx, &cliEnv{Stdout: &stdout, Stderr: &stderr, Stdin: strings.NewReader(stdin)}, args)
	return result{code, stdout.String(), stderr.String()}
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

func TestUsage(t *testing.T) {
	ctx := t.Context()
	for _, tc := range []struct {
		args     []string
		code     int
		stdout   string // substrings expected
		stderr   string
		noStdout bool
		noStderr bool
	}{
		{args: nil, code: 2, stderr: "Usage: statehost", noStdout: true},
		{args: []string{"help"}, code: 0, stdout: "Usage: statehost", noStderr: true},
		{args: []string{"-h"}, code: 0, stdout: "statehost consume"},
		{args: []string{"--help"}, code: 0, stdout: "statehost build DIR"},
		{args: []string{"help", "produce"}, code: 0, stdout: "--key-separator SEP"},
		{args: []string{"help", "run"}, code: 0, stdout: "statehost run [--config FILE]"},
		{args: []string{"help", "nope"}, code: 2, stderr: `unknown command "nope"`},
		{args: []string{"frobnicate"}, code: 2, stderr: `unknown command "frobnicate"`},
		{args: []string{"--bogus", "produce"}, code: 2, stderr: "unknown flag --bogus"},
		{args: []string{"--log-level", "loud", "help"}, code: 2, stderr: `--log-level "loud"`},
		{args: []string{"help", "--log-level"}, code: 2, stderr: "--log-level needs a value"},
		{args: []string{"produce"}, code: 2, stderr: "want one TOPIC, got 0 arguments"},
		{args: []string{"produce", "a", "b"}, code: 2, stderr: "want one TOPIC, got 2 arguments"},
		{args: []string{"produce", "--bogus", "t"}, code: 2, stderr: "flag provided but not defined: -bogus"},
		{args: []string{"consume"}, code: 2, stderr: "Usage: statehost consume"},
		{args: []string{"consume", "--follow=maybe", "t"}, code: 2, stderr: "invalid boolean value"},
		{args: []string{"broker"}, code: 2, stderr: "--data-dir is required"},
		{args: []string{"broker", "--data-dir", "d", "extra"}, code: 2, stderr: "unexpected arguments"},
		{args: []string{"build"}, code: 2, stderr: "want one DIR"},
		{args: []string{"build", "-h"}, code: 0, stderr: "-o FILE"},
	} {
		r := runCLI(ctx, "", tc.args...)
		if r.code != tc.code || !strings.Contains(r.stdout, tc.stdout) || !strings.Contains(r.stderr, tc.stderr) ||
			(tc.noStdout && r.stdout != "") || (tc.noStderr && r.stderr != "") {
			t.Errorf("statehost %q: got %v\nwant exit %d, stdout with %q, stderr with %q", tc.args, r, tc.code, tc.stdout, tc.stderr)
		}
	}
}

func TestUsageListsEveryCommandAndFlag(t *testing.T) {
	r := runCLI(t.Context(), "", "help")
	for _, want := range []string{
		"statehost run [--config FILE]", "statehost validate [--config FILE]",
		"statehost broker --data-dir DIR [--listen ADDR] [--sync-writes]",
		"statehost produce [--brokers ADDRS] [--config FILE] [--key-separator SEP] TOPIC",
		"statehost consume [--brokers ADDRS] [--config FILE] [--from-beginning=false] [--follow] [--separator SEP] [--read-committed] [--headers] TOPIC",
		"statehost build DIR [-o FILE]", "--log-level LEVEL", "--log-json",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("usage lacks %q:\n%s", want, r.stdout)
		}
	}
}

func TestParseGlobalFlags(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		rest  []string
		level hclog.Level
		json  bool
	}{
		{[]string{"produce", "t"}, []string{"produce", "t"}, hclog.Info, false},
		{[]string{"--log-json", "produce", "t"}, []string{"produce", "t"}, hclog.Info, true},
		{[]string{"produce", "-log-json", "t", "--log-level=debug"}, []string{"produce", "t"}, hclog.Debug, true},
		{[]string{"--log-level", "WARN", "consume", "--follow", "t"}, []string{"consume", "--follow", "t"}, hclog.Warn, false},
		{[]string{"produce", "--log-json=false", "t"}, []string{"produce", "t"}, hclog.Info, false},
		{[]string{"produce", "--", "--log-json"}, []string{"produce", "--", "--log-json"}, hclog.Info, false},
		{[]string{"produce", "log-json"}, []string{"produce", "log-json"}, hclog.Info, false},
	} {
		rest, g, err := parseGlobalFlags(tc.args)
		if err != nil || !slices.Equal(rest, tc.rest) || g.level != tc.level || g.json != tc.json {
			t.Errorf("parseGlobalFlags(%q) = %q, %+v, %v; want %q, level %v, json %v", tc.args, rest, g, err, tc.rest, tc.level, tc.json)
		}
	}
}

func TestParseFlagsInterspersed(t *testing.T) {
	for _, tc := range []struct {
		args []string
		pos  []string
		out  string
		v    bool
	}{
		{[]string{"DIR", "-o", "FILE"}, []string{"DIR"}, "FILE", false},
		{[]string{"--o=FILE", "DIR"}, []string{"DIR"}, "FILE", false},
		{[]string{"A", "-v", "B", "--o", "F", "C"}, []string{"A", "B", "C"}, "F", true},
		{[]string{"A", "--", "-v", "B"}, []string{"A", "-v", "B"}, "", false},
		{[]string{"-v", "--", "--o"}, []string{"--o"}, "", true},
		{nil, nil, "", false},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		out := fs.String("o", "", "")
		v := fs.Bool("v", false, "")
		pos, _, ok := parseFlags(fs, tc.args)
		if !ok || !slices.Equal(pos, tc.pos) || *out != tc.out || *v != tc.v {
			t.Errorf("parseFlags(%q) = %q (ok %v), o=%q v=%v; want %q, o=%q v=%v", tc.args, pos, ok, *out, *v, tc.pos, tc.out, tc.v)
		}
	}
}
