package runtime

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/statehost/statehost/internal/topictest"
	"github.com/statehost/statehost/internal/wordgen"
)

// TestDeployUnderLoad switches the count processor of the word count, under continuous input,
// to countv2 (which also keeps each word's last-seen offset and marks its output version=2):
// every input record is applied by exactly one of the two versions, so every word's counts go
// 1, 2, ..., n without a gap, a duplicate or a reset; within each output partition the
// version-1 records all come before the version-2 ones; and countv2's own state lands in the
// same store. Under both guarantees (at-least-once applies a record twice only after a crash).
func TestDeployUnderLoad(t *testing.T) { eachGuarantee(t, deployUnderLoad) }

func deployUnderLoad(t *testing.T, src string) {
	brokers := cluster(t)
	in := start(t, loadConfig(t, t.TempDir(), src), brokers)
	cl, _ := client(t, brokers)
	v2, err := os.ReadFile(modules["countv2"])
	if err != nil {
		t.Fatal(err)
	}

	stopFeed := produceContinuously(t, cl, 40, 50*time.Millisecond)
	waitFor(t, 60*time.Second, "counts from version 1", func() bool { return len(topictest.Read(t, brokers, "word-counts", true)) > 500 })
	res, err := in.rt.Deploy(context.Background(), "count", "deploy", v2)
	if err != nil {
		t.Fatalf("Deploy: %v", err)
	}
	if res.Tasks != 3 || res.Unchanged || res.Previous.Hash == res.Version.Hash {
		t.Errorf("Deploy = %+v, want 3 tasks switched to a new hash", res)
	}
	time.Sleep(time.Second) // version 2 under load
	ref := stopFeed()
	want := len(ref)
	waitFor(t, 60*time.Second, "every word counted", func() bool {
		h := topictest.Histories(t, brokers, "word-counts")
		if len(h) < want {
			return false
		}
		for w, n := range ref {
			if len(h[w]) < n {
				return false
			}
		}
		return true
	})
	if err := in.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}

	// Exactly once across the switch: 1..n per word, version 1 then version 2 per partition.
	recs := topictest.Read(t, brokers, "word-counts", true)
	next := map[string]int{}
	v2Seen := map[int32]bool{}
	v1, v2n := 0, 0
	for _, r := range recs {
		w := string(r.Key)
		next[w]++
		if string(r.Value) != strconv.Itoa(next[w]) {
			t.Fatalf("word %q: count %s at offset %d of partition %d, want %d: a record was applied twice or not at all across the switch",
				w, r.Value, r.Offset, r.Partition, next[w])
		}
		isV2 := len(r.Headers) == 1 && r.Headers[0].Key == "version" && string(r.Headers[0].Value) == "2"
		switch {
		case isV2:
			v2n++
			v2Seen[r.Partition] = true
		case v2Seen[r.Partition]:
			t.Fatalf("partition %d offset %d: a version-1 record after version-2 ones", r.Partition, r.Offset)
		default:
			v1++
		}
	}
	for w, n := range ref {
		if next[w] != n {
			t.Errorf("word %q counted %d times, want %d", w, next[w], n)
		}
	}
	if v1 == 0 || v2n == 0 {
		t.Errorf("%d records from version 1 and %d from version 2, want both", v1, v2n)
	}
	seen, _ := topictest.LatestCommitted(t, brokers, "wc-counts-changelog")
	n := 0
	for k := range seen {
		if strings.HasPrefix(k, "seen:") {
			n++
		}
	}
	if n == 0 {
		t.Error("no seen:<word> key in the store: version 2 did not run on it")
	}
}

// TestDeployRefused deploys modules that must be refused (not wasm, another ABI version, a
// trap in init) and one for an unknown processor: each returns its error, the running version
// keeps running with its state, and GET /v1/processors still shows it.
func TestDeployRefused(t *testing.T) {
	brokers := cluster(t)
	in := start(t, loadConfig(t, t.TempDir(), eosHCL()), brokers)
	cl, _ := client(t, brokers)
	ref := map[string]int{}
	feed(t, cl, ref, 200, 1)
	waitCounts(t, brokers, "word-counts", wordgen.Strings(ref))
	before := in.rt.Processors()

	read := func(name string) []byte {
		b, err := os.ReadFile("../engine/testdata/c/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name, processor string
		wasm            []byte
		want            error
		text            string
	}{
		{"not wasm", "count", []byte("not a wasm module"), ErrInvalidModule, "compile"},
		{"abi version 2", "count", read("version2.wasm"), ErrInvalidModule, "ABI version 2"},
		{"exits in init", "count", read("initexit.wasm"), ErrInvalidModule, "trial instantiation"},
		{"unknown processor", "nope", read("version2.wasm"), ErrUnknownProcessor, `"nope"`},
	} {
		_, err := in.rt.Deploy(context.Background(), tc.processor, "deploy", tc.wasm)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%s: %v, want %v mentioning %q", tc.name, err, tc.want, tc.text)
		}
	}
	after := in.rt.Processors()
	for i := range before {
		if after[i].Current != before[i].Current || after[i].Previous != nil {
			t.Errorf("processor %s: %+v after refused deploys, was %+v", after[i].Name, after[i], before[i])
		}
	}
	// The running version goes on with its state.
	feed(t, cl, ref, 200, 2)
	waitCounts(t, brokers, "word-counts", wordgen.Strings(ref))
	// The same module again changes nothing.
	v1, err := os.ReadFile(modules["count"])
	if err != nil {
		t.Fatal(err)
	}
	if res, err := in.rt.Deploy(context.Background(), "count", "deploy", v1); err != nil || !res.Unchanged {
		t.Errorf("deploying the running module: %+v, %v; want unchanged", res, err)
	}
}
