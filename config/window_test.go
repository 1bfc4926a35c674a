package config_test

import (
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/statehost/statehost/config"
)

// TestWindowAndSessionStores decodes a window store and a session store with every attribute
// of their own set, or left to its default.
func TestWindowAndSessionStores(t *testing.T) {
	_, path := writeConfig(t, `application_id = "app"
processor "wc" {
  module = "plugins/count/count.wasm"
  inputs = ["in"]
  store "counts" {
    type        = "window"
    window_size = "1m"
    advance     = "30s"
    grace       = "10s"
    retention   = "2h"
    changelog_additional_retention = "1h"
  }
  store "sessions" {
    type           = "session"
    inactivity_gap = "5m"
    grace          = "1m"
  }
}
`)
	c, diags := config.Load(path, config.Options{})
	noDiagnostics(t, c.Files, diags)
	stores := c.Processors[0].Stores
	want := []config.Store{
		{Name: "counts", Type: config.StoreWindow, Backend: "pebble", Logging: true, DeclRange: stores[0].DeclRange,
			WindowSize: time.Minute, Advance: 30 * time.Second, Grace: 10 * time.Second, Retention: 2 * time.Hour,
			AdditionalRetention: time.Hour},
		{Name: "sessions", Type: config.StoreSession, Backend: "pebble", Logging: true, DeclRange: stores[1].DeclRange,
			InactivityGap: 5 * time.Minute, Grace: time.Minute, Retention: 24 * time.Hour, // the default: a day at least
			AdditionalRetention: 24 * time.Hour},
	}
	if !reflect.DeepEqual(stores, want) {
		t.Errorf("stores:\n got %+v\nwant %+v", stores, want)
	}
	sameRange(t, "counts.DeclRange", stores[0].DeclRange, rng(path, 5, 3, 5, 17))
	if got := stores[0].ChangelogRetention(); got != 3*time.Hour {
		t.Errorf("counts.ChangelogRetention() = %v, want 3h (retention 2h + 1h)", got)
	}
	if got := stores[1].ChangelogRetention(); got != 48*time.Hour {
		t.Errorf("sessions.ChangelogRetention() = %v, want 48h (retention 24h + 24h)", got)
	}
}

// TestWindowStoreDefaults: a window store needs only window_size and a session store only
// inactivity_gap; both take a backend and logging like a key-value store.
func TestWindowStoreDefaults(t *testing.T) {
	_, path := writeConfig(t, `application_id = "app"
processor "p" {
  module = "plugins/count/count.wasm"
  inputs = ["in"]
  store "w" {
    type        = "window"
    window_size = "10m"
    backend     = "memory"
    logging {
      enabled = false
    }
  }
  store "s" {
    type           = "session"
    inactivity_gap = "30s"
    grace          = "0s"
    coalesce       = false
  }
  store "kv" {
    type     = "keyvalue"
    coalesce = true
  }
}
`)
	c, diags := config.Load(path, config.Options{})
	noDiagnostics(t, c.Files, diags)
	stores := c.Processors[0].Stores
	want := []config.Store{
		{Name: "w", Type: config.StoreWindow, Backend: "memory", Logging: false, DeclRange: stores[0].DeclRange,
			WindowSize: 10 * time.Minute, Advance: 10 * time.Minute, Retention: 24 * time.Hour, // a day at least
			AdditionalRetention: 24 * time.Hour},
		{Name: "s", Type: config.StoreSession, Backend: "pebble", Logging: true, DeclRange: stores[1].DeclRange,
			InactivityGap: 30 * time.Second, Retention: 24 * time.Hour, AdditionalRetention: 24 * time.Hour},
		{Name: "kv", Type: config.StoreKeyValue, Backend: "pebble", Coalesce: true, Logging: true,
			DeclRange: stores[2].DeclRange},
	}
	if !reflect.DeepEqual(stores, want) {
		t.Errorf("stores:\n got %+v\nwant %+v", stores, want)
	}
	for i, want := range []time.Duration{48 * time.Hour, 48 * time.Hour, 0} {
		if got := stores[i].ChangelogRetention(); got != want {
			t.Errorf("%s.ChangelogRetention() = %v, want %v", stores[i].Name, got, want)
		}
	}
}

// TestChangelogRetentionSaturates: the sum of two huge durations does not wrap around.
func TestChangelogRetentionSaturates(t *testing.T) {
	s := config.Store{Type: config.StoreWindow, Retention: math.MaxInt64 - 1, AdditionalRetention: time.Hour}
	if got := s.ChangelogRetention(); got != math.MaxInt64 {
		t.Errorf("ChangelogRetention() = %v, want the largest duration", got)
	}
}
