package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
)

// errorLines returns the "file:line:col: error: summary" lines of a command's diagnostics.
func errorLines(stderr string) []string {
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.Contains(l, ": error: ") && !strings.HasPrefix(l, " ") {
			out = append(out, l)
		}
	}
	return out
}

// TestE2EValidateFindsWhatRunMeets (issue 21, case 8): what run used to meet later, after it
// had created topics or started the broker, and without file:line:col, validate now reports
// with its range, and run the same at once (exit 1 from both, the same diagnostics): a cycle
// of processors, a state_dir that is a file, the admin listener on the embedded broker's port,
// session_timeout = "1ns", a partition count too large for Kafka, and module files that
// cannot be read.
func TestE2EValidateFindsWhatRunMeets(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the statehost program")
	}
	bin := buildBinary(t)
	mod := hostileModule(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a-file"), []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	// /proc/self/mem is a regular file whose first byte cannot be read (EIO), even by root.
	if err := os.Symlink("/proc/self/mem", filepath.Join(dir, "mem.wasm")); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()

	for _, tc := range []struct {
		name, src string
		want      []string // LINE:COL: error: SUMMARY, in order
	}{
		{"cycle", `application_id = "loop"
state_dir      = "loop-state"
kafka {
  brokers = ["127.0.0.1:1"]
}
processor "p1" {
  module  = "{{mod}}"
  inputs  = ["in"]
  outputs = ["mid"]
}
processor "p2" {
  module  = "{{mod}}"
  inputs  = ["mid"]
  outputs = ["in"]
}
`, []string{"9:14: error: Cycle of processors"}},
		{"state_dir_file", `application_id = "files"
state_dir      = "a-file"
processor "p" {
  module = "{{mod}}"
  inputs = ["in"]
}
`, []string{"2:18: error: Not a directory"}},
		{"admin_on_broker_port", `application_id = "ports"
state_dir      = "ports-state"
embedded_broker {
  listen = "127.0.0.1:{{port}}"
}
admin {
  listen = "127.0.0.1:{{port}}"
}
processor "p" {
  module = "{{mod}}"
  inputs = ["in"]
}
`, []string{"4:12: error: Listen address clash", "7:12: error: Listen address clash"}},
		{"session_timeout", `application_id  = "session"
state_dir       = "session-state"
session_timeout = "1ns"
kafka {
  brokers = ["127.0.0.1:1"]
}
processor "p" {
  module = "{{mod}}"
  inputs = ["in"]
}
`, []string{"3:19: error: Session timeout too short"}},
		{"partitions", `application_id = "parts"
state_dir      = "parts-state"
kafka {
  brokers = ["127.0.0.1:1"]
}
topic "in" {
  partitions = 99999999999999999999
}
processor "p" {
  module = "{{mod}}"
  inputs = ["in"]
}
`, []string{"7:16: error: Partition count too large"}},
		{"unreadable_module", `application_id = "unreadable"
state_dir      = "unreadable-state"
kafka {
  brokers = ["127.0.0.1:1"]
}
processor "p" {
  module = "mem.wasm"
  inputs = ["in"]
}
`, []string{"7:12: error: Module file not readable"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.NewReplacer("{{mod}}", mod, "{{port}}", fmt.Sprint(port)).Replace(tc.src)
			cfg := writeFile(t, dir, tc.name+".hcl", src)
			var want []string
			for _, w := range tc.want {
				want = append(want, cfg+":"+w)
			}
			val := runProcess(t, bin, "validate", "--config", cfg)
			if got := errorLines(val.stderr); val.code != 1 || !slices.Equal(got, want) {
				t.Errorf("validate: %v\nerrors %q, want exit 1 and %q", val, got, want)
			}
			run := runProcess(t, bin, "run", "--config", cfg)
			if run.code != 1 || run.stderr != val.stderr {
				t.Errorf("run: %v\nwant exit 1 and the diagnostics of validate:\n%s", run, val.stderr)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "ports-state")); err == nil {
		t.Error("run with the admin listener on the broker's port started the embedded broker")
	}
	// The detail is wrapped at 100 columns.
	out := runProcess(t, bin, "validate", "--config", filepath.Join(dir, "unreadable_module.hcl")).stderr
	if !strings.Contains(strings.Join(strings.Fields(out), " "), "cannot be read: read "+filepath.Join(dir, "mem.wasm")+": input/output error.") {
		t.Errorf("the unreadable module's diagnostic lacks the operating system's error:\n%s", out)
	}
}

// TestE2ERunReportsBrokerProblemsAtOnce (issue 21, case 8): run reports every problem of the
// configuration against the broker in one go, each with file:line:col, and creates nothing:
// a session timeout the broker does not allow (45 minutes: group.max.session.timeout.ms is 5
// minutes on the statehost broker, 30 by default on Apache Kafka), inputs that are not co-partitioned, an existing
// changelog with another partition count than its processor's inputs, and an input topic that
// does not exist. validate, which does not ask the broker, finds the file valid.
func TestE2ERunReportsBrokerProblemsAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the statehost program")
	}
	bin := buildBinary(t)
	mod := hostileModule(t)
	dir := t.TempDir()
	broker := startBroker(t, brokerOptions{})
	createTopics(t, broker.addr, map[string]int{"a": 4, "b": 3, "brk-counts-changelog": 3})
	cfg := writeFile(t, dir, "app.hcl", fmt.Sprintf(`application_id  = "brk"
state_dir       = "state"
session_timeout = "45m"
kafka {
  brokers = [%[1]q]
}
admin {
  listen = ""
}
processor "join" {
  module = %[2]q
  inputs = ["a", "b"]
}
processor "count" {
  module  = %[2]q
  inputs  = ["a"]
  outputs = ["counted"]
  store "counts" {}
}
processor "other" {
  module = %[2]q
  inputs = ["missing"]
}
`, broker.addr, mod))
	val := runProcess(t, bin, "validate", "--config", cfg)
	if val.code != 0 {
		t.Errorf("validate: %v\nwant exit 0: nothing in the file is wrong without the broker", val)
	}
	run := runProcess(t, bin, "run", "--config", cfg)
	want := []string{
		cfg + ":3:19: error: Session timeout outside the broker's range",
		cfg + ":12:3: error: Inputs not co-partitioned",
		cfg + ":18:3: error: Changelog partition mismatch",
		cfg + ":22:13: error: Unknown input topic",
	}
	if got := errorLines(run.stderr); run.code != 1 || !slices.Equal(got, want) {
		t.Errorf("run: %v\nerrors %q\nwant exit 1 and %q", run, got, want)
	}
	wantLines(t, "run", run.stderr,
		`   3: session_timeout = "45m"`,
		`  12:   inputs = ["a", "b"]`,
		`  18:   store "counts" {}`,
		`  22:   inputs = ["missing"]`)
	cl := testClient(t, broker.addr)
	defer cl.Close()
	topics, err := kadm.NewClient(cl).ListTopics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if names := topics.Names(); !slices.Equal(names, []string{"a", "b", "brk-counts-changelog"}) {
		t.Errorf("topics after run: %v, want only those made before it", names)
	}
}
