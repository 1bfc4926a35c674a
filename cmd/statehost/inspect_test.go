package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// inspectJSON runs `statehost inspect --config cfg --json` in-process and decodes its report.
func inspectJSON(t *testing.T, cfg string) (*inspectReport, result) {
	t.Helper()
	r := runCLI(t.Context(), "", "inspect", "--config", cfg, "--json", "--timeout", "20s")
	var rep inspectReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("inspect --json: %v\n%v", err, r)
	}
	return &rep, r
}

// changelogRows returns the changelog partitions of rep by topic/partition.
func changelogRows(rep *inspectReport) map[string]inspectChangelog {
	out := map[string]inspectChangelog{}
	for _, c := range rep.Changelogs {
		out[fmt.Sprintf("%s/%d", c.Topic, c.Partition)] = c
	}
	return out
}

func deref(p *int64) string {
	if p == nil {
		return "nil"
	}
	return fmt.Sprint(*p)
}

// inspect, while the word count runs and after it stopped: the stores, the task directories
// with their checkpoints, the changelogs' end offsets and the lag behind them (0 after a clean
// stop, the records written since when the changelog grew), and the local part alone when the
// broker is down.
func TestInspectProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the statehost program")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	b := startBroker(t, brokerOptions{})
	cfg := writeAppConfigWith(t, dir, b.addr, appOptions{commitInterval: e2eCommit})

	app := startApp(t, bin, cfg, "app")
	app.waitTasks(t, 60*time.Second)
	var lines []string
	for i := range 60 {
		lines = append(lines, fmt.Sprintf("word%d and word%d", i, i%7))
	}
	produceLines(t, bin, b.addr, "sentences", lines)
	waitCommitted(t, b.addr, e2eApp, "sentences", e2eRepart)

	// While it runs: the state directory is locked, the checkpoints come from the files.
	began := time.Now()
	rep, r := inspectJSON(t, cfg)
	t.Logf("inspect of a running instance: %v", time.Since(began))
	if r.code != exitOK || rep.State != "locked" || rep.BrokerError != "" || len(rep.Changelogs) != 3 {
		t.Fatalf("inspect of a running instance: state %q, broker error %q, %d changelog partitions\n%v", rep.State, rep.BrokerError, len(rep.Changelogs), r)
	}
	for _, c := range rep.Changelogs {
		if c.EndOffset == nil || c.Lag == nil || c.Checkpoint == nil || c.CheckpointFrom != "file" || *c.Lag < 0 || c.Processor != "count" || c.Store != "counts" {
			t.Errorf("running: %s/%d: checkpoint %s from %q, end %s, lag %s", c.Topic, c.Partition, deref(c.Checkpoint), c.CheckpointFrom, deref(c.EndOffset), deref(c.Lag))
		}
	}
	text := runCLI(t.Context(), "", "inspect", "--config", cfg)
	if !strings.Contains(text.stdout, "locked by a running statehost process; checkpoints from the .checkpoint files") {
		t.Errorf("inspect of a running instance does not say the state directory is locked:\n%v", text)
	}

	if code := app.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("app exited %d", code)
	}

	// After a clean stop: the database is read, and every checkpoint is at the end.
	rep, r = inspectJSON(t, cfg)
	if r.code != exitOK || rep.State != "open" || rep.BrokerError != "" {
		t.Fatalf("inspect after a stop: state %q, broker error %q\n%v", rep.State, rep.BrokerError, r)
	}
	if len(rep.Stores) != 1 || rep.Stores[0] != (inspectStore{Processor: "count", Store: "counts", Type: "keyvalue", Backend: "pebble", Logging: true, Changelog: e2eChangelog}) {
		t.Errorf("stores: %+v", rep.Stores)
	}
	tasks := map[string]inspectTask{}
	for _, tk := range rep.Tasks {
		tasks[tk.Task] = tk
	}
	ends := topicEnds(t, b.addr, e2eChangelog)
	for p, end := range ends {
		name := fmt.Sprintf("count_%d", p)
		tk, ok := tasks[name]
		if !ok || tk.Dir != filepath.Join(appStateDir(dir), "tasks", name) || !tk.Configured {
			t.Errorf("task %s: %+v", name, tk)
			continue
		}
		if end == 0 {
			continue // no word went to the partition
		}
		if len(tk.CheckpointFile) != 1 || tk.CheckpointFile[0] != (inspectCheckpoint{Topic: e2eChangelog, Partition: p, Offset: end - 1}) {
			t.Errorf("task %s: checkpoint file %+v, want %s/%d at %d", name, tk.CheckpointFile, e2eChangelog, p, end-1)
		}
		if len(tk.Database) != 1 || tk.Database[0].Store != "counts" || deref(tk.Database[0].Checkpoint) != fmt.Sprint(end-1) {
			t.Errorf("task %s: database %+v, want counts at %d", name, tk.Database, end-1)
		}
	}
	for i := range 4 {
		if _, ok := tasks[fmt.Sprintf("tokenize_%d", i)]; !ok {
			t.Errorf("no task directory tokenize_%d: %+v", i, rep.Tasks)
		}
	}
	rows := changelogRows(rep)
	for p, end := range ends {
		c := rows[fmt.Sprintf("%s/%d", e2eChangelog, p)]
		if deref(c.EndOffset) != fmt.Sprint(end) || deref(c.Lag) != "0" || deref(c.StartOffset) != "0" {
			t.Errorf("after a clean stop: %s/%d: end %s (want %d), lag %s (want 0)", e2eChangelog, p, deref(c.EndOffset), end, deref(c.Lag))
		}
		if end > 0 && (deref(c.Checkpoint) != fmt.Sprint(end-1) || c.CheckpointFrom != "database") {
			t.Errorf("after a clean stop: %s/%d: checkpoint %s from %q, want %d from the database", e2eChangelog, p, deref(c.Checkpoint), c.CheckpointFrom, end-1)
		}
	}
	text = runCLI(t.Context(), "", "inspect", "--config", cfg)
	for _, want := range []string{
		"Application wordcount (at_least_once)",
		"not in use; checkpoints from its database",
		"PROCESSOR  STORE   TYPE      BACKEND  LOGGING  CHANGELOG\ncount      counts  keyvalue  pebble   on       wordcount-counts-changelog\n",
		"TASK        DIRECTORY         CHECKPOINT FILE",
		"CHANGELOG                   PARTITION  START  END",
	} {
		if !strings.Contains(text.stdout, want) {
			t.Errorf("inspect prints no %q:\n%v", want, text)
		}
	}
	t.Logf("inspect after a stop:\n%s", text.stdout)

	// The changelog grows behind the local copy (another instance wrote to it): lag.
	fillChangelog(t, b.addr, e2eChangelog, 1, 25) // partition 0
	rep, _ = inspectJSON(t, cfg)
	rows = changelogRows(rep)
	if c := rows[e2eChangelog+"/0"]; deref(c.Lag) != "25" || deref(c.EndOffset) != fmt.Sprint(ends[0]+25) {
		t.Errorf("after 25 records more: %s/0: end %s, lag %s, want %d and 25", e2eChangelog, deref(c.EndOffset), deref(c.Lag), ends[0]+25)
	}
	if c := rows[e2eChangelog+"/1"]; deref(c.Lag) != "0" {
		t.Errorf("%s/1: lag %s, want 0", e2eChangelog, deref(c.Lag))
	}

	// Without the broker: the local part, and why the rest is missing.
	b.stop(t)
	rep, r = inspectJSON(t, cfg)
	if r.code != exitOK || !strings.Contains(rep.BrokerError, "no broker reachable at "+b.addr) {
		t.Errorf("without the broker: broker error %q\n%v", rep.BrokerError, r)
	}
	for _, c := range rep.Changelogs {
		if c.EndOffset != nil || c.Lag != nil || c.Checkpoint == nil {
			t.Errorf("without the broker: %s/%d: checkpoint %s, end %s, lag %s", c.Topic, c.Partition, deref(c.Checkpoint), deref(c.EndOffset), deref(c.Lag))
		}
	}
	text = runCLI(t.Context(), "", "inspect", "--config", cfg)
	if !strings.Contains(text.stdout, "unreachable, end offsets and lag unknown") || text.code != exitOK {
		t.Errorf("inspect without the broker:\n%v", text)
	}
}

// inspect of an application that never ran, with a memory store and a store without
// logging, and of a configuration with errors.
func TestInspectNoState(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.wasm"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "app.hcl")
	src := `application_id = "app"
state_dir      = "state"
kafka {
  brokers = ["127.0.0.1:1"]
}
topic "in" {
  partitions = 2
}
processor "p" {
  module = "p.wasm"
  inputs = ["in"]
  store "s" {
    backend = "memory"
  }
  store "w" {
    type        = "window"
    window_size = "1m"
    logging {
      enabled = false
    }
  }
}
`
	if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t.Context(), "", "inspect", "--config", cfg)
	head := "State directory " + filepath.Join(dir, "state", "app") + `: no local state
Brokers 127.0.0.1:1: unreachable, end offsets and lag unknown: no broker reachable at 127.0.0.1:1: `
	want := `
PROCESSOR  STORE  TYPE      BACKEND  LOGGING  CHANGELOG
p          s      keyvalue  memory   on       app-s-changelog
p          w      window    pebble   off      -

No task directories.

No changelog partitions known.
`
	if r.code != exitOK || !strings.Contains(r.stdout, head) || !strings.HasSuffix(r.stdout, want) {
		t.Errorf("inspect of an application that never ran:\n%v\nwant stdout with\n%s\nand ending with\n%s", r, head, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "state")); !os.IsNotExist(err) {
		t.Errorf("inspect created the state directory: %v", err)
	}

	// A checkpoint file that is not one names itself.
	task := filepath.Join(dir, "state", "app", "tasks", "p_1")
	if err := os.MkdirAll(task, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(task, ".checkpoint"), []byte("7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t.Context(), "", "inspect", "--config", cfg)
	if r.code != exitFailure || !strings.Contains(r.stdout, "problem: store: checkpoint file "+filepath.Join(task, ".checkpoint")+` line 1: unsupported version "7"`) {
		t.Errorf("inspect with a bad checkpoint file:\n%v", r)
	}

	// A configuration problem prints its diagnostics, as validate does.
	if err := os.WriteFile(cfg, []byte(strings.Replace(src, `"p.wasm"`, `"missing.wasm"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t.Context(), "", "inspect", "--config", cfg)
	if r.code != exitFailure || !strings.Contains(r.stderr, cfg+":10:") || !strings.Contains(r.stderr, "Module file not found") {
		t.Errorf("inspect of a configuration with an error:\n%v", r)
	}
}
