package main

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/statehost/statehost/host/runtime"
	"github.com/statehost/statehost/internal/wordgen"
)

// TestReloadUsage: reload without an admin listener, or with nothing listening, fails
// naming why.
func TestReloadUsage(t *testing.T) {
	cfg := writeDeployConfig(t, "")
	if r := runCLI(t.Context(), "", "reload", "--config", cfg); r.code != 1 || !strings.Contains(r.stderr, "statehost reload needs one") {
		t.Errorf("reload without an admin listener: %v", r)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg = writeDeployConfig(t, addr)
	if r := runCLI(t.Context(), "", "reload", "--config", cfg); r.code != 1 || !strings.Contains(r.stderr, addr) {
		t.Errorf("reload without a running application: %v, want exit 1 naming %s", r, addr)
	}
	if r := runCLI(t.Context(), "", "reload", "--config", cfg, "extra"); r.code != exitUsage {
		t.Errorf("reload with an argument: %v, want exit 2", r)
	}
}

// TestE2EReload runs the word count as a process under exactly-once with continuous input,
// its configuration file a symlink (the file watch sees the link, not a change of its target,
// so that SIGHUP and statehost reload do the reloads here), and reloads it three times:
// SIGHUP with a new commit_interval (a config_reloaded event, reason "signal"); statehost
// reload --config F with a new processor (it prints the change, exits 0, and the processor's
// tasks run); statehost reload with a changed partition count (it prints the file and line,
// exits 1, and the application runs on: config_refused). The counts stay exact.
func TestE2EReload(t *testing.T) {
	bin, addr, cfg, dir := e2eSetup(t, true)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := ln.Addr().String()
	ln.Close()
	// exactly-once at its default commit_interval (100ms), the admin listener on a port of
	// its own, and the file behind a symlink.
	src := readFile(t, cfg)
	src = strings.Replace(src, "commit_interval = \"200ms\"\n", "processing_guarantee = \"exactly_once\"\n", 1)
	src = strings.Replace(src, "admin {\n  listen = \"\"\n}", "admin {\n  listen = \""+listen+"\"\n}", 1)
	if !strings.Contains(src, listen) || !strings.Contains(src, "exactly_once") {
		t.Fatalf("the word-count config changed shape:\n%s", src)
	}
	target := filepath.Join(dir, "real.hcl")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(target, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(src)
	if err := os.Remove(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, cfg); err != nil {
		t.Fatal(err)
	}
	app := startApp(t, bin, cfg, "app")
	app.waitTasks(t, 60*time.Second)
	lines, ref := wordgen.Sentences(3000, 7)
	prod := startProducer(t, addr, producerOptions{every: 50 * time.Millisecond}, batchesOf(sentenceRecords(lines), 20))

	// 1. SIGHUP.
	src = strings.Replace(src, "processing_guarantee = \"exactly_once\"\n", "processing_guarantee = \"exactly_once\"\ncommit_interval = \"200ms\"\n", 1)
	write(src)
	if err := app.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	app.waitFor(t, 30*time.Second, "the reload of SIGHUP", func() bool { return len(app.events(runtime.EventConfigReloaded)) == 1 })
	if e := app.events(runtime.EventConfigReloaded)[0]; e.Reason != "signal" || e.File != cfg || !slices.Equal(e.Changes, []string{"commit_interval 100ms -> 200ms"}) {
		t.Errorf("config_reloaded %+v, want commit_interval 100ms -> 200ms by a signal", e)
	}

	// 2. statehost reload: a new processor.
	src += "processor \"echo\" {\n  module  = \"" + buildModules(t)["tokenize"] + "\"\n  inputs  = [\"sentences\"]\n  outputs = [\"echoed\"]\n}\n"
	write(src)
	r := runCLI(t.Context(), "", "reload", "--config", cfg)
	if r.code != 0 || r.stdout != cfg+": reloaded\n  processor \"echo\" added\n  processor \"echo\" waits for every instance of the group to have it\n" &&
		r.stdout != cfg+": reloaded\n  processor \"echo\" added\n" {
		t.Errorf("reload adding a processor: %v", r)
	}
	app.waitFor(t, 60*time.Second, "echo enabled and running", func() bool {
		n := 0
		for _, e := range app.events(runtime.EventTaskRunning) {
			if e.Processor == "echo" {
				n++
			}
		}
		return len(app.events(runtime.EventProcessorEnabled)) == 1 && n == 4
	})

	// 3. statehost reload: refused.
	refused := strings.Replace(src, "  partitions = 4", "  partitions = 8", 1)
	write(refused)
	r = runCLI(t.Context(), "", "reload", "--config", cfg)
	line := strings.Count(refused[:strings.Index(refused, "  partitions = 8")], "\n") + 1
	if want := cfg + ":" + strconv.Itoa(line) + ":"; r.code != 1 || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "Cannot change a topic's partitions") {
		t.Errorf("reload with a changed partition count: %v, want exit 1 and %s", r, want)
	}
	if es := app.events(runtime.EventConfigRefused); len(es) != 1 || len(es[0].Diagnostics) != 1 || es[0].Diagnostics[0].Line != line {
		t.Errorf("config_refused events %+v, want one with the diagnostic at line %d", es, line)
	}

	prod.wait(t, 2*time.Minute)
	crashWaitProcessed(t, addr, e2eApp, 90*time.Second, "sentences", e2eRepart)
	checkWordCountTopics(t, addr, ref, true)
	stopClean(t, app)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
