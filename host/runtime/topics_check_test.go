package runtime

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestConfigAgainstBrokerAllAtOnce: New reports every problem of the configuration against
// the broker in one *DiagnosticsError, each on its range and in file order, and creates no
// topic: a session timeout below the broker's group.min.session.timeout.ms, a topic config
// the broker refuses (answered here as Kafka answers an invalid value, INVALID_CONFIG: kfake
// accepts any), inputs that are not co-partitioned, an existing changelog with another
// partition count than its processor's inputs, and an input topic that does not exist.
func TestConfigAgainstBrokerAllAtOnce(t *testing.T) {
	c, brokers := kfakeCluster(t)
	_, adm := client(t, brokers)
	for name, n := range map[string]int32{"a": 4, "b": 3, "all-counts-changelog": 3} {
		if _, err := adm.CreateTopic(context.Background(), n, -1, nil, name); err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu      sync.Mutex
		creates []string // the topics of CreateTopics requests that were not validate-only
	)
	c.ControlKey(int16(kmsg.CreateTopics), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.CreateTopicsRequest)
		resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
		bad := false
		for _, rt := range req.Topics {
			if !req.ValidateOnly {
				mu.Lock()
				creates = append(creates, rt.Topic)
				mu.Unlock()
			}
			st := kmsg.NewCreateTopicsResponseTopic()
			st.Topic = rt.Topic
			for _, rc := range rt.Configs {
				if _, err := strconv.ParseInt(*rc.Value, 10, 64); rc.Name == "retention.ms" && err != nil {
					st.ErrorCode = kerr.InvalidConfig.Code
					st.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("Invalid value %s for configuration retention.ms: Not a number of type LONG", *rc.Value))
					bad = true
				}
			}
			resp.Topics = append(resp.Topics, st)
		}
		if !bad && !req.ValidateOnly {
			return nil, nil, false // the broker creates them
		}
		return resp, nil, true
	})
	cfg := loadConfig(t, t.TempDir(), `application_id  = "all"
session_timeout = "1s"
admin { listen = "" }
topic "bad" {
  partitions = 2
  config     = { "retention.ms" = "soon" }
}
processor "join" {
  module = "{{count}}"
  inputs = ["a", "b"]
}
processor "count" {
  module  = "{{count}}"
  inputs  = ["a"]
  outputs = ["counted"]
  store "counts" {}
}
processor "other" {
  module = "{{count}}"
  inputs = ["missing"]
}
`)
	_, err := New(context.Background(), Options{Config: cfg, Brokers: brokers})
	var de *DiagnosticsError
	if !errors.As(err, &de) {
		t.Fatalf("New: %v, want a *DiagnosticsError", err)
	}
	var got []string
	for _, d := range de.Diags {
		got = append(got, fmt.Sprintf("%d:%d: %s | %s", d.Subject.Start.Line, d.Subject.Start.Column, d.Summary, d.Detail))
	}
	want := []string{
		`2:19: Session timeout outside the broker's range | The group session timeout 1s (session_timeout) is shorter than group.min.session.timeout.ms = 6000 of broker 0: the broker would refuse the application's consumer group members (INVALID_SESSION_TIMEOUT). Set session_timeout from 6s to 5m, or change the broker's settings.`,
		`4:1: Topic not created | The broker refused to create topic "bad": INVALID_CONFIG: Configuration is invalid. (Invalid value soon for configuration retention.ms: Not a number of type LONG).`,
		`10:3: Inputs not co-partitioned | The inputs of processor "join" must have the same number of partitions, since partition N of every input goes to task N; they have b: 3; a: 4.`,
		`16:3: Changelog partition mismatch | Store "counts": changelog: existing topic all-counts-changelog has 3 partitions, expected 4 (the source topics' partition count). The changelog must have as many partitions as the processor's inputs; delete the changelog topic (its store is then restored empty) or fix the inputs.`,
		`20:13: Unknown input topic | Processor "other" reads topic "missing", which neither exists on the broker (` + brokers[0] + `) nor has a topic block. Create the topic, or declare it with a topic block so that statehost creates it.`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("diagnostics:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(want, "\n     "))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(creates) > 0 {
		t.Errorf("New created topics %v for a configuration with problems", creates)
	}
	topics, err := adm.ListTopics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if names := topics.Names(); !slices.Equal(names, []string{"a", "all-counts-changelog", "b"}) {
		t.Errorf("topics after New: %v, want only those made before", names)
	}
}

// TestCompileUnreadableModule: a module file that cannot be read when New compiles it (here,
// replaced after the configuration was loaded) is reported as not readable, with the
// operating system's error, not as an invalid module.
func TestCompileUnreadableModule(t *testing.T) {
	if _, err := os.Stat("/proc/self/mem"); err != nil {
		t.Skip("no /proc/self/mem:", err)
	}
	dir := t.TempDir()
	mod := filepath.Join(dir, "count.wasm")
	wasm, err := os.ReadFile(modules["count"])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mod, wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := loadConfig(t, dir, `application_id = "unreadable"
admin { listen = "" }
processor "count" {
  module = "count.wasm"
  inputs = ["in"]
}
`)
	// /proc/self/mem is a regular file whose first byte cannot be read (EIO), even by root.
	if err := os.Remove(mod); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/proc/self/mem", mod); err != nil {
		t.Fatal(err)
	}
	diags, out := newDiagnostics(t, cfg, cluster(t))
	if len(diags) != 1 {
		t.Fatalf("diagnostics:\n%s\nwant one", out)
	}
	d := diags[0]
	want := fmt.Sprintf("Processor \"count\": the module file %s cannot be read: read %s: input/output error.", mod, mod)
	if d.Summary != "Module file not readable" || d.Detail != want || d.Subject.Start.Line != 4 || d.Subject.Start.Column != 12 {
		t.Errorf("got %s\nwant 4:12 Module file not readable | %s", out, want)
	}
}
