package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/statehost/statehost/host/runtime"
	"github.com/statehost/statehost/internal/topictest"
	"github.com/statehost/statehost/internal/wordgen"
	"github.com/statehost/statehost/store"
)

// e2eSetup builds the program and the plugins, starts a broker process and writes the
// word-count config for it into a temporary directory. It returns the binary, the broker's
// address, the config file and its directory.
func e2eSetup(t *testing.T, logging bool) (bin, addr, cfg, dir string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the statehost program")
	}
	bin = buildBinary(t)
	buildModules(t)
	dir = t.TempDir()
	broker := startBroker(t, brokerOptions{})
	return bin, broker.addr, writeAppConfig(t, dir, broker.addr, logging), dir
}

// TestE2EWordCount runs the word count with a broker process and an app process, produces
// with the produce command, and checks the output topic and the changelog against the
// reference counts, the committed offsets, and a clean stop on SIGTERM.
func TestE2EWordCount(t *testing.T) {
	bin, addr, cfg, _ := e2eSetup(t, true)
	app := startApp(t, bin, cfg, "app")
	app.waitTasks(t, 60*time.Second)
	if es := app.events(runtime.EventRunning); len(es) != 1 {
		t.Errorf("running events: %+v, want one", es)
	}

	lines, ref := wordgen.Sentences(3000, 1)
	produceLines(t, bin, addr, "sentences", lines)
	want := wordgen.Strings(ref)
	waitCounts(t, addr, "word-counts", want)
	got, n := topictest.Latest(t, []string{addr}, e2eChangelog)
	if !maps.Equal(got, want) {
		t.Errorf("changelog %s: %d keys differ from the reference's %d", e2eChangelog, len(got), len(want))
	}
	words := 0
	for _, c := range ref {
		words += c
	}
	if n != words {
		t.Errorf("changelog has %d records, want one per word: %d", n, words)
	}
	waitCommitted(t, addr, e2eApp, "sentences", e2eRepart)
	stopClean(t, app)
}

// TestE2EKillDeleteStateRestore kills the app after it committed everything, deletes its
// state directory, and checks that the restarted app restores the whole changelog and goes
// on counting exactly.
func TestE2EKillDeleteStateRestore(t *testing.T) {
	bin, addr, cfg, dir := e2eSetup(t, true)
	app := startApp(t, bin, cfg, "first app")
	app.waitTasks(t, 60*time.Second)
	lines, ref := wordgen.Sentences(2000, 2)
	produceLines(t, bin, addr, "sentences", lines)
	waitCounts(t, addr, "word-counts", wordgen.Strings(ref))
	waitCommitted(t, addr, e2eApp, "sentences", e2eRepart)
	kill(t, app)

	if err := os.RemoveAll(appStateDir(dir)); err != nil {
		t.Fatal(err)
	}
	_, changelogRecords := topictest.Latest(t, []string{addr}, e2eChangelog)
	ends := topicEnds(t, addr, e2eChangelog)
	restart := time.Now()
	app = startApp(t, bin, cfg, "restarted app")
	// The killed member leaves the group when its session (10 s) times out.
	app.waitTasks(t, 60*time.Second)
	t.Logf("the restarted app ran its tasks after %v, having restored %d records", time.Since(restart).Round(time.Millisecond), app.restoredRecords())
	started, done := app.restores()
	if len(done) != len(ends) {
		t.Errorf("%d restore_done events, want one per changelog partition (%d)", len(done), len(ends))
	}
	for _, l := range started {
		if l.Offset != 0 || l.EndOffset != ends[l.Partition] {
			t.Errorf("restore of partition %d started at %d to %d, want from 0 to the changelog's end %d",
				l.Partition, l.Offset, l.EndOffset, ends[l.Partition])
		}
	}
	if got := app.restoredRecords(); got != int64(changelogRecords) || got == 0 {
		t.Errorf("restored %d records, want the %d of the changelog", got, changelogRecords)
	}

	lines, more := wordgen.Sentences(1000, 3)
	produceLines(t, bin, addr, "sentences", lines)
	addCounts(ref, more)
	want := wordgen.Strings(ref)
	waitCounts(t, addr, "word-counts", want)
	if got, _ := topictest.Latest(t, []string{addr}, e2eChangelog); !maps.Equal(got, want) {
		t.Errorf("changelog: %d keys, differs from the reference's %d", len(got), len(want))
	}
	stopClean(t, app)
}

// checkpointTail reads the .checkpoint files of the count tasks in the state directory and
// returns how many changelog records lie after them.
func checkpointTail(t *testing.T, stateDir string, ends map[int32]int64) int64 {
	t.Helper()
	var tail int64
	for p, end := range ends {
		path := filepath.Join(stateDir, "tasks", fmt.Sprintf("count_%d", p), store.CheckpointFileName)
		entries, err := store.ReadCheckpointFile(path)
		if err != nil {
			t.Fatalf("checkpoint of count_%d: %v", p, err)
		}
		next := int64(0)
		for _, e := range entries {
			if e.Topic == e2eChangelog && e.Partition == p {
				next = e.Offset + 1
			}
		}
		if end > 0 && next == 0 {
			t.Errorf("count_%d has no checkpoint of %s, whose end is %d", p, e2eChangelog, end)
		}
		tail += end - next
	}
	return tail
}

// sum adds up the offsets of a partition map.
func sum(m map[int32]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// TestE2ECleanRestartReplaysOnlyTail checks that a restart after SIGTERM replays nothing of
// the changelog, that a restart after a SIGKILL that follows a commit replays at most the
// changelog tail after the exported .checkpoint files (commits are fsynced before the files
// are written), and that the counts stay exact.
func TestE2ECleanRestartReplaysOnlyTail(t *testing.T) {
	bin, addr, cfg, dir := e2eSetup(t, true)
	app := startApp(t, bin, cfg, "first app")
	app.waitTasks(t, 60*time.Second)
	lines, ref := wordgen.Sentences(2000, 4)
	produceLines(t, bin, addr, "sentences", lines)
	waitCounts(t, addr, "word-counts", wordgen.Strings(ref))
	stopClean(t, app)

	cleanEnds := topicEnds(t, addr, e2eChangelog)
	app = startApp(t, bin, cfg, "app restarted after SIGTERM")
	app.waitTasks(t, 60*time.Second)
	if got := app.restoredRecords(); got != 0 {
		t.Errorf("restart after SIGTERM restored %d records, want 0", got)
	}
	started, done := app.restores()
	if len(started) != len(cleanEnds) || len(done) != len(cleanEnds) {
		t.Errorf("%d restore_started and %d restore_done events, want %d each", len(started), len(done), len(cleanEnds))
	}
	for _, l := range started {
		if end := cleanEnds[l.Partition]; l.Offset != end || l.EndOffset != end {
			t.Errorf("restore of partition %d after SIGTERM: from %d to %d, want from the end %d", l.Partition, l.Offset, l.EndOffset, end)
		}
	}

	lines, more := wordgen.Sentences(1000, 5)
	produceLines(t, bin, addr, "sentences", lines)
	addCounts(ref, more)
	waitCounts(t, addr, "word-counts", wordgen.Strings(ref))
	waitCommitted(t, addr, e2eApp, "sentences", e2eRepart)
	// The state and checkpoints of that commit were applied before the offsets were
	// committed; let one more interval pass, then the process dies without a word.
	time.Sleep(2 * e2eCommit)
	kill(t, app)

	ends := topicEnds(t, addr, e2eChangelog)
	total, sinceClean := sum(ends), sum(ends)-sum(cleanEnds)
	tail := checkpointTail(t, appStateDir(dir), ends)
	app = startApp(t, bin, cfg, "app restarted after SIGKILL")
	app.waitTasks(t, 60*time.Second)
	got := app.restoredRecords()
	t.Logf("changelog: %d records, %d since the clean stop, %d after the exported .checkpoint files; restored %d", total, sinceClean, tail, got)
	if got > sinceClean || got >= total/2 {
		t.Errorf("restart after SIGKILL restored %d records, want at most the %d logged since the clean stop (changelog: %d)", got, sinceClean, total)
	}
	if got > tail {
		// Commits are synced (runtime.Options.NoSyncCommits is off): a kill after a commit
		// loses none of it, so the restore replays at most what the .checkpoint files, written
		// after each synced commit, leave out.
		t.Errorf("restart after SIGKILL restored %d records, more than the %d after the .checkpoint files", got, tail)
	}
	started, _ = app.restores()
	if len(started) != len(ends) {
		t.Errorf("%d restore_started events, want %d", len(started), len(ends))
	}
	for _, l := range started {
		if ends[l.Partition] > 0 && l.Offset < cleanEnds[l.Partition] {
			t.Errorf("restore of partition %d (end %d) started at %d, before the checkpoint %d of the clean stop",
				l.Partition, ends[l.Partition], l.Offset, cleanEnds[l.Partition])
		}
	}

	lines, more = wordgen.Sentences(500, 6)
	produceLines(t, bin, addr, "sentences", lines)
	addCounts(ref, more)
	want := wordgen.Strings(ref)
	waitCounts(t, addr, "word-counts", want)
	if got, _ := topictest.Latest(t, []string{addr}, e2eChangelog); !maps.Equal(got, want) {
		t.Errorf("changelog: %d keys, differs from the reference's %d", len(got), len(want))
	}
	stopClean(t, app)
}

// TestE2ELoggingDisabled checks that a store without logging has no changelog and comes back
// empty once its state directory is deleted.
func TestE2ELoggingDisabled(t *testing.T) {
	bin, addr, cfg, dir := e2eSetup(t, false)
	app := startApp(t, bin, cfg, "first app")
	app.waitTasks(t, 60*time.Second)
	lines, ref := wordgen.Sentences(1000, 7)
	lines = append(lines, "a a a")
	ref["a"] = 3
	produceLines(t, bin, addr, "sentences", lines)
	waitCounts(t, addr, "word-counts", wordgen.Strings(ref))
	if _, done := app.restores(); len(done) != 0 {
		t.Errorf("a store without logging was restored: %+v", done)
	}
	stopClean(t, app)

	if err := os.RemoveAll(appStateDir(dir)); err != nil {
		t.Fatal(err)
	}
	app = startApp(t, bin, cfg, "restarted app")
	app.waitTasks(t, 60*time.Second)
	produceLines(t, bin, addr, "sentences", []string{"a"})
	ref["a"] = 1
	waitCounts(t, addr, "word-counts", wordgen.Strings(ref))

	cl := testClient(t, addr)
	defer cl.Close()
	topics, err := kadm.NewClient(cl).ListTopics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range topics.Names() {
		if strings.HasSuffix(name, "-changelog") {
			t.Errorf("a store with logging disabled has a changelog topic: %s", name)
		}
	}
	stopClean(t, app)
}

// cliResult is what a statehost process printed and its exit code.
type cliResult struct {
	code           int
	stdout, stderr string
}

func (r cliResult) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// runProcess runs the program with args and returns what it printed.
func runProcess(t *testing.T, bin string, args ...string) cliResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var stdout, stderr syncBuffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := cliResult{stdout: stdout.String(), stderr: stderr.String()}
	if exit, ok := err.(*exec.ExitError); ok {
		r.code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("statehost %q: %v", args, err)
	}
	return r
}

// writeFile writes src to dir/name and returns its path.
func writeFile(t *testing.T, dir, name, src string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// wantLines checks that every line of want is a whole line of out.
func wantLines(t *testing.T, what, out string, want ...string) {
	t.Helper()
	lines := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		lines[l] = true
	}
	for _, w := range want {
		if !lines[w] {
			t.Errorf("%s: no line %q in:\n%s", what, w, out)
		}
	}
}

// TestE2EConfigErrors checks the diagnostics of run and validate: for a file with several
// errors, for a module that is not wasm, for an input topic the broker lacks, and validate's
// success on a valid file.
func TestE2EConfigErrors(t *testing.T) {
	bin, addr, valid, dir := e2eSetup(t, true)
	mods := buildModules(t)

	bad := writeFile(t, dir, "bad.hcl", fmt.Sprintf(`application_id  = "wordcount"
state_dir       = "state"
commit_interval = "soon"
bogus_attr      = 1

kafka {
  brokers = [%[1]q]
}
processor "tokenize" {
  module  = %[2]q
  inputs  = ["sentences"]
}
admin { listen = "" }
processor "tokenize" {
  module  = %[2]q
  inputs  = ["sentences"]
}
`, addr, mods["tokenize"]))
	wantDiags := []string{
		bad + `:3:19: error: Invalid duration`,
		`   3: commit_interval = "soon"`,
		bad + `:4:1: error: Unsupported argument`,
		`   4: bogus_attr      = 1`,
		`An argument named "bogus_attr" is not expected here.`,
		bad + `:14:1: error: Duplicate processor`,
		`  on ` + bad + ` line 14, in processor "tokenize":`,
		`  14: processor "tokenize" {`,
	}
	run := runProcess(t, bin, "run", "--config", bad)
	if run.code != 1 {
		t.Errorf("run with a bad config: %v\nwant exit 1", run)
	}
	wantLines(t, "run with a bad config", run.stderr, wantDiags...)
	if n := strings.Count(run.stderr, ": error: "); n != 3 {
		t.Errorf("run printed %d errors, want 3:\n%s", n, run.stderr)
	}
	if !strings.Contains(run.stderr, "is already defined at "+bad+":9") {
		t.Errorf("the duplicate's diagnostic does not point to the first definition:\n%s", run.stderr)
	}
	val := runProcess(t, bin, "validate", "--config", bad)
	if val.code != 1 || val.stderr != run.stderr || val.stdout != "" {
		t.Errorf("validate with a bad config: %v\nwant exit 1 and the same diagnostics as run:\n%s", val, run.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "state")); err == nil {
		t.Error("run with a bad config created the state directory")
	}

	// A module that is not WebAssembly.
	garbage := writeFile(t, dir, "garbage.wasm", "\x7fELF this is no wasm module\x00\x01\x02")
	garbageCfg := writeFile(t, dir, "garbage.hcl", fmt.Sprintf(`application_id = "garbage"
state_dir      = "garbage-state"
kafka {
  brokers = [%q]
}
admin { listen = "" }
processor "tokenize" {
  module = "garbage.wasm"
  inputs = ["sentences"]
}
`, addr))
	val = runProcess(t, bin, "validate", "--config", garbageCfg)
	wantLines(t, "validate with a garbage module", val.stderr,
		garbageCfg+`:8:12: error: Invalid module`, `   8:   module = "garbage.wasm"`)
	if val.code != 1 || !strings.Contains(val.stderr, garbage) {
		t.Errorf("validate with a garbage module: %v\nwant exit 1 and the module's path %s", val, garbage)
	}
	run = runProcess(t, bin, "run", "--config", garbageCfg)
	if run.code != 1 {
		t.Errorf("run with a garbage module: %v\nwant exit 1", run)
	}
	wantLines(t, "run with a garbage module", run.stderr, garbageCfg+`:8:12: error: Invalid module`)

	// The valid word-count config.
	val = runProcess(t, bin, "validate", "--config", valid)
	if val.code != 0 || !strings.Contains(val.stdout, valid+`: configuration of "wordcount" is valid (2 processors)`) {
		t.Errorf("validate with a valid config: %v", val)
	}

	// An input topic that the broker lacks and no topic block declares.
	missing := writeFile(t, dir, "missing.hcl", fmt.Sprintf(`application_id = "missing"
state_dir      = "missing-state"
kafka {
  brokers = [%q]
}
admin { listen = "" }
processor "tokenize" {
  module  = %q
  inputs  = ["no-such-topic"]
  outputs = ["tokens"]
}
`, addr, mods["tokenize"]))
	run = runProcess(t, bin, "run", "--config", missing)
	if run.code != 1 || !strings.Contains(run.stderr, `reads topic "no-such-topic", which neither exists on the broker`) {
		t.Errorf("run with a missing input topic: %v\nwant exit 1 and a diagnostic naming no-such-topic", run)
	}
	wantLines(t, "run with a missing input topic", run.stderr,
		missing+`:9:14: error: Unknown input topic`, `   9:   inputs  = ["no-such-topic"]`)
	cl := testClient(t, addr)
	defer cl.Close()
	topics, err := kadm.NewClient(cl).ListTopics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if topics.Has("tokens") || topics.Has("no-such-topic") {
		t.Errorf("run with a missing input created topics: %v", topics.Names())
	}
}

// TestE2EStateDirLocked starts a second app on the state directory of a running one: it
// fails and says why, and the first goes on.
func TestE2EStateDirLocked(t *testing.T) {
	bin, addr, cfg, dir := e2eSetup(t, true)
	first := startApp(t, bin, cfg, "first app")
	first.waitTasks(t, 60*time.Second)

	second := startApp(t, bin, cfg, "second app")
	if code := second.wait(t, 60*time.Second); code != 1 {
		t.Errorf("second app on the same state directory exited %d, want 1", code)
	}
	msg := "state directory " + appStateDir(dir) + " is used by another statehost process"
	if _, got := second.stoppedError(t); !strings.Contains(got, msg) {
		t.Errorf("second app's exited event has the error %q, want one with %q", got, msg)
	}

	if first.exited() {
		t.Fatalf("the first app exited %d", first.code)
	}
	lines, ref := wordgen.Sentences(500, 8)
	produceLines(t, bin, addr, "sentences", lines)
	waitCounts(t, addr, "word-counts", wordgen.Strings(ref))
	if n := len(first.events(runtime.EventTaskRunning)); n != e2eTasks {
		t.Errorf("the first app started tasks %d times, want %d: it was disturbed", n, e2eTasks)
	}
	stopClean(t, first)
}
