package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/statehost/statehost/config"
	"github.com/statehost/statehost/host/testdriver"
)

const testSynopsis = "[--config FILE | --module FILE.wasm --input TOPIC...] [--processor NAME]... [--expect-outputs FILE] [--expect-stores FILE] [--update] [INPUT]"

const testUsage = `Runs processors on the records of INPUT (JSON lines; standard input when INPUT is
absent or "-") in the real wasm engine, against memory stores, without Kafka, and prints
what they produced and what their stores hold at the end (JSON lines: the outputs, then the
store entries); or checks them against expected files, exiting 1 with a diff when they
differ. Plugins in any guest language are tested this way.

The processors are those of --config (all of them, or those named by --processor), or one
given by --module with its topics and stores. A store SPEC is a name, or a name and a store
block's attributes: "counts", "windows:type=window,window_size=1m,grace=10s".

An input line is a record or a step of the wall clock:
  {"topic":"words","key":"the","value":"1","timestamp":1000,"headers":[{"key":"h","value":"v"}]}
  {"advance_wall_clock":"10s"}
Keys and values are JSON strings when UTF-8, else base64 in "key_base64"/"value_base64";
null or absent is null. "topic" may be left out when the processors read one input topic;
"partition" (default: the key's, murmur2 as Kafka's producer; 0 without a key) and
"timestamp" (Unix ms or RFC 3339; default the wall clock) are optional. An output line:
  {"topic":"word-counts","partition":1,"key":"the","value":"2","timestamp":1000}
A store line (windowed stores add "start" and "end"):
  {"store":"counts","partition":0,"key":"the","value":"2"}
Lines starting with '#' and blank lines are skipped. Outputs are compared in order, store
entries by store, partition and key. --update writes the expected files instead. A plugin
failure stops the run with the input line's position, unless the processor's on_error
skips or dead-letters the record. Details: host/testdriver/doc.go.
`

// testOptions are the flags and argument of statehost test.
type testOptions struct {
	config, module string
	processors     []string
	inputs         []string
	outputs        []string
	stores         []string
	onError        string
	partitions     int
	wallClock      string
	expectOutputs  string
	expectStores   string
	update         bool
	input          string // "" or "-": standard input
}

func testCmd(ctx context.Context, env *cliEnv, args []string) int {
	fs := newFlagSet(env, "test", testSynopsis, testUsage)
	var o testOptions
	fs.StringVar(&o.config, "config", "", "the application's configuration `FILE` (default config.hcl, unless --module)")
	fs.Func("processor", "run the processor `NAME` of --config (repeatable; default all); with --module, its name (default the module's base name)",
		func(s string) error { o.processors = append(o.processors, s); return nil })
	fs.StringVar(&o.module, "module", "", "run one processor, this module `FILE.wasm`, instead of --config's")
	fs.Func("input", "--module: an input `TOPIC` (repeatable; at least one)", func(s string) error { o.inputs = append(o.inputs, s); return nil })
	fs.Func("output", "--module: an output `TOPIC` (repeatable)", func(s string) error { o.outputs = append(o.outputs, s); return nil })
	fs.Func("store", "--module: a store, `SPEC` NAME[:ATTR=VALUE,...] (repeatable)", func(s string) error { o.stores = append(o.stores, s); return nil })
	fs.StringVar(&o.onError, "on-error", "", "--module: the processor's on_error `POLICY`: fail, skip or dead_letter (default fail)")
	fs.IntVar(&o.partitions, "partitions", 1, "the partition count `N` of each input topic the configuration does not declare")
	fs.StringVar(&o.wallClock, "wall-clock", "", "the wall clock's start `TIME`, RFC 3339 or Unix ms (default 1970-01-01T00:00:00Z)")
	fs.StringVar(&o.expectOutputs, "expect-outputs", "", "check the outputs against this `FILE` instead of printing them")
	fs.StringVar(&o.expectStores, "expect-stores", "", "check the final store entries against this `FILE` instead of printing them")
	fs.BoolVar(&o.update, "update", false, "write the outputs and store entries to the --expect-* files instead of checking them")
	pos, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	switch {
	case len(pos) > 1:
		return usageError(fs, "want at most one INPUT, got %d arguments", len(pos))
	case o.module != "" && o.config != "":
		return usageError(fs, "--module and --config exclude each other")
	case o.module == "" && (len(o.inputs)+len(o.outputs)+len(o.stores) > 0 || o.onError != ""):
		return usageError(fs, "--input, --output, --store and --on-error describe the processor of --module")
	case o.module != "" && len(o.inputs) == 0:
		return usageError(fs, "--module needs at least one --input")
	case o.module != "" && len(o.processors) > 1:
		return usageError(fs, "--module runs one processor: give --processor once")
	case o.partitions < 1:
		return usageError(fs, "--partitions %d: want at least 1", o.partitions)
	case o.update && o.expectOutputs == "" && o.expectStores == "":
		return usageError(fs, "--update writes the files of --expect-outputs and --expect-stores: give one")
	}
	if len(pos) == 1 {
		o.input = pos[0]
	}
	wall, err := parseWallClock(o.wallClock)
	if err != nil {
		return usageError(fs, "--wall-clock: %v", err)
	}
	log := env.Logger.Named("test")
	cfg, procs, ok := testConfig(env, &o)
	if !ok {
		return exitFailure
	}
	ins, err := readTestInput(env, o.input)
	if err != nil {
		return failed(log, "cannot read the input", err)
	}
	d, err := testdriver.New(ctx, testdriver.Options{Config: cfg, Processors: procs, Partitions: int32(o.partitions),
		WallClock: wall, Logger: env.Logger})
	if err != nil {
		return failed(log, "cannot start the processors", err)
	}
	defer d.Close(context.WithoutCancel(ctx))
	for _, in := range ins {
		if err := d.Pipe(ctx, in); err != nil {
			return failed(log, "the run stopped", err)
		}
	}
	stores, err := d.Stores()
	if err != nil {
		return failed(log, "cannot read the stores", err)
	}
	return reportTest(env, d, &o, d.Outputs(), stores)
}

// parseWallClock reads --wall-clock: RFC 3339, or Unix milliseconds; zero when s is empty.
func parseWallClock(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, errors.New("want RFC 3339 (2026-12-05T10:00:00Z) or Unix milliseconds")
	}
	return t, nil
}

// readTestInput reads the input lines of the file path, or of standard input.
func readTestInput(env *cliEnv, path string) ([]testdriver.Input, error) {
	if path == "" || path == "-" {
		return testdriver.ReadInputs(env.Stdin, "stdin")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return testdriver.ReadInputs(f, path)
}

// testConfig returns the configuration to run and the processors of it to run: --config's,
// or one made of the --module flags. ok is false when it has errors, which it printed.
func testConfig(env *cliEnv, o *testOptions) (cfg *config.Config, procs []string, ok bool) {
	if o.module == "" {
		path := o.config
		if path == "" {
			path = "config.hcl"
		}
		cfg, ok := loadConfig(env, path, config.Options{})
		return cfg, o.processors, ok
	}
	src, err := moduleConfig(o)
	if err != nil {
		fmt.Fprintf(env.Stderr, "statehost test: %v\n", err)
		return nil, nil, false
	}
	cfg, diags := config.Parse([]byte(src), "(flags of statehost test).hcl", config.Options{})
	if cfg == nil {
		_ = config.WriteDiagnostics(env.Stderr, map[string]*hcl.File{}, diags)
		return nil, nil, false
	}
	_ = config.WriteDiagnostics(env.Stderr, cfg.Files, diags)
	return cfg, nil, !diags.HasErrors()
}

// moduleConfig returns the configuration of the --module flags: an application "test" with
// one processor.
func moduleConfig(o *testOptions) (string, error) {
	module, err := filepath.Abs(o.module)
	if err != nil {
		return "", fmt.Errorf("--module %s: %w", o.module, err)
	}
	name := strings.TrimSuffix(filepath.Base(module), filepath.Ext(module))
	if len(o.processors) == 1 {
		name = o.processors[0]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "application_id = \"test\"\nstate_dir = %s\nadmin {\n  listen = \"\"\n}\n", hclString(os.TempDir()))
	fmt.Fprintf(&b, "processor %s {\n  module = %s\n  inputs = [%s]\n  outputs = [%s]\n",
		hclString(name), hclString(module), hclList(o.inputs), hclList(o.outputs))
	if o.onError != "" {
		fmt.Fprintf(&b, "  on_error = %s\n", hclString(o.onError))
	}
	for _, spec := range o.stores {
		name, attrs, _ := strings.Cut(spec, ":")
		fmt.Fprintf(&b, "  store %s {\n", hclString(name))
		for attr := range strings.SplitSeq(attrs, ",") {
			if attr == "" {
				continue
			}
			k, v, ok := strings.Cut(attr, "=")
			if !ok || !hclName(k) {
				return "", fmt.Errorf("--store %s: %q is not ATTR=VALUE", spec, attr)
			}
			fmt.Fprintf(&b, "    %s = %s\n", k, hclString(v))
		}
		b.WriteString("  }\n")
	}
	b.WriteString("}\n")
	return b.String(), nil
}

// hclString returns s as an HCL string literal, with its template sequences escaped.
func hclString(s string) string {
	s = strings.NewReplacer("${", "$${", "%{", "%%{").Replace(s)
	return strconv.Quote(s)
}

// hclList returns the HCL string literals of ss, separated by commas.
func hclList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = hclString(s)
	}
	return strings.Join(q, ", ")
}

// hclName reports whether s is an attribute name: letters, digits and underscores.
func hclName(s string) bool {
	for _, r := range s {
		if r != '_' && (r < 'a' || r > 'z') && (r < 'A' || r > 'Z') && (r < '0' || r > '9') {
			return false
		}
	}
	return s != ""
}

// reportTest prints the outputs and store entries, or checks them against the expected files
// (or writes those, with --update), and returns the exit code.
func reportTest(env *cliEnv, d *testdriver.Driver, o *testOptions, outs []testdriver.Output, stores []testdriver.StoreEntry) int {
	got := map[string][]string{"outputs": outputLines(outs), "stores": storeLines(stores)}
	noun := map[string]string{"outputs": "outputs", "stores": "store entries"}
	if o.expectOutputs == "" && o.expectStores == "" {
		for _, kind := range []string{"outputs", "stores"} {
			for _, l := range got[kind] {
				fmt.Fprintln(env.Stdout, l)
			}
		}
		return exitOK
	}
	log := env.Logger.Named("test")
	code := exitOK
	for _, c := range []struct{ kind, file string }{{"outputs", o.expectOutputs}, {"stores", o.expectStores}} {
		if c.file == "" {
			continue
		}
		if o.update {
			if err := writeLines(c.file, got[c.kind]); err != nil {
				return failed(log, "cannot write the expected "+noun[c.kind], err)
			}
			fmt.Fprintf(env.Stdout, "wrote %s: %d %s\n", c.file, len(got[c.kind]), noun[c.kind])
			continue
		}
		want, err := expectedLines(d, c.kind, c.file)
		if err != nil {
			return failed(log, "cannot read the expected "+noun[c.kind], err)
		}
		if diff := testdriver.Diff(c.file+" (expected)", c.kind+" (actual)", want, got[c.kind]); diff != "" {
			log.Error("the "+noun[c.kind]+" differ from the expected ones", "file", c.file)
			fmt.Fprint(env.Stdout, diff)
			code = exitFailure
			continue
		}
		fmt.Fprintf(env.Stdout, "ok: %d %s as in %s\n", len(want), noun[c.kind], c.file)
	}
	return code
}

// expectedLines reads the expected file of kind ("outputs" or "stores") and returns its
// lines as the driver writes them, store entries in the driver's order.
func expectedLines(d *testdriver.Driver, kind, path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if kind == "outputs" {
		outs, err := testdriver.ReadOutputs(f, path)
		return outputLines(outs), err
	}
	entries, err := testdriver.ReadStoreEntries(f, path)
	d.SortStoreEntries(entries)
	return storeLines(entries), err
}

func outputLines(outs []testdriver.Output) []string {
	lines := make([]string, len(outs))
	for i, o := range outs {
		lines[i] = string(o.AppendJSON(nil))
	}
	return lines
}

func storeLines(entries []testdriver.StoreEntry) []string {
	lines := make([]string, len(entries))
	for i, e := range entries {
		lines[i] = string(e.AppendJSON(nil))
	}
	return lines
}

// writeLines writes lines to the file path, each with a newline.
func writeLines(path string, lines []string) error {
	var b bytes.Buffer
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}
