package config_test

import (
	"strings"
	"testing"

	"github.com/statehost/statehost/config"
)

func TestParseByteSize(t *testing.T) {
	for s, want := range map[string]int64{"100B": 100, "0B": 0, "64MiB": 64 << 20, "512 KiB": 512 << 10, "2GiB": 2 << 30, "8589934591GiB": 8589934591 << 30} {
		if got, err := config.ParseByteSize(s); err != nil || got != want {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d", s, got, err, want)
		}
	}
	for _, s := range []string{"", "64", "MiB", "64mib", "64MB", "1.5MiB", "-1MiB", " 1MiB", "1  MiB", "8589934592GiB", "99999999999999999999B"} {
		if n, err := config.ParseByteSize(s); err == nil {
			t.Errorf("ParseByteSize(%q) = %d, want an error", s, n)
		}
	}
}

// TestEmitBudget: emit_budget decodes a byte size (64 MiB when absent); a bad or zero size is
// an error on the attribute.
func TestEmitBudget(t *testing.T) {
	_, path := writeConfig(t, `
application_id = "app"
processor "a" {
  module      = "plugins/count/count.wasm"
  inputs      = ["in"]
  emit_budget = "8MiB"
}
processor "b" {
  module = "plugins/count/count.wasm"
  inputs = ["in"]
}
`)
	c, diags := config.Load(path, config.Options{})
	noDiagnostics(t, c.Files, diags)
	if a, b := c.Processors[0].EmitBudget, c.Processors[1].EmitBudget; a != 8<<20 || b != 64<<20 || config.DefaultEmitBudget != 64<<20 {
		t.Errorf("emit budgets %d and %d, want 8 MiB and the default 64 MiB", a, b)
	}

	_, path = writeConfig(t, `
application_id = "app"
processor "a" {
  module      = "plugins/count/count.wasm"
  inputs      = ["in"]
  emit_budget = "8 megabytes"
}
processor "b" {
  module      = "plugins/count/count.wasm"
  inputs      = ["in"]
  emit_budget = "0B"
}
processor "c" {
  module      = "plugins/count/count.wasm"
  inputs      = ["in"]
  emit_budget = 1024
}
`)
	_, diags = config.Load(path, config.Options{})
	if len(diags) != 3 || diags[0].Summary != "Invalid byte size" || !strings.Contains(diags[0].Detail, "unit") ||
		diags[1].Summary != "Invalid byte size" || !strings.Contains(diags[1].Detail, "greater than zero") ||
		diags[2].Summary != "Incorrect attribute value type" {
		t.Fatalf("bad emit budgets: %v, want three errors", diags)
	}
	sameRange(t, "emit_budget", *diags[0].Subject, rng(path, 6, 17, 6, 30))
}
