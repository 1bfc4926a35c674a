package config_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/statehost/statehost/config"
)

// TestStoreTTL checks the values of ttl and ttl_clock: days and Go units, the stream-time
// default, and a store without a ttl.
func TestStoreTTL(t *testing.T) {
	dir := t.TempDir()
	writeModules(t, dir, "count.wasm")
	src := `application_id = "app"

processor "count" {
  module = "count.wasm"
  inputs = ["in"]
  store "week" {
    ttl = "7d"
  }
  store "mixed" {
    ttl       = "1d12h30m"
    ttl_clock = "wall_clock"
  }
  store "stream" {
    ttl       = "250ms"
    ttl_clock = "stream_time"
  }
  store "none" {}
}
`
	c, diags := config.Parse([]byte(src), filepath.Join(dir, "config.hcl"), config.Options{})
	if diags.HasErrors() || len(diags) > 0 {
		t.Fatalf("diagnostics: %v", diags)
	}
	want := map[string]struct {
		ttl   time.Duration
		clock string
	}{
		"week":   {7 * 24 * time.Hour, config.TTLStreamTime},
		"mixed":  {36*time.Hour + 30*time.Minute, config.TTLWallClock},
		"stream": {250 * time.Millisecond, config.TTLStreamTime},
		"none":   {0, ""},
	}
	for _, s := range c.Processors[0].Stores {
		if w := want[s.Name]; s.TTL != w.ttl || s.TTLClock != w.clock {
			t.Errorf("store %s: ttl %v clock %q, want %v %q", s.Name, s.TTL, s.TTLClock, w.ttl, w.clock)
		}
	}
}
