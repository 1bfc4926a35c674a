package config_test

import (
	"math"
	"testing"
	"time"

	"github.com/statehost/statehost/config"
)

// instancesConfig is a minimal configuration with extra top-level attributes.
func instancesConfig(attrs string) string {
	return `application_id = "app"
` + attrs + `
processor "count" {
  module = "plugins/count/count.wasm"
  inputs = ["in"]
}
`
}

// TestSeveralInstances decodes the attributes for running several instances: set, null (the
// default, as for every attribute) and at the ends of their ranges. TestDefaults covers them
// left out.
func TestSeveralInstances(t *testing.T) {
	type want struct {
		standby int
		lag     int64
		cleanup time.Duration
		probing time.Duration
		remove  bool
	}
	for _, tc := range []struct {
		name  string
		attrs string
		want  want
	}{
		{"set", `
standby_replicas           = 2
acceptable_recovery_lag    = 500
state_cleanup_delay        = "1h30m"
probing_rebalance_interval = "90s"
remove_dead_members        = false
`, want{2, 500, 90 * time.Minute, 90 * time.Second, false}},
		{"null", `
standby_replicas           = null
acceptable_recovery_lag    = null
state_cleanup_delay        = null
probing_rebalance_interval = null
remove_dead_members        = null
`, want{0, 10000, 10 * time.Minute, 10 * time.Minute, true}},
		{"least", `
standby_replicas           = 0
acceptable_recovery_lag    = 0
state_cleanup_delay        = "1ms"
probing_rebalance_interval = "1ms"
`, want{0, 0, time.Millisecond, time.Millisecond, true}},
		{"most", `
standby_replicas           = 2147483647
acceptable_recovery_lag    = 9223372036854775807
state_cleanup_delay        = "2562047h47m16.854s"
probing_rebalance_interval = "2562047h47m16.854s"
`, want{math.MaxInt32, math.MaxInt64, math.MaxInt64 / time.Millisecond * time.Millisecond, math.MaxInt64 / time.Millisecond * time.Millisecond, true}},
		{"exponent", `
standby_replicas           = 1e1
acceptable_recovery_lag    = 2.5e3
`, want{10, 2500, 10 * time.Minute, 10 * time.Minute, true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, path := writeConfig(t, instancesConfig(tc.attrs))
			c, diags := config.Load(path, config.Options{})
			noDiagnostics(t, c.Files, diags)
			got := want{c.StandbyReplicas, c.AcceptableRecoveryLag, c.StateCleanupDelay, c.ProbingRebalanceInterval, c.RemoveDeadMembers}
			if got != tc.want {
				t.Errorf("standby_replicas, acceptable_recovery_lag, state_cleanup_delay, probing_rebalance_interval, remove_dead_members = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestSeveralInstancesErrorRanges checks the whole range of each error, start and end: the
// attribute's expression. TestErrorCases (testdata/errors/instances_*.hcl) checks every
// error's start and message.
func TestSeveralInstancesErrorRanges(t *testing.T) {
	_, path := writeConfig(t, instancesConfig(`standby_replicas = -1
acceptable_recovery_lag = "many"
state_cleanup_delay = "10 m"
probing_rebalance_interval = "10.5ms"
remove_dead_members = "yes"`))
	c, diags := config.Load(path, config.Options{})
	if c == nil {
		t.Fatalf("nil config: %v", diags)
	}
	want := []struct {
		summary string
		line    int
		col     int
		endCol  int
	}{
		{"Invalid number", 2, 20, 22},
		{"Incorrect attribute value type", 3, 27, 33},
		{"Invalid duration", 4, 23, 29},
		{"Invalid duration", 5, 30, 38},
		{"Incorrect attribute value type", 6, 23, 28},
	}
	if len(diags) != len(want) {
		t.Fatalf("got %d diagnostics, want %d: %v", len(diags), len(want), diags)
	}
	for i, w := range want {
		d := diags[i]
		if d.Summary != w.summary || d.Subject == nil {
			t.Errorf("diagnostic %d: %q at %v, want %q", i, d.Summary, d.Subject, w.summary)
			continue
		}
		sameRange(t, d.Summary, *d.Subject, rng(path, w.line, w.col, w.line, w.endCol))
	}
	// An invalid value leaves the default in place.
	if c.StandbyReplicas != 0 || c.AcceptableRecoveryLag != 10000 || c.StateCleanupDelay != 10*time.Minute || c.ProbingRebalanceInterval != 10*time.Minute {
		t.Errorf("after errors: %d, %d, %v, %v; want the defaults", c.StandbyReplicas, c.AcceptableRecoveryLag, c.StateCleanupDelay, c.ProbingRebalanceInterval)
	}
}

// TestAdminAdvertise: admin.advertise is a host:port with a host and a port; a bad one is a
// diagnostic on it.
func TestAdminAdvertise(t *testing.T) {
	_, path := writeConfig(t, instancesConfig(`admin {
  listen    = "0.0.0.0:9464"
  advertise = "statehost-1.internal:9464"
  token     = "t0ken"
}`))
	c, diags := config.Load(path, config.Options{})
	noDiagnostics(t, c.Files, diags)
	if c.Admin.Advertise != "statehost-1.internal:9464" {
		t.Errorf("advertise %q", c.Admin.Advertise)
	}
	for _, bad := range []string{":9464", "host", "host:0"} {
		_, path := writeConfig(t, instancesConfig(`admin {
  advertise = "`+bad+`"
}`))
		_, diags := config.Load(path, config.Options{})
		if !diags.HasErrors() || diags[0].Subject.Start.Line != 3 {
			t.Errorf("advertise %q: %v, want an error on line 3", bad, diags)
		}
	}
}
