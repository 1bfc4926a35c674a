package config_test

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/statehost/statehost/config"
)

// TestWriteDiagnosticsHidesSecrets prints diagnostics on each line of a file, as another
// package (the runtime) makes them: a snippet that would show a line that may hold a secret
// is left out, the others are printed.
func TestWriteDiagnosticsHidesSecrets(t *testing.T) {
	const src = `application_id = "secured"

kafka {
  brokers = ["kafka-1:9093"]
  sasl {
    mechanism     = "SCRAM-SHA-512"
    username      = "app"
    password_file = "/run/secrets/file-path-secret"
  }
  tls {
    key_file = <<-EOT
      -----BEGIN PRIVATE KEY-----
      heredoc-key-secret
      -----END PRIVATE KEY-----
    EOT
  }
}

admin {
  token = "admin-token-secret"
}

processor "count" {
  module = "ok.wasm"
  inputs = ["words"]
}
`
	path := filepath.Join(t.TempDir(), "statehost.hcl")
	c, _ := config.Parse([]byte(src), path, config.Options{})
	if c == nil || c.Files[path] == nil {
		t.Fatalf("Parse kept no file")
	}
	lines := strings.Split(src, "\n")
	rangeOf := func(line int) *hcl.Range {
		off := 0
		for _, l := range lines[:line-1] {
			off += len(l) + 1
		}
		text := lines[line-1]
		col := len(text) - len(strings.TrimLeft(text, " "))
		return &hcl.Range{Filename: path,
			Start: hcl.Pos{Line: line, Column: col + 1, Byte: off + col},
			End:   hcl.Pos{Line: line, Column: len(text) + 1, Byte: off + len(text)}}
	}
	for _, tc := range []struct {
		line    int
		context *hcl.Range // nil: none
		shown   bool
	}{
		{line: 4, shown: true},          // brokers
		{line: 5, shown: true},          // sasl {
		{line: 6, shown: true},          // mechanism
		{line: 7, shown: true},          // username
		{line: 8},                       // password_file
		{line: 9, shown: true},          // the sasl block's }
		{line: 11},                      // key_file = <<-EOT
		{line: 13},                      // the key
		{line: 20},                      // admin.token
		{line: 24, shown: true},         // module
		{line: 4, context: rangeOf(13)}, // a context on the key
		{line: 24, context: rangeOf(25), shown: true}, // a context without a secret
	} {
		var ctx *hcl.Range
		if tc.context != nil {
			ctx = &hcl.Range{Filename: path, Start: rangeOf(tc.line).Start, End: tc.context.End}
		}
		d := &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Broker refused", Detail: "The broker said no.",
			Subject: rangeOf(tc.line), Context: ctx}
		var b strings.Builder
		if err := config.WriteDiagnostics(&b, c.Files, hcl.Diagnostics{d}); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		for _, secret := range []string{"file-path-secret", "heredoc-key-secret", "admin-token-secret"} {
			if strings.Contains(out, secret) {
				t.Errorf("line %d: the diagnostic shows %q:\n%s", tc.line, secret, out)
			}
		}
		want := []string{path + ":" + strconv.Itoa(tc.line) + ":", "  on " + path + " line " + strconv.Itoa(tc.line), "The broker said no."}
		if tc.shown {
			want = append(want, strings.TrimSpace(lines[tc.line-1]))
		} else {
			want = append(want, "(source not shown: it may hold a secret)")
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("line %d: the diagnostic lacks %q:\n%s", tc.line, w, out)
			}
		}
	}
}
