package config_test

import (
	"strings"
	"testing"

	"github.com/statehost/statehost/config"
)

// TestMemorySettings: state_memory defaults to 256 MiB and memory_limit to none; both decode
// byte sizes; a state_memory out of its range, and a memory_limit that leaves less than
// 64 MiB beside state_memory, are errors on their attributes.
func TestMemorySettings(t *testing.T) {
	_, path := writeConfig(t, `application_id = "app"`)
	c, diags := config.Load(path, config.Options{})
	noDiagnostics(t, c.Files, diags)
	if c.StateMemory != 256<<20 || c.MemoryLimit != 0 {
		t.Errorf("defaults: state_memory %d, memory_limit %d; want 256 MiB and none", c.StateMemory, c.MemoryLimit)
	}

	_, path = writeConfig(t, `application_id = "app"
state_memory = "64MiB"
memory_limit = "128MiB"
`)
	c, diags = config.Load(path, config.Options{})
	noDiagnostics(t, c.Files, diags)
	if c.StateMemory != 64<<20 || c.MemoryLimit != 128<<20 {
		t.Errorf("state_memory %d, memory_limit %d; want 64 MiB and 128 MiB", c.StateMemory, c.MemoryLimit)
	}

	_, path = writeConfig(t, `application_id = "app"
state_memory = "4MiB"
`)
	_, diags = config.Load(path, config.Options{})
	if len(diags) != 1 || diags[0].Summary != "Invalid byte size" || !strings.Contains(diags[0].Detail, "from 8MiB to 1024GiB") {
		t.Fatalf("state_memory 4MiB: %v, want one error on its range", diags)
	}
	sameRange(t, "state_memory", *diags[0].Subject, rng(path, 2, 16, 2, 22))

	_, path = writeConfig(t, `application_id = "app"
state_memory = "256MiB"
memory_limit = "300MiB"
`)
	_, diags = config.Load(path, config.Options{})
	if len(diags) != 1 || diags[0].Summary != "Memory limit too low" || !strings.Contains(diags[0].Detail, "at least 320MiB") {
		t.Fatalf("memory_limit 300MiB: %v, want one error asking for 320MiB", diags)
	}
	sameRange(t, "memory_limit", *diags[0].Subject, rng(path, 3, 16, 3, 24))
}
