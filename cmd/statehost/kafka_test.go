package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/internal/topictest"
)

func sortedLines(s string) []string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	slices.Sort(lines)
	return lines
}

func TestProduceConsumeLines(t *testing.T) {
	b := startBroker(t, brokerOptions{kfake: true})
	createTopics(t, b.addr, map[string]int{"lines": 3})
	ctx := testContext(t)
	long := strings.Repeat("x", 200<<10) // longer than a bufio.Scanner's default limit
	stdin := "a\nb b\r\n\n" + long + "\nlast without newline"
	r := runCLI(ctx, stdin, "produce", "--brokers", b.addr, "lines")
	if r.code != 0 || !strings.Contains(r.stderr, "produced 5 records to lines") {
		t.Fatalf("produce: %v", r)
	}

	r = runCLI(ctx, "", "consume", "lines", "--brokers", b.addr)
	if r.code != 0 {
		t.Fatalf("consume: %v", r)
	}
	want := []string{"\t", "\ta", "\tb b", "\t" + long, "\tlast without newline"}
	slices.Sort(want)
	if got := sortedLines(r.stdout); !slices.Equal(got, want) {
		t.Errorf("consume printed %d lines %.200q, want %.200q", len(got), got, want)
	}
	for _, rec := range topictest.Read(t, []string{b.addr}, "lines", false) {
		if rec.Key != nil {
			t.Errorf("record %q has key %q, want null", rec.Value, rec.Key)
		}
	}
}

func TestProduceKeyed(t *testing.T) {
	const parts = 4
	b := startBroker(t, brokerOptions{kfake: true})
	createTopics(t, b.addr, map[string]int{"keyed": parts})
	ctx := testContext(t)
	stdin := "k1=v1\nk2=v2\nk1=v3=x\nno key here\nk3=\n=empty key\n"
	r := runCLI(ctx, stdin, "produce", "keyed", "--key-separator", "=", "--brokers", b.addr)
	if r.code != 0 || !strings.Contains(r.stderr, "produced 6 records to keyed") {
		t.Fatalf("produce: %v", r)
	}

	// Flags after the topic, and one dash.
	r = runCLI(ctx, "", "consume", "keyed", "-separator", "|", "-brokers="+b.addr)
	if r.code != 0 {
		t.Fatalf("consume: %v", r)
	}
	want := []string{"k1|v1", "k2|v2", "k1|v3=x", "|no key here", "k3|", "|empty key"}
	slices.Sort(want)
	if got := sortedLines(r.stdout); !slices.Equal(got, want) {
		t.Errorf("consume printed %q, want %q", got, want)
	}

	// Keyed records are on the murmur2 partition of their key, as kgo's (and Java's)
	// default partitioner puts them.
	partitioner := kgo.StickyKeyPartitioner(nil).ForTopic("keyed")
	byKey := map[string][]int32{}
	for _, rec := range topictest.Read(t, []string{b.addr}, "keyed", false) {
		if rec.Key == nil {
			if string(rec.Value) != "no key here" {
				t.Errorf("record %q has a null key", rec.Value)
			}
			continue
		}
		byKey[string(rec.Key)] = append(byKey[string(rec.Key)], rec.Partition)
		if want := int32(partitioner.Partition(&kgo.Record{Key: rec.Key}, parts)); rec.Partition != want {
			t.Errorf("key %q on partition %d, want %d", rec.Key, rec.Partition, want)
		}
	}
	if ps := byKey["k1"]; len(ps) != 2 || ps[0] != ps[1] {
		t.Errorf("the two k1 records are on partitions %v, want one", ps)
	}
	if len(byKey[""]) != 1 {
		t.Errorf("the line \"=empty key\" has no empty (non-null) key: %v", byKey)
	}
}

func TestConsumeNullValueAndBound(t *testing.T) {
	b := startBroker(t, brokerOptions{kfake: true})
	createTopics(t, b.addr, map[string]int{"t": 2, "empty": 2})
	ctx := testContext(t)
	cl := testClient(t, b.addr)
	defer cl.Close()
	recs := []*kgo.Record{
		{Topic: "t", Key: []byte("gone"), Value: nil},
		{Topic: "t", Key: []byte("here"), Value: []byte("1")},
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	r := runCLI(ctx, "", "consume", "--brokers", b.addr, "t", "--read-committed")
	if want := []string{"gone\t<null>", "here\t1"}; r.code != 0 || !slices.Equal(sortedLines(r.stdout), want) {
		t.Errorf("consume: %v\nwant lines %q", r, want)
	}
	// An empty topic prints nothing and exits; so does a read that starts at the end.
	for _, args := range [][]string{{"empty"}, {"t", "--from-beginning=false"}} {
		r = runCLI(ctx, "", append([]string{"consume", "--brokers", b.addr}, args...)...)
		if r.code != 0 || r.stdout != "" {
			t.Errorf("consume %q: %v, want exit 0 and no output", args, r)
		}
	}
}

func TestConsumeFollow(t *testing.T) {
	b := startBroker(t, brokerOptions{kfake: true})
	createTopics(t, b.addr, map[string]int{"f": 3})
	ctx := testContext(t)
	cl := testClient(t, b.addr)
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "f", Key: []byte("old"), Value: []byte("1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	followCtx, stop := context.WithCancel(ctx)
	var stdout, stderr syncBuffer
	done := make(chan int)
	go func() {
		done <- run(followCtx, &cliEnv{Stdout: &stdout, Stderr: &stderr, Stdin: strings.NewReader("")},
			[]string{"consume", "--follow", "--brokers", b.addr, "f"})
	}()
	waitFor := func(s string) {
		t.Helper()
		for !strings.Contains(stdout.String(), s) {
			select {
			case code := <-done:
				t.Fatalf("consume --follow exited %d before printing %q:\n%s%s", code, s, stdout.String(), stderr.String())
			case <-ctx.Done():
				t.Fatalf("consume --follow did not print %q:\n%s%s", s, stdout.String(), stderr.String())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	waitFor("old\t1\n")
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "f", Key: []byte("new"), Value: []byte("2")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	waitFor("new\t2\n")
	stop()
	if code := <-done; code != 0 {
		t.Errorf("consume --follow exited %d after cancel, want 0:\n%s", code, stderr.String())
	}
}

// writeKafkaConfig writes, into a new temporary folder of t, a configuration of application
// appID whose kafka block has brokers and the further lines kafka (settings, tls and sasl
// blocks), followed by the top-level blocks rest; it returns its path.
func writeKafkaConfig(t testing.TB, appID string, brokers []string, kafka, rest string) string {
	t.Helper()
	quoted := make([]string, len(brokers))
	for i, b := range brokers {
		quoted[i] = strconv.Quote(b)
	}
	src := fmt.Sprintf("application_id = %q\nkafka {\n  brokers = [%s]\n%s}\n%s",
		appID, strings.Join(quoted, ", "), kafka, rest)
	path := filepath.Join(t.TempDir(), "statehost.hcl")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// hclBlock returns a block of a kafka block (tls, sasl), name { key = "value" ... },
// indented as writeKafkaConfig places it; attrs alternate keys and values.
func hclBlock(name string, attrs ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  %s {\n", name)
	for i := 0; i+1 < len(attrs); i += 2 {
		fmt.Fprintf(&b, "    %s = %q\n", attrs[i], attrs[i+1])
	}
	b.WriteString("  }\n")
	return b.String()
}

// produce --config produces with the kafka block's producer settings: the batches have the
// codec of compression, and none is larger than batch_size, which refuses a longer line.
func TestProduceConfigProducerSettings(t *testing.T) {
	b := startBroker(t, brokerOptions{kfake: true})
	ctx := testContext(t)
	line := strings.Repeat("x", 300)
	var lines []string
	for i := range 8 {
		lines = append(lines, fmt.Sprintf("%d%s", i, line))
	}
	// The codecs as FetchBatchMetrics.CompressionType numbers them.
	for _, c := range []struct {
		name  string
		codec uint8
	}{{"gzip", 1}, {"snappy", 2}, {"lz4", 3}, {"zstd", 4}} {
		t.Run(c.name, func(t *testing.T) {
			createTopics(t, b.addr, map[string]int{c.name: 1})
			path := writeKafkaConfig(t, "cli", []string{b.addr},
				fmt.Sprintf("  compression = %q\n  batch_size  = \"1KiB\"\n", c.name), "")
			r := runCLI(ctx, strings.Join(lines, "\n")+"\n", "produce", "--config", path, c.name)
			if r.code != exitOK {
				t.Fatalf("produce --config: %v", r)
			}
			var got []string
			for _, rec := range topictest.Read(t, []string{b.addr}, c.name, false) {
				got = append(got, string(rec.Value))
			}
			if !slices.Equal(got, lines) {
				t.Errorf("the topic holds %.80q, want the %d lines", got, len(lines))
			}
			// 8 records of about 310 bytes: at most 3 to a batch of 1 KiB (before compression).
			codecs := topictest.BatchCodecs(t, []kgo.Opt{kgo.SeedBrokers(b.addr)}, c.name)
			if codecs[c.codec] < 3 || len(codecs) != 1 {
				t.Errorf("batches by codec %v, want at least 3 of codec %d and no other", codecs, c.codec)
			}
		})
	}

	path := writeKafkaConfig(t, "cli", []string{b.addr}, "  batch_size = \"1KiB\"\n", "")
	if r := runCLI(ctx, strings.Repeat("y", 2<<10)+"\n", "produce", "--config", path, "zstd"); r.code != exitFailure {
		t.Errorf("produce --config of a line longer than batch_size: %v, want exit %d", r, exitFailure)
	}
}

func TestMissingTopic(t *testing.T) {
	b := startBroker(t, brokerOptions{kfake: true})
	ctx := testContext(t)
	for _, cmd := range []string{"produce", "consume"} {
		start := time.Now()
		r := runCLI(ctx, "x\n", cmd, "--brokers", b.addr, "nosuch")
		want := fmt.Sprintf("topic nosuch does not exist on %s", b.addr)
		if r.code != 1 || !strings.Contains(r.stderr, want) {
			t.Errorf("%s to a missing topic: %v\nwant exit 1 and %q", cmd, r, want)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s to a missing topic took %v to fail", cmd, d)
		}
	}
	cl := testClient(t, b.addr)
	defer cl.Close()
	topics, err := kadm.NewClient(cl).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if topics.Has("nosuch") {
		t.Error("produce created the missing topic")
	}
}

func TestLogJSON(t *testing.T) {
	b := startBroker(t, brokerOptions{kfake: true})
	r := runCLI(testContext(t), "", "produce", "nosuch", "--log-json", "--brokers", b.addr)
	if r.code != 1 {
		t.Fatalf("produce: %v", r)
	}
	var line struct {
		Level   string `json:"@level"`
		Module  string `json:"@module"`
		Message string `json:"@message"`
		Error   string `json:"error"`
	}
	first, _, _ := strings.Cut(r.stderr, "\n")
	if err := json.Unmarshal([]byte(first), &line); err != nil {
		t.Fatalf("stderr is not JSON lines: %v\n%s", err, r.stderr)
	}
	if line.Level != "error" || line.Module != "statehost.produce" || !strings.Contains(line.Error, "nosuch") {
		t.Errorf("log line %+v", line)
	}
}

// A signal stops produce while it waits on its input; what it read is delivered.
func TestProduceInterrupted(t *testing.T) {
	b := startBroker(t, brokerOptions{kfake: true})
	createTopics(t, b.addr, map[string]int{"t": 1})
	ctx := testContext(t)
	stdin, feed := io.Pipe()
	defer feed.Close()
	runCtx, interrupt := context.WithCancel(ctx)
	var stderr syncBuffer
	done := make(chan int)
	go func() {
		done <- run(runCtx, &cliEnv{Stdout: io.Discard, Stderr: &stderr, Stdin: stdin},
			[]string{"produce", "--brokers", b.addr, "t"})
	}()
	if _, err := io.WriteString(feed, "one\ntwo\n"); err != nil {
		t.Fatal(err)
	}
	for len(topictest.Read(t, []string{b.addr}, "t", false)) < 2 {
		select {
		case <-ctx.Done():
			t.Fatal("the two lines did not reach the topic t")
		case <-time.After(20 * time.Millisecond):
		}
	}
	interrupt()
	select {
	case code := <-done:
		if code != 1 || !strings.Contains(stderr.String(), "produced 2 records to t before stopping") ||
			!strings.Contains(stderr.String(), "interrupted") {
			t.Errorf("produce interrupted: exit %d\n%s", code, stderr.String())
		}
	case <-ctx.Done():
		t.Fatal("produce did not stop on interrupt while waiting on its input")
	}
}
