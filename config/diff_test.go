package config_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/statehost/statehost/config"
)

// diffBase is the running configuration of the Diff tests.
const diffBase = `application_id  = "wc"
commit_interval = "1s"
admin { listen = "127.0.0.1:9464" }
topic "sentences" {
  partitions = 4
}
repartition "words" {
  partitions = 3
}
processor "tokenize" {
  module  = "m.wasm"
  inputs  = ["sentences"]
  outputs = ["words"]
}
processor "count" {
  module  = "m.wasm"
  inputs  = ["words"]
  outputs = ["word-counts"]
  store "counts" {
    logging {
      topic_config = { "min.compaction.lag.ms" = "0" }
    }
  }
  store "scratch" {
    backend = "memory"
    logging { enabled = false }
  }
  store "per-minute" {
    type        = "window"
    window_size = "1m"
  }
}
`

// loadDiff writes src as app.hcl in dir and loads it; it must have no error.
func loadDiff(t *testing.T, dir, src string) *config.Config {
	t.Helper()
	path := filepath.Join(dir, "app.hcl")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := config.Load(path, config.Options{})
	if diags.HasErrors() {
		t.Fatalf("load: %v", diags)
	}
	return cfg
}

// TestDiffLive: each change a running application applies comes back as a Change, with the
// range of its block or attribute in the new file, and nothing is refused.
func TestDiffLive(t *testing.T) {
	for _, tc := range []struct {
		name      string
		edit      func(string) string
		want      []string // Change.String()
		wantKinds []config.ChangeKind
		line      string // a line of the new file the first change's range starts on
	}{
		{name: "nothing", edit: func(s string) string { return s + "\n# a comment\n" }},
		{name: "commit_interval", edit: replace(`commit_interval = "1s"`, `commit_interval = "250ms"`),
			want: []string{"commit_interval 1s -> 250ms"}, line: `commit_interval = "250ms"`},
		{name: "processor added", edit: appendText(`
topic "clicks" {
  partitions = 4
}
processor "audit" {
  module = "m.wasm"
  inputs = ["clicks"]
  store "audited" {}
}
`), want: []string{`topic "clicks" added`, `processor "audit" added`}, line: `topic "clicks" {`},
		{name: "store added", edit: replace(`  store "scratch" {`, "  store \"seen\" {}\n  store \"scratch\" {"),
			want: []string{`store "seen" added to processor "count"`}, line: `  store "seen" {}`},
		{name: "store removed", edit: replace(`  store "per-minute" {
    type        = "window"
    window_size = "1m"
  }
`, ""), want: []string{`store "per-minute" removed from processor "count"`}, line: `processor "count" {`},
		{name: "on_error", edit: replace(`  inputs  = ["words"]`, "  inputs  = [\"words\"]\n  on_error = \"dead_letter\""),
			want: []string{`processor "count" on_error fail -> dead_letter`}, line: `  on_error = "dead_letter"`},
		{name: "topic_config", edit: replace(`"min.compaction.lag.ms" = "0"`, `"min.compaction.lag.ms" = "0", "segment.ms" = "60000"`),
			want: []string{`store "counts" changelog topic_config changed`}, line: `      topic_config = { "min.compaction.lag.ms" = "0", "segment.ms" = "60000" }`},
		{name: "repartition added", edit: appendText("repartition \"again\" {\n  partitions = 3\n}\n"),
			want: []string{`repartition topic "wc-again-repartition" added`}, line: `repartition "again" {`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "m.wasm"), []byte("\x00asm"), 0o644); err != nil {
				t.Fatal(err)
			}
			running := loadDiff(t, dir, diffBase)
			src := tc.edit(diffBase)
			next := loadDiff(t, dir, src)
			changes, diags := config.Diff(running, next)
			if len(diags) > 0 {
				t.Fatalf("refused: %v", diags)
			}
			var got []string
			for _, c := range changes {
				got = append(got, c.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("changes %q, want %q", got, tc.want)
			}
			if tc.line != "" {
				if want := lineOf(t, src, tc.line); changes[0].Range.Start.Line != want || changes[0].Range.Filename != next.Path {
					t.Errorf("change at %s:%d, want %s:%d", changes[0].Range.Filename, changes[0].Range.Start.Line, next.Path, want)
				}
			}
		})
	}
}

// TestDiffRefused: every difference a running application cannot apply is a diagnostic at
// file:line of what changed in the new file, with the other refusals and changes beside it.
func TestDiffRefused(t *testing.T) {
	for _, tc := range []struct {
		name    string
		edit    func(string) string
		line    string // the line of the new file the diagnostic points at ("": line 1)
		summary string
	}{
		{"application_id", replace(`application_id  = "wc"`, `application_id  = "wc2"`), `application_id  = "wc2"`, "application_id"},
		{"guarantee", appendText(`processing_guarantee = "exactly_once"` + "\n"), `processing_guarantee = "exactly_once"`, "processing_guarantee"},
		{"state_dir", appendText(`state_dir = "elsewhere"` + "\n"), `state_dir = "elsewhere"`, "state_dir"},
		{"session_timeout", appendText(`session_timeout = "20s"` + "\n"), `session_timeout = "20s"`, "session_timeout"},
		{"standby_replicas", appendText("standby_replicas = 1\n"), "standby_replicas = 1", "standby_replicas"},
		{"kafka", appendText("kafka {\n  compression = \"zstd\"\n}\n"), "kafka {", "the kafka block"},
		{"admin", replace(`admin { listen = "127.0.0.1:9464" }`, `admin { listen = "127.0.0.1:9465" }`), `admin { listen = "127.0.0.1:9465" }`, "the admin block"},
		{"topic partitions", replace("  partitions = 4", "  partitions = 8"), "  partitions = 8", "a topic's partitions"},
		{"repartition partitions", replace("  partitions = 3", "  partitions = 6"), "  partitions = 6", "a repartition's partitions"},
		{"topic removed", replace("topic \"sentences\" {\n  partitions = 4\n}\n", ""), "", "the topic blocks"},
		{"processor removed", replace(`processor "tokenize" {
  module  = "m.wasm"
  inputs  = ["sentences"]
  outputs = ["words"]
}
`, ""), "", "the processors"},
		{"module", replace("  module  = \"m.wasm\"\n  inputs  = [\"words\"]", "  module  = \"n.wasm\"\n  inputs  = [\"words\"]"), `  module  = "n.wasm"`, "a processor's module"},
		{"inputs", func(s string) string {
			return replace(`inputs  = ["sentences"]`, `inputs  = ["clicks"]`)(s) + "topic \"clicks\" {\n  partitions = 4\n}\n"
		}, `  inputs  = ["clicks"]`, "a processor's inputs"},
		{"outputs", replace(`outputs = ["word-counts"]`, `outputs = ["word-counts", "more"]`), `  outputs = ["word-counts", "more"]`, "a processor's outputs"},
		{"store type", replace(`    type        = "window"
    window_size = "1m"`, `    type           = "session"
    inactivity_gap = "1m"`), `    type           = "session"`, "a store's type"},
		{"store backend", replace(`  store "counts" {`, "  store \"counts\" {\n    backend = \"memory\""), `    backend = "memory"`, "a store's backend"},
		{"window size", replace(`window_size = "1m"`, `window_size = "2m"`), `    window_size = "2m"`, "a store's window_size"},
		{"store ttl", replace(`  store "counts" {`, "  store \"counts\" {\n    ttl = \"1h\""), `  store "counts" {`, "a store's settings"},
		{"logging", replace("logging { enabled = false }", "logging { enabled = true }"), "    logging { enabled = true }", "a store's logging"},
		{"store without changelog removed", replace(`  store "scratch" {
    backend = "memory"
    logging { enabled = false }
  }
`, ""), `processor "count" {`, "a store without a changelog"},
		{"store moved", func(s string) string {
			s = replace(`  store "per-minute" {
    type        = "window"
    window_size = "1m"
  }
`, "")(s)
			return replace(`  outputs = ["words"]`, "  outputs = [\"words\"]\n  store \"per-minute\" {\n    type        = \"window\"\n    window_size = \"1m\"\n  }")(s)
		}, `  store "per-minute" {`, "a store's processor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, m := range []string{"m.wasm", "n.wasm"} {
				if err := os.WriteFile(filepath.Join(dir, m), []byte("\x00asm"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			running := loadDiff(t, dir, diffBase)
			src := tc.edit(diffBase)
			if src == diffBase {
				t.Fatal("the edit changed nothing")
			}
			next := loadDiff(t, dir, src)
			_, diags := config.Diff(running, next)
			if len(diags) != 1 {
				t.Fatalf("%d diagnostics, want 1: %v", len(diags), diags)
			}
			d := diags[0]
			want := 1
			if tc.line != "" {
				want = lineOf(t, src, tc.line)
			}
			if d.Subject == nil || d.Subject.Filename != next.Path || d.Subject.Start.Line != want {
				t.Errorf("diagnostic at %v, want %s:%d", d.Subject, next.Path, want)
			}
			if wantSummary := "Cannot change " + tc.summary + " without a restart"; d.Summary != wantSummary {
				t.Errorf("summary %q, want %q", d.Summary, wantSummary)
			}
			var b strings.Builder
			if err := config.WriteDiagnostics(&b, next.Files, diags); err != nil {
				t.Fatal(err)
			}
			if prefix := fmt.Sprintf("%s:%d:", next.Path, want); !strings.HasPrefix(b.String(), prefix) {
				t.Errorf("printed %q, want it to start with %q", b.String(), prefix)
			}
		})
	}
}

// TestDiffMixed: refusals and changes of one reload come back together, the refusals sorted
// by position; an application_id that changed is the one refusal (everything derives from it).
func TestDiffMixed(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "m.wasm"), []byte("\x00asm"), 0o644); err != nil {
		t.Fatal(err)
	}
	running := loadDiff(t, dir, diffBase)
	src := replace("  partitions = 3", "  partitions = 9")(diffBase) + `session_timeout = "20s"` + "\n"
	src = replace(`commit_interval = "1s"`, `commit_interval = "2s"`)(src)
	next := loadDiff(t, dir, src)
	changes, diags := config.Diff(running, next)
	if len(changes) != 1 || changes[0].Kind != config.ChangeCommitInterval {
		t.Errorf("changes %v, want commit_interval", changes)
	}
	other := loadDiff(t, dir, replace(`application_id  = "wc"`, `application_id  = "other"`)(src))
	if changes, diags := config.Diff(running, other); len(changes) != 0 || len(diags) != 1 || diags[0].Summary != "Cannot change application_id without a restart" {
		t.Errorf("with another application_id: changes %v, diagnostics %v; want its refusal alone", changes, diags)
	}
	if len(diags) != 2 || diags[0].Subject.Start.Line != lineOf(t, src, "  partitions = 9") || diags[1].Subject.Start.Line != lineOf(t, src, `session_timeout = "20s"`) {
		t.Errorf("diagnostics %v, want the repartition's partitions then session_timeout", diags)
	}
}

func replace(old, new string) func(string) string {
	return func(s string) string { return strings.Replace(s, old, new, 1) }
}

func appendText(more string) func(string) string {
	return func(s string) string { return s + more }
}

// lineOf returns the 1-based number of the first line of src that is line.
func lineOf(t *testing.T, src, line string) int {
	t.Helper()
	for i, l := range strings.Split(src, "\n") {
		if l == line {
			return i + 1
		}
	}
	t.Fatalf("no line %q in %s", line, src)
	return 0
}
