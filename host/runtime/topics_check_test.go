package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/statehost/statehost/config"
)

// TestCompileUnreadableModule: a module file that cannot be read when New compiles it (here,
// replaced after the configuration was loaded) is reported as not readable, with the
// operating system's error, not as an invalid module.
func TestCompileUnreadableModule(t *testing.T) {
	if _, err := os.Stat("/proc/self/mem"); err != nil {
		t.Skip("no /proc/self/mem:", err)
	}
	dir := t.TempDir()
	mod := filepath.Join(dir, "count.wasm")
	wasm, err := os.ReadFile(modules["count"])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mod, wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := loadConfig(t, dir, `application_id = "unreadable"
admin { listen = "" }
processor "count" {
  module = "count.wasm"
  inputs = ["in"]
}
`)
	// /proc/self/mem is a regular file whose first byte cannot be read (EIO), even by root.
	if err := os.Remove(mod); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/proc/self/mem", mod); err != nil {
		t.Fatal(err)
	}
	_, err = New(context.Background(), Options{Config: cfg, Brokers: cluster(t)})
	var de *DiagnosticsError
	if !errors.As(err, &de) || len(de.Diags) != 1 {
		t.Fatalf("New: %v, want a *DiagnosticsError with one diagnostic", err)
	}
	d := de.Diags[0]
	want := fmt.Sprintf("Processor \"count\": the module file %s cannot be read: read %s: input/output error.", mod, mod)
	if d.Summary != "Module file not readable" || d.Detail != want || d.Subject.Start.Line != 4 || d.Subject.Start.Column != 12 {
		var b strings.Builder
		_ = config.WriteDiagnostics(&b, cfg.Files, de.Diags)
		t.Errorf("got %s\nwant 4:12 Module file not readable | %s", b.String(), want)
	}
}
