package config_test

import (
	"testing"

	"github.com/statehost/statehost/config"
)

// TestEmbeddedBrokerSyncWrites: embedded_broker.sync_writes is false by default and when the
// block is absent, and true when set (a value that is not a bool is testdata/errors'
// embedded_broker_sync_writes.hcl).
func TestEmbeddedBrokerSyncWrites(t *testing.T) {
	for _, tc := range []struct {
		block string
		want  bool
	}{
		{"", false},
		{"embedded_broker {}\n", false},
		{"embedded_broker {\n  sync_writes = false\n}\n", false},
		{"embedded_broker {\n  sync_writes = true\n}\n", true},
	} {
		_, path := writeConfig(t, `application_id = "app"
`+tc.block+`processor "p" {
  module = "plugins/count/count.wasm"
  inputs = ["in"]
}
`)
		c, diags := config.Load(path, config.Options{})
		noDiagnostics(t, c.Files, diags)
		if c.EmbeddedBroker.SyncWrites != tc.want {
			t.Errorf("%q: SyncWrites = %v, want %v", tc.block, c.EmbeddedBroker.SyncWrites, tc.want)
		}
	}
}
