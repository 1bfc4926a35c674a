package config_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/statehost/statehost/config"
)

// Each file under testdata/errors is one configuration error (or a few, for many_errors.hcl).
// It lists every diagnostic Load must return, in order, in comment lines at its end:
//
//	# expect: LINE:COL: SEVERITY: SUMMARY | DETAIL SUBSTRING
//
// where "| DETAIL SUBSTRING" is optional. Module paths in these files name testdata/errors/ok.wasm,
// an empty file: the module check only asks that the file exists unless Options.CheckModule is set.
//
// A case with a secret written by mistake (a password in the file, a key pasted for a path)
// also lists, one a line, what WriteDiagnostics must not print:
//
//	# not printed: SECRET

var expectLine = regexp.MustCompile(`^#\s*expect:\s*(\d+):(\d+):\s*(error|warning):\s*([^|]*?)\s*(?:\|\s*(.*?)\s*)?$`)

var notPrintedLine = regexp.MustCompile(`^#\s*not printed:\s*(.*?)\s*$`)

type expectation struct {
	pos      string // "LINE:COL: severity: Summary"
	detail   string
	fileLine int
}

// readExpectations returns the expectations of the case at path, and the strings it says
// must not be printed.
func readExpectations(t *testing.T, path string) (exps []expectation, notPrinted []string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if m := notPrintedLine.FindStringSubmatch(line); m != nil {
			if m[1] == "" {
				t.Fatalf("%s:%d: empty \"not printed\"", path, n)
			}
			notPrinted = append(notPrinted, m[1])
			continue
		}
		if !strings.HasPrefix(line, "#") || !strings.Contains(line, "expect:") {
			continue
		}
		m := expectLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("%s:%d: malformed expectation %q", path, n, line)
		}
		exps = append(exps, expectation{pos: fmt.Sprintf("%s:%s: %s: %s", m[1], m[2], m[3], m[4]), detail: m[5], fileLine: n})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return exps, notPrinted
}

func describe(d *hcl.Diagnostic) string {
	sev := "error"
	if d.Severity == hcl.DiagWarning {
		sev = "warning"
	}
	if d.Subject == nil {
		return fmt.Sprintf("?:?: %s: %s", sev, d.Summary)
	}
	return fmt.Sprintf("%d:%d: %s: %s", d.Subject.Start.Line, d.Subject.Start.Column, sev, d.Summary)
}

func TestErrorCases(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "errors", "*.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 15 {
		t.Fatalf("found only %d error cases", len(files))
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".hcl"), func(t *testing.T) {
			exps, notPrinted := readExpectations(t, path)
			if len(exps) == 0 {
				t.Fatalf("%s has no expectations", path)
			}
			c, diags := config.Load(path, config.Options{})
			if c == nil {
				t.Fatalf("Load returned a nil Config: %v", diags)
			}
			if !diags.HasErrors() && !strings.Contains(exps[0].pos, "warning") {
				t.Errorf("no errors")
			}
			var got []string
			for _, d := range diags {
				if d.Subject == nil {
					t.Errorf("diagnostic without a Subject: %s: %s", d.Summary, d.Detail)
				} else if d.Subject.Filename != path {
					t.Errorf("diagnostic %q has file %q, want %q", d.Summary, d.Subject.Filename, path)
				}
				if d.Detail == "" {
					t.Errorf("diagnostic %q has no Detail", d.Summary)
				}
				got = append(got, describe(d)+" | "+d.Detail)
			}
			for i := 0; i < max(len(exps), len(diags)); i++ {
				switch {
				case i >= len(diags):
					t.Errorf("%s:%d: missing diagnostic %s | %s", path, exps[i].fileLine, exps[i].pos, exps[i].detail)
				case i >= len(exps):
					t.Errorf("unexpected diagnostic %s", got[i])
				case describe(diags[i]) != exps[i].pos || !strings.Contains(diags[i].Detail, exps[i].detail):
					t.Errorf("%s:%d: diagnostic %d\n got: %s\nwant: %s | …%s…", path, exps[i].fileLine, i, got[i], exps[i].pos, exps[i].detail)
				}
			}
			if t.Failed() {
				t.Logf("all diagnostics:\n%s", strings.Join(got, "\n"))
			}
			checkPrinted(t, path, c.Files, diags, notPrinted)
		})
	}
}

// checkPrinted prints diags as the commands do (WriteDiagnostics) and checks that each names
// its file and line, and that none of notPrinted shows.
func checkPrinted(t *testing.T, path string, files map[string]*hcl.File, diags hcl.Diagnostics, notPrinted []string) {
	t.Helper()
	var b strings.Builder
	if err := config.WriteDiagnostics(&b, files, diags); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, d := range diags {
		if d.Subject == nil {
			continue
		}
		sev := "error"
		if d.Severity == hcl.DiagWarning {
			sev = "warning"
		}
		first := fmt.Sprintf("%s:%d:%d: %s: %s\n", path, d.Subject.Start.Line, d.Subject.Start.Column, sev, d.Summary)
		on := fmt.Sprintf("  on %s line %d", path, d.Subject.Start.Line)
		if !strings.Contains(out, first) || !strings.Contains(out, on) {
			t.Errorf("the printed diagnostics lack %q or %q:\n%s", strings.TrimSpace(first), on, out)
		}
	}
	for _, s := range notPrinted {
		if strings.Contains(out, s) {
			t.Errorf("the printed diagnostics show %q:\n%s", s, out)
		}
	}
}
