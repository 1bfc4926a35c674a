package config_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/statehost/statehost/config"
)

// fullConfig is the example of the package documentation, with external brokers.
const fullConfig = `application_id       = "wordcount"
state_dir            = "state"
processing_guarantee = "at_least_once"
commit_interval      = "1s"

kafka {
  brokers = ["127.0.0.1:9092", "kafka-2:9093"]
}
embedded_broker {
  listen   = "127.0.0.1:19092"
  data_dir = "other/broker"
}
admin {
  listen = "127.0.0.1:9464"
}
topic "sentences" {
  partitions = 4
  config     = { "retention.ms" = "-1", "segment.bytes" = 1048576, "preallocate" = true }
}
repartition "words" {
  partitions = 3
}
processor "tokenize" {
  module  = "plugins/tokenize/tokenize.wasm"
  inputs  = ["sentences"]
  outputs = ["words"]
}
processor "count" {
  module  = "plugins/count/count.wasm"
  inputs  = ["words"]
  outputs = ["word-counts"]
  store "counts" {
    type     = "keyvalue"
    backend  = "pebble"
    coalesce = false
    logging {
      enabled      = true
      topic_config = { "min.compaction.lag.ms" = "0" }
    }
  }
  store "scratch" {
    backend  = "memory"
    coalesce = true
    logging {
      enabled = false
    }
  }
}
`

// writeModules creates empty module files under dir for each relative path.
func writeModules(t *testing.T, dir string, paths ...string) {
	t.Helper()
	for _, p := range paths {
		p = filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// writeConfig writes src as dir/app/statehost.hcl with the modules of fullConfig next to it.
func writeConfig(t *testing.T, src string) (dir, path string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "app")
	writeModules(t, dir, "plugins/tokenize/tokenize.wasm", "plugins/count/count.wasm")
	path = filepath.Join(dir, "statehost.hcl")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, path
}

func rng(file string, line, col, endLine, endCol int) hcl.Range {
	return hcl.Range{Filename: file, Start: hcl.Pos{Line: line, Column: col}, End: hcl.Pos{Line: endLine, Column: endCol}}
}

// sameRange compares ranges by line and column only (bytes are implied).
func sameRange(t *testing.T, what string, got, want hcl.Range) {
	t.Helper()
	if got.Filename != want.Filename || got.Start.Line != want.Start.Line || got.Start.Column != want.Start.Column ||
		got.End.Line != want.End.Line || got.End.Column != want.End.Column {
		t.Errorf("%s: range %s, want %s", what, got, want)
	}
}

func noDiagnostics(t *testing.T, files map[string]*hcl.File, diags hcl.Diagnostics) {
	t.Helper()
	if len(diags) > 0 {
		var buf bytes.Buffer
		_ = config.WriteDiagnostics(&buf, files, diags)
		t.Fatalf("unexpected diagnostics:\n%s", buf.String())
	}
}

func TestLoadFullConfig(t *testing.T) {
	dir, path := writeConfig(t, fullConfig)
	t.Chdir(t.TempDir()) // relative paths resolve against the config file, not the cwd

	var checked []string
	c, diags := config.Load(path, config.Options{CheckModule: func(p string) error {
		checked = append(checked, p)
		return nil
	}})
	if c == nil {
		t.Fatalf("nil config: %v", diags)
	}
	// With brokers set, the embedded_broker block is decoded but unused: a warning says so.
	if len(diags) != 1 || diags[0].Severity != hcl.DiagWarning || diags[0].Summary != "Embedded broker not used" {
		noDiagnostics(t, c.Files, diags)
	}

	check := func(what string, got, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %#v, want %#v", what, got, want)
		}
	}
	check("Path", c.Path, path)
	if c.Files[path] == nil {
		t.Errorf("Files has no entry for %s: %v", path, c.Files)
	}
	check("ApplicationID", c.ApplicationID, "wordcount")
	check("StateDir", c.StateDir, filepath.Join(dir, "state"))
	check("Guarantee", c.Guarantee, config.AtLeastOnce)
	check("CommitInterval", c.CommitInterval, time.Second)
	check("Kafka.Brokers", c.Kafka.Brokers, []string{"127.0.0.1:9092", "kafka-2:9093"})
	sameRange(t, "Kafka.Range", c.Kafka.Range, rng(path, 7, 3, 7, 47))
	check("EmbeddedBroker", c.EmbeddedBroker, config.EmbeddedBroker{Listen: "127.0.0.1:19092", DataDir: filepath.Join(dir, "other", "broker")})
	check("Admin", c.Admin, config.Admin{Listen: "127.0.0.1:9464"})

	if len(c.Topics) != 1 {
		t.Fatalf("Topics = %+v", c.Topics)
	}
	tp := c.Topics[0]
	check("Topic.Name", tp.Name, "sentences")
	check("Topic.Partitions", tp.Partitions, int32(4))
	check("Topic.Configs", tp.Configs, map[string]string{"retention.ms": "-1", "segment.bytes": "1048576", "preallocate": "true"})
	sameRange(t, "Topic.DeclRange", tp.DeclRange, rng(path, 16, 1, 16, 18))
	sameRange(t, "Topic.PartitionsRange", tp.PartitionsRange, rng(path, 17, 3, 17, 17))
	if c.TopicByName("sentences") != &c.Topics[0] || c.TopicByName("words") != nil {
		t.Errorf("TopicByName does not find exactly the topic blocks")
	}

	if len(c.Repartitions) != 1 {
		t.Fatalf("Repartitions = %+v", c.Repartitions)
	}
	rp := c.Repartitions[0]
	check("Repartition.Name", rp.Name, "words")
	check("Repartition.Topic", rp.Topic, "wordcount-words-repartition")
	check("Repartition.Partitions", rp.Partitions, int32(3))
	sameRange(t, "Repartition.DeclRange", rp.DeclRange, rng(path, 20, 1, 20, 20))
	sameRange(t, "Repartition.PartitionsRange", rp.PartitionsRange, rng(path, 21, 3, 21, 17))
	if c.RepartitionByTopic("wordcount-words-repartition") != &c.Repartitions[0] || c.RepartitionByTopic("words") != nil {
		t.Errorf("RepartitionByTopic does not find exactly the repartition by its full name")
	}
	check("ChangelogTopic", c.ChangelogTopic("counts"), "wordcount-counts-changelog")

	if len(c.Processors) != 2 {
		t.Fatalf("Processors = %+v", c.Processors)
	}
	tok, cnt := c.Processors[0], c.Processors[1]
	check("tokenize.Name", tok.Name, "tokenize")
	check("tokenize.Module", tok.Module, filepath.Join(dir, "plugins", "tokenize", "tokenize.wasm"))
	sameRange(t, "tokenize.ModuleRange", tok.ModuleRange, rng(path, 24, 13, 24, 45))
	check("tokenize.Inputs", tok.Inputs, []string{"sentences"})
	check("tokenize.Outputs", tok.Outputs, []string{"wordcount-words-repartition"})
	sameRange(t, "tokenize.InputsRange", tok.InputsRange, rng(path, 25, 3, 25, 26))
	if len(tok.InputRanges) != 1 || len(tok.OutputRanges) != 1 {
		t.Fatalf("tokenize ranges: %v %v", tok.InputRanges, tok.OutputRanges)
	}
	sameRange(t, "tokenize.InputRanges[0]", tok.InputRanges[0], rng(path, 25, 14, 25, 25))
	sameRange(t, "tokenize.OutputRanges[0]", tok.OutputRanges[0], rng(path, 26, 14, 26, 21))
	sameRange(t, "tokenize.DeclRange", tok.DeclRange, rng(path, 23, 1, 23, 21))
	check("tokenize.Stores", len(tok.Stores), 0)

	check("count.Module", cnt.Module, filepath.Join(dir, "plugins", "count", "count.wasm"))
	check("count.Inputs", cnt.Inputs, []string{"wordcount-words-repartition"})
	check("count.Outputs", cnt.Outputs, []string{"word-counts"})
	check("count.Stores", cnt.Stores, []config.Store{
		{Name: "counts", Type: "keyvalue", Backend: "pebble", Coalesce: false, Logging: true,
			TopicConfigs: map[string]string{"min.compaction.lag.ms": "0"}, DeclRange: cnt.Stores[0].DeclRange},
		{Name: "scratch", Type: "keyvalue", Backend: "memory", Coalesce: true, Logging: false,
			DeclRange: cnt.Stores[1].DeclRange},
	})
	sameRange(t, "counts.DeclRange", cnt.Stores[0].DeclRange, rng(path, 32, 3, 32, 17))

	check("CheckModule calls", checked, []string{tok.Module, cnt.Module})
}

func TestDefaults(t *testing.T) {
	dir, path := writeConfig(t, `
application_id = "app"
processor "count" {
  module = "plugins/count/count.wasm"
  inputs = ["in"]
  store "s" {}
}
`)
	c, diags := config.Load(path, config.Options{})
	noDiagnostics(t, c.Files, diags)
	want := config.Config{
		Path:                     path,
		Files:                    c.Files,
		ApplicationID:            "app",
		StateDir:                 filepath.Join(dir, "state"),
		Guarantee:                config.AtLeastOnce,
		CommitInterval:           30 * time.Second,
		SessionTimeout:           10 * time.Second,
		SessionTimeoutRange:      c.SessionTimeoutRange, // checked below
		StateMemory:              256 << 20,
		StandbyReplicas:          0,
		AcceptableRecoveryLag:    10000,
		StateCleanupDelay:        10 * time.Minute,
		ProbingRebalanceInterval: 10 * time.Minute,
		RemoveDeadMembers:        true,
		Kafka: config.Kafka{ClientID: "app", Compression: config.CompressionNone, Linger: 5 * time.Millisecond,
			BatchSize: 1 << 20, FetchMaxBytes: 50 << 20, RequestTimeout: 10 * time.Second},
		EmbeddedBroker: config.EmbeddedBroker{Listen: "127.0.0.1:9092", DataDir: filepath.Join(dir, "state", "broker")},
		Admin:          config.Admin{Listen: "127.0.0.1:9464"},
		Processors: []config.Processor{{
			Name:        "count",
			Module:      filepath.Join(dir, "plugins", "count", "count.wasm"),
			ModuleRange: c.Processors[0].ModuleRange,
			Inputs:      []string{"in"},
			InputRanges: c.Processors[0].InputRanges,
			InputsRange: c.Processors[0].InputsRange,
			Stores: []config.Store{{Name: "s", Type: "keyvalue", Backend: "pebble", Logging: true,
				DeclRange: c.Processors[0].Stores[0].DeclRange}},
			DeclRange:    c.Processors[0].DeclRange,
			OnError:      config.OnErrorFail,
			OnErrorRange: c.Processors[0].DeclRange, // on_error is absent: the block header
			EmitBudget:   64 << 20,
		}},
	}
	if !reflect.DeepEqual(*c, want) {
		t.Errorf("defaults:\n got %+v\nwant %+v", *c, want)
	}
	if c.Kafka.Range != (hcl.Range{}) {
		t.Errorf("Kafka.Range = %v without a kafka block, want zero", c.Kafka.Range)
	}
	sameRange(t, "SessionTimeoutRange without session_timeout", c.SessionTimeoutRange, rng(path, 1, 1, 1, 1))
}

// TestExactlyOnceDefaults: exactly_once commits every 100ms unless commit_interval says
// otherwise, as Kafka Streams does.
func TestExactlyOnceDefaults(t *testing.T) {
	for _, tc := range []struct {
		extra string
		want  time.Duration
	}{
		{"", 100 * time.Millisecond},
		{`commit_interval = "2s"`, 2 * time.Second},
	} {
		_, path := writeConfig(t, `
application_id       = "app"
processing_guarantee = "exactly_once"
session_timeout      = "3s"
`+tc.extra+`
kafka {
  brokers = ["kafka:9092"]
}
processor "count" {
  module = "plugins/count/count.wasm"
  inputs = ["in"]
}
`)
		c, diags := config.Load(path, config.Options{})
		noDiagnostics(t, c.Files, diags)
		if c.Guarantee != config.ExactlyOnce || c.CommitInterval != tc.want || c.SessionTimeout != 3*time.Second {
			t.Errorf("%q: guarantee %q, commit_interval %v, session_timeout %v; want exactly_once, %v, 3s",
				tc.extra, c.Guarantee, c.CommitInterval, c.SessionTimeout, tc.want)
		}
		sameRange(t, "SessionTimeoutRange", c.SessionTimeoutRange, rng(path, 4, 24, 4, 28))
	}
}

func TestPathsAndOptionalBlocks(t *testing.T) {
	dir, path := writeConfig(t, `
application_id = "app"
state_dir      = "../data/./state/"
kafka {}
embedded_broker {}
admin {
  listen = ""
}
processor "p" {
  module = "`+filepath.Join("..", "app", "plugins", "count", "count.wasm")+`"
  inputs = ["in"]
}
`)
	c, diags := config.Load(path, config.Options{})
	noDiagnostics(t, c.Files, diags)
	state := filepath.Join(filepath.Dir(dir), "data", "state")
	if c.StateDir != state {
		t.Errorf("StateDir = %q, want %q", c.StateDir, state)
	}
	if want := filepath.Join(state, "broker"); c.EmbeddedBroker.DataDir != want {
		t.Errorf("EmbeddedBroker.DataDir = %q, want %q (default under state_dir)", c.EmbeddedBroker.DataDir, want)
	}
	if c.Admin.Listen != "" {
		t.Errorf("Admin.Listen = %q, want \"\" (disabled)", c.Admin.Listen)
	}
	if len(c.Kafka.Brokers) != 0 || c.Kafka.Range.Start.Line != 4 {
		t.Errorf("Kafka = %+v, want no brokers and the block's range", c.Kafka)
	}
	if want := filepath.Join(dir, "plugins", "count", "count.wasm"); c.Processors[0].Module != want {
		t.Errorf("Module = %q, want %q", c.Processors[0].Module, want)
	}
}

func TestCheckModule(t *testing.T) {
	_, path := writeConfig(t, fullConfig)
	c, diags := config.Load(path, config.Options{CheckModule: func(p string) error {
		if filepath.Base(p) == "count.wasm" {
			return errors.New("missing export \"process\"")
		}
		return nil
	}})
	if c == nil || len(diags.Errs()) != 1 {
		t.Fatalf("want one error, got %v", diags)
	}
	d := diags.Errs()[0].(*hcl.Diagnostic)
	if d.Severity != hcl.DiagError || d.Subject == nil {
		t.Fatalf("diagnostic %+v", d)
	}
	sameRange(t, "Subject", *d.Subject, c.Processors[1].ModuleRange)
	if d.Subject.Start.Line != 29 {
		t.Errorf("diagnostic on line %d, want 29 (count's module attribute)", d.Subject.Start.Line)
	}
	want := "The module " + c.Processors[1].Module + " is not a valid statehost module: missing export \"process\"."
	if d.Detail != want {
		t.Errorf("Detail = %q, want %q", d.Detail, want)
	}
}

func TestWriteDiagnostics(t *testing.T) {
	dir := t.TempDir()
	writeModules(t, dir, "count.wasm")
	src := `application_id = "app"

processor "count" {
  module = "count.wasm"
  inputs = ["in"]
  store "s" {
    backend = "disk"
  }
}
`
	filename := filepath.Join(dir, "file.hcl")
	c, diags := config.Parse([]byte(src), filename, config.Options{})
	if len(diags) != 1 {
		t.Fatalf("want one diagnostic, got %v", diags)
	}
	// A file:line:col header, then hcl's text writer: the file and line, the enclosing block,
	// the source line and the detail.
	var buf bytes.Buffer
	if err := config.WriteDiagnostics(&buf, c.Files, diags); err != nil {
		t.Fatal(err)
	}
	want := filename + `:7:15: error: Invalid store backend
Error: Invalid store backend

  on ` + filename + ` line 7, in processor "count":
   7:     backend = "disk"

The store backend "disk" is not one of the valid values: "pebble" (the default) or "memory".

`
	if buf.String() != want {
		t.Errorf("WriteDiagnostics wrote\n%s\nwant\n%s", buf.String(), want)
	}
	// The precise position is in the Subject, as file:line,col-col.
	if got, want := diags[0].Subject.String(), filename+":7,15-21"; got != want {
		t.Errorf("Subject = %s, want %s", got, want)
	}

	buf.Reset()
	if err := config.WriteDiagnostics(&buf, nil, diags); err != nil {
		t.Fatal(err)
	}
	if want := "  on " + filename + " line 7:\n  (source code not available)\n"; !strings.Contains(buf.String(), want) {
		t.Errorf("without files, wrote\n%s\nwant it to contain\n%s", buf.String(), want)
	}
}

func TestLoadMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.hcl")
	c, diags := config.Load(path, config.Options{})
	if c != nil {
		t.Errorf("config = %+v, want nil", c)
	}
	if len(diags) != 1 || !diags.HasErrors() || diags[0].Subject == nil || diags[0].Subject.Filename != path ||
		!strings.Contains(diags[0].Detail, "no such file") {
		t.Errorf("diagnostics = %v", diags)
	}
}

// TestDemoConfig checks the demo configuration at the root of the repository. Its modules are
// build outputs (go run ./plugins/build), so it is parsed as if it sat in a temporary
// directory that has them.
func TestDemoConfig(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "config.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeModules(t, dir, "plugins/tokenize/tokenize.wasm", "plugins/count/count.wasm")
	c, diags := config.Parse(src, filepath.Join(dir, "config.hcl"), config.Options{})
	noDiagnostics(t, c.Files, diags)
	if c.ApplicationID != "wordcount" || len(c.Kafka.Brokers) != 0 || c.CommitInterval != time.Second ||
		c.StateDir != filepath.Join(dir, "state") || c.EmbeddedBroker.DataDir != filepath.Join(dir, "state", "broker") {
		t.Errorf("demo config: %+v", c)
	}
	if len(c.Processors) != 2 || !reflect.DeepEqual(c.Processors[1].Inputs, []string{"wordcount-words-repartition"}) ||
		!reflect.DeepEqual(c.Processors[1].Outputs, []string{"word-counts"}) || len(c.Processors[1].Stores) != 1 {
		t.Errorf("demo processors: %+v", c.Processors)
	}
}
