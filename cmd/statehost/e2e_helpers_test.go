package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/statehost/statehost/pluginsdk/wasmbuild"
)

// The end-to-end tests run the statehost program as processes: a broker, one or more apps
// running the word count (tokenize and count), and the produce command.

const (
	e2eApp       = "wordcount"
	e2eChangelog = e2eApp + "-counts-changelog"
	e2eRepart    = e2eApp + "-words-repartition"
	e2eTasks     = 7 // tokenize on the 4 partitions of sentences, count on the 3 of the repartition topic
	e2eCommit    = 200 * time.Millisecond
)

var (
	modulesOnce sync.Once
	modulesErr  error
	e2eModules  map[string]string // plugin name -> .wasm path
)

// buildModules builds the tokenize, count and windowcount plugins once for the tests of the package, into
// the directory of the test binary (removed by TestMain).
func buildModules(t testing.TB) map[string]string {
	t.Helper()
	buildBinary(t)
	modulesOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		mods := map[string]string{}
		errs := make(chan error, 3)
		var wg sync.WaitGroup
		for _, name := range []string{"tokenize", "count", "windowcount"} {
			out := filepath.Join(binaryDir, name+".wasm")
			mods[name] = out
			wg.Go(func() {
				if err := wasmbuild.Go(ctx, filepath.Join("..", "..", "plugins", name), out); err != nil {
					errs <- fmt.Errorf("build %s: %w", name, err)
				}
			})
		}
		wg.Wait()
		close(errs)
		modulesErr = <-errs
		e2eModules = mods
	})
	if modulesErr != nil {
		t.Fatal(modulesErr)
	}
	return e2eModules
}

// writeAppConfig writes the word-count configuration for the broker at addr into dir and
// returns its path; the state directory is dir/state, so the app's is dir/state/wordcount.
func writeAppConfig(t testing.TB, dir, addr string, logging bool) string {
	t.Helper()
	return writeAppConfigWith(t, dir, addr, appOptions{commitInterval: e2eCommit, loggingDisabled: !logging})
}

// appOptions vary the word-count configuration that writeAppConfigWith writes.
type appOptions struct {
	guarantee       string        // processing_guarantee; "": the default
	commitInterval  time.Duration // 0: the guarantee's default
	sessionTimeout  time.Duration // 0: the default
	loggingDisabled bool
	admin           bool   // an admin listener on a free port of 127.0.0.1 (its admin_listening event); false: none
	standbyReplicas int    // standby_replicas; 0: the default (none)
	recoveryLag     int64  // acceptable_recovery_lag; 0: the default
	kafka           string // more lines of the kafka block (tls, sasl, client settings)
	keepDead        bool   // remove_dead_members = false: a dead instance's tasks wait for its session timeout
	// embedded: no kafka block; the app runs the embedded broker, listening on the address
	// given to writeAppConfigWith, with sync_writes = syncWrites.
	embedded, syncWrites bool
}

// writeAppConfigWith writes the word-count configuration with the options o into dir (created
// when missing) as app.hcl, and returns its path; the state directory is dir/state.
func writeAppConfigWith(t testing.TB, dir, addr string, o appOptions) string {
	t.Helper()
	mods := buildModules(t)
	var top strings.Builder
	if o.guarantee != "" {
		fmt.Fprintf(&top, "processing_guarantee = %q\n", o.guarantee)
	}
	if o.commitInterval > 0 {
		fmt.Fprintf(&top, "commit_interval = %q\n", o.commitInterval.String())
	}
	if o.sessionTimeout > 0 {
		fmt.Fprintf(&top, "session_timeout = %q\n", o.sessionTimeout.String())
	}
	if o.standbyReplicas > 0 {
		fmt.Fprintf(&top, "standby_replicas = %d\n", o.standbyReplicas)
	}
	if o.keepDead {
		top.WriteString("remove_dead_members = false\n")
	}
	if o.recoveryLag > 0 {
		fmt.Fprintf(&top, "acceptable_recovery_lag = %d\n", o.recoveryLag)
	}
	listen := ""
	if o.admin {
		listen = "127.0.0.1:0"
	}
	logBlock := "logging {\n      enabled      = true\n      topic_config = { \"min.compaction.lag.ms\" = \"0\" }\n    }"
	if o.loggingDisabled {
		logBlock = "logging {\n      enabled = false\n    }"
	}
	brokers := fmt.Sprintf("kafka {\n  brokers = [%q]\n%s}\n", addr, o.kafka)
	if o.embedded {
		brokers = fmt.Sprintf("embedded_broker {\n  listen      = %q\n  sync_writes = %t\n}\n", addr, o.syncWrites)
	}
	src := fmt.Sprintf(`application_id  = %q
state_dir       = %q
%s%sadmin {
  listen = %q
}
topic "sentences" {
  partitions = 4
}
repartition "words" {
  partitions = 3
}
processor "tokenize" {
  module  = %q
  inputs  = ["sentences"]
  outputs = ["words"]
}
processor "count" {
  module  = %q
  inputs  = ["words"]
  outputs = ["word-counts"]
  store "counts" {
    %s
  }
}
`, e2eApp, filepath.Join(dir, "state"), top.String(), brokers, listen, mods["tokenize"], mods["count"], logBlock)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "app.hcl")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// appStateDir is the state directory of the app configured by writeAppConfig in dir.
func appStateDir(dir string) string { return filepath.Join(dir, "state", e2eApp) }

// produceLines writes lines to topic with the `statehost produce` command as a process.
func produceLines(t testing.TB, bin, addr, topic string, lines []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "produce", "--brokers", addr, topic)
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	out, err := cmd.CombinedOutput()
	if want := fmt.Sprintf("produced %d records to %s", len(lines), topic); err != nil || !strings.Contains(string(out), want) {
		t.Fatalf("statehost produce: %v\n%s\nwant %q", err, out, want)
	}
}

// addCounts adds more to ref.
func addCounts(ref, more map[string]int) {
	for k, v := range more {
		ref[k] += v
	}
}

// topicEnds returns the end offsets of topic by partition.
func topicEnds(t testing.TB, addr, topic string) map[int32]int64 {
	t.Helper()
	cl := testClient(t, addr)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	out := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("end offset of %s partition %d: %v", topic, o.Partition, o.Err)
		}
		out[o.Partition] = o.Offset
	})
	return out
}

// waitCommitted waits until the group's committed offsets equal the end offsets of the
// topics, on every partition.
func waitCommitted(t testing.TB, addr, group string, topics ...string) {
	t.Helper()
	cl := testClient(t, addr)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(60 * time.Second)
	for {
		var behind []string
		resp, err := adm.FetchOffsets(t.Context(), group)
		if err != nil {
			t.Fatal(err)
		}
		for _, topic := range topics {
			for p, end := range topicEnds(t, addr, topic) {
				o, ok := resp.Lookup(topic, p)
				at := int64(0)
				if ok && o.Err == nil {
					at = o.At
				}
				if at != end {
					behind = append(behind, fmt.Sprintf("%s/%d committed %d, end %d", topic, p, at, end))
				}
			}
		}
		if len(behind) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s: offsets not committed to the end: %v", group, behind)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
