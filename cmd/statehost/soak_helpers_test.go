package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/host/runtime"
	"github.com/statehost/statehost/internal/topictest"
	"github.com/statehost/statehost/internal/wordgen"
	"github.com/statehost/statehost/pluginsdk/wasmbuild"
	"github.com/statehost/statehost/store"
)

// Helpers of the soak test (soak_test.go): its configuration, its instances, its producer,
// and the reads of its final state.

const (
	soakGuardStore = "counts-sentences"     // the guard's key-value store (testdata/poison names it after its input)
	soakGuardOut   = "guard-counts"         // the guard's output topic
	soakGuardDLQ   = e2eApp + "-guard-dlq"  // the guard's dead-letter topic
	soakPoisonHdr  = "soak.poison"          // header of the poison records: the poison plugin's command
	soakKeys       = 32                     // sentences are keyed k0 ... k31
	soakTasks      = 4 + crashPartition + 4 // tokenize and guard on sentences, count on the repartition topic
	soakSession    = 4 * time.Second        // session_timeout: how long a killed instance keeps its tasks
	soakV2Prefix   = "seen:"                // the keys countv2 adds to the store counts
	soakSentences  = "sentences"            // the input topic
	soakOutput     = "word-counts"          // the word count's output topic
	soakGuardLog   = e2eApp + "-counts-sentences-changelog"
)

// soakPoisons are the poison plugin's commands that fail a record, with their weights: each
// counts and emits (or deletes) and then fails in its own way, or fails at once.
var soakPoisons = []struct {
	cmd    string
	weight int
}{{"fail", 3}, {"panic", 2}, {"exit", 1}, {"clear-fail", 2}, {"early-fail", 2}, {"oom", 1}}

// soakConfig is the soak's application: the word count (tokenize, count) and the guard, the
// poison test plugin on the same input with on_error = "dead_letter", which counts each
// sentence under its key and fails on the poison records.
func soakConfig(dir, addr, listen, guarantee string, mods map[string]string) string {
	top := ""
	if guarantee == "at_least_once" {
		top = fmt.Sprintf("commit_interval = %q\n", e2eCommit.String())
	}
	return fmt.Sprintf(`application_id       = %q
state_dir            = %q
processing_guarantee = %q
session_timeout      = %q
%skafka {
  brokers = [%q]
}
admin {
  listen = %q
}
topic "sentences" {
  partitions = 4
}
repartition "words" {
  partitions = %d
}
processor "tokenize" {
  module  = %q
  inputs  = ["sentences"]
  outputs = ["words"]
}
processor "count" {
  module  = %q
  inputs  = ["words"]
  outputs = [%q]
  store "counts" {}
}
processor "guard" {
  module   = %q
  inputs   = ["sentences"]
  outputs  = [%q]
  on_error = "dead_letter"
  store %q {}
  store "windows-sentences" {
    type        = "window"
    window_size = "1h"
  }
  store "sessions-sentences" {
    type           = "session"
    inactivity_gap = "1h"
  }
}
`, e2eApp, filepath.Join(dir, "state"), guarantee, soakSession.String(), top, addr, listen, crashPartition,
		mods["tokenize"], mods["count"], soakOutput, mods["guard"], soakGuardOut, soakGuardStore)
}

// soakModules builds what the soak runs into dir/modules (the files the configuration
// names; the instances watch them) and the two versions of count into dir/versions:
// plugins/count (v1) and host/runtime/testdata/countv2 (v2, which also keeps "seen:<word>"
// and marks its output version=2), and countjson's reversible variant
// (plugins/countjson/testdata/reversible) into dir/versions. It returns the module files by
// processor, the two versions, and the reversible countjson.
func soakModules(t *testing.T, dir string) (mods map[string]string, versions [2]string, reversible string) {
	t.Helper()
	built := buildModules(t)
	mdir, vdir := filepath.Join(dir, "modules"), filepath.Join(dir, "versions")
	for _, d := range []string{mdir, vdir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	guard, v2 := filepath.Join(mdir, "guard.wasm"), filepath.Join(vdir, "count-v2.wasm")
	reversible = filepath.Join(vdir, soakReversible)
	for src, out := range map[string]string{
		filepath.Join("host", "runtime", "testdata", "poison"):          guard,
		filepath.Join("host", "runtime", "testdata", "countv2"):         v2,
		filepath.Join("plugins", "countjson", "testdata", "reversible"): reversible,
	} {
		if err := wasmbuild.Go(ctx, filepath.Join("..", "..", src), out); err != nil {
			t.Fatalf("build %s: %v", src, err)
		}
	}
	versions = [2]string{filepath.Join(vdir, "count-v1.wasm"), v2}
	mods = map[string]string{"tokenize": filepath.Join(mdir, "tokenize.wasm"), "count": filepath.Join(mdir, "count.wasm"), "guard": guard}
	soakCopy(t, built["tokenize"], mods["tokenize"])
	soakCopy(t, built["count"], versions[0])
	soakCopy(t, built["count"], mods["count"])
	return mods, versions, reversible
}

// soakCopy writes the file src to dst through a temporary file renamed over it, as a deploy
// tool would (a module watcher never sees half a file).
func soakCopy(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		t.Fatal(err)
	}
}

// soakInstance is one instance of the soak's application: a directory with its config and
// state, and its current process (an incarnation: a new one after each kill).
type soakInstance struct {
	name  string
	dir   string
	cfg   string // the config the process runs (admin on 127.0.0.1:0)
	cli   string // the same with the admin address it got, for statehost deploy and query
	runs  int    // incarnations so far
	proc  *instance
	procs []*appProcess // every incarnation, for the logs
	// canRollback: the instance took countjson through statehost deploy, and has count to
	// roll back to; a start ends it (soak_migrate_test.go). down: stopped on purpose.
	canRollback, down bool
}

// start starts a new incarnation and waits for its admin listener.
func (s *soak) start(in *soakInstance) {
	t := s.t
	t.Helper()
	in.runs++
	in.canRollback = false
	if err := os.MkdirAll(in.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	in.cfg = filepath.Join(in.dir, "app.hcl")
	if err := os.WriteFile(in.cfg, []byte(soakConfig(in.dir, s.addr, "127.0.0.1:0", s.guarantee, s.mods)), 0o644); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("%s.%d", in.name, in.runs)
	p := &instance{appProcess: startApp(t, s.bin, in.cfg, name), dir: in.dir}
	p.logFile = filepath.Join(s.logDir, name+".log")
	in.proc = p
	in.procs = append(in.procs, p.appProcess)
	p.admin = p.adminAddr(t)
	in.cli = filepath.Join(in.dir, "cli.hcl")
	if err := os.WriteFile(in.cli, []byte(soakConfig(in.dir, s.addr, p.admin, s.guarantee, s.mods)), 0o644); err != nil {
		t.Fatal(err)
	}
}

const (
	soakBatch       = 4
	soakEvery       = 100 * time.Millisecond
	soakPoisonOneIn = 40 // about one record in 40 is poison: one a second
)

// startSoakProducer starts the producer of the soak: keyed sentences to the topic sentences,
// soakBatch every soakEvery, and now and then a poison record (a command of the poison plugin
// as its value, with the header soak.poison) in their place; a batch the broker does not
// acknowledge (it is away) is tried again. Its random choices come from its own generator,
// seeded from the soak's seed.
func startSoakProducer(t *testing.T, addr string, seed uint64, n int) *producer {
	t.Helper()
	lines, _ := wordgen.Sentences(n, int(seed%1000)+1)
	rng := rand.New(rand.NewPCG(seed, 2))
	weights := 0
	for _, p := range soakPoisons {
		weights += p.weight
	}
	next, keyN := 0, 0
	batch := func() []*kgo.Record {
		recs := make([]*kgo.Record, 0, soakBatch)
		for range soakBatch {
			key := []byte(fmt.Sprintf("k%d", keyN%soakKeys))
			keyN++
			if rng.IntN(soakPoisonOneIn) == 0 {
				w := rng.IntN(weights)
				cmd := soakPoisons[0].cmd
				for _, c := range soakPoisons {
					if w < c.weight {
						cmd = c.cmd
						break
					}
					w -= c.weight
				}
				recs = append(recs, &kgo.Record{Key: key, Value: []byte(cmd),
					Headers: []kgo.RecordHeader{{Key: soakPoisonHdr, Value: []byte(cmd)}}})
				continue
			}
			recs = append(recs, &kgo.Record{Key: key, Value: []byte(lines[next%len(lines)])})
			next++
		}
		return recs
	}
	return startProducer(t, addr, producerOptions{every: soakEvery, timeout: 30 * time.Second, retry: true, opts: []kgo.Opt{
		kgo.DefaultProduceTopic(soakSentences),
		kgo.RetryBackoffFn(func(int) time.Duration { return 200 * time.Millisecond }),
		// Not idempotent, as the outage test's producer: a batch written twice is counted
		// twice by the reference too, which is read from the topic.
		kgo.DisableIdempotentWrite(),
	}}, batch)
}

// soakProduced returns the good and poison records that prod has had acknowledged.
func soakProduced(prod *producer) (good, poison int) {
	for _, r := range prod.records() {
		if soakHeader(r, soakPoisonHdr) != "" {
			poison++
		} else {
			good++
		}
	}
	return good, poison
}

// soakInput is what the topic sentences holds at the end: the reference.
type soakInput struct {
	good, poison int
	words        map[string]int    // every word of every record (tokenize splits the poison commands too)
	guard        map[string]int    // good records by key: the guard's reference counts
	guardTotal   map[int32]int     // good records by partition: the guard's "#total" of each task
	poisons      map[string]string // "partition@offset" of each poison record -> its command
	keyPart      map[string]int32  // the partition of each key
}

// readSoakInput reads the topic sentences (its producer is not transactional).
func readSoakInput(t *testing.T, addr string) soakInput {
	t.Helper()
	in := soakInput{words: map[string]int{}, guard: map[string]int{}, guardTotal: map[int32]int{},
		poisons: map[string]string{}, keyPart: map[string]int32{}}
	for _, r := range readChecked(t, addr, soakSentences, false) {
		for _, w := range strings.Fields(string(r.Value)) {
			in.words[w]++
		}
		k := string(r.Key)
		if p, ok := in.keyPart[k]; ok && p != r.Partition {
			t.Errorf("sentences: key %q is in partitions %d and %d", k, p, r.Partition)
		}
		in.keyPart[k] = r.Partition
		if soakHeader(r, soakPoisonHdr) != "" {
			in.poison++
			in.poisons[fmt.Sprintf("%d@%d", r.Partition, r.Offset)] = string(r.Value)
			continue
		}
		in.good++
		in.guard[k]++
		in.guardTotal[r.Partition]++
	}
	return in
}

func soakHeader(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// soakDiff is the difference between a final state and its reference: the sum over keys of
// |got - want| (a key missing on either side counts its whole value), and the keys that are
// over and under their reference.
type soakDiff struct {
	sum, over, under int
	examples         []string
}

func diffCounts(got, want map[string]int) soakDiff {
	var d soakDiff
	note := func(k string, g, w int) {
		if len(d.examples) < 8 {
			d.examples = append(d.examples, fmt.Sprintf("%q=%d want %d", k, g, w))
		}
	}
	for _, k := range crashSortedKeys(want) {
		g, w := got[k], want[k]
		switch {
		case g > w:
			d.sum, d.over = d.sum+g-w, d.over+1
			note(k, g, w)
		case g < w:
			d.sum, d.under = d.sum+w-g, d.under+1
			note(k, g, w)
		}
	}
	for _, k := range crashSortedKeys(got) {
		if _, ok := want[k]; !ok {
			d.sum, d.over = d.sum+got[k], d.over+1
			note(k, got[k], 0)
		}
	}
	return d
}

func (d soakDiff) String() string {
	if d.sum == 0 {
		return "none"
	}
	return fmt.Sprintf("%d (%d keys over, %d under; e.g. %s)", d.sum, d.over, d.under, strings.Join(d.examples, ", "))
}

// soakSeqs reads topic read_committed and returns per key the numbers its values start with
// (count's values; the guard's "kv window session"), in offset order, the records read, and
// how many carry the header version=2 (countv2's).
func soakSeqs(t *testing.T, addr, topic string) (seqs map[string][]int, records, v2 int) {
	t.Helper()
	seqs = map[string][]int{}
	for _, r := range readChecked(t, addr, topic, true) {
		records++
		if soakHeader(r, "version") == "2" {
			v2++
		}
		f := strings.Fields(string(r.Value))
		n := -1
		if len(f) > 0 {
			if v, err := strconv.Atoi(f[0]); err == nil {
				n = v
			}
		}
		if n < 0 {
			t.Errorf("%s: key %q at %d@%d has the value %q, not a count", topic, r.Key, r.Partition, r.Offset, r.Value)
			continue
		}
		seqs[string(r.Key)] = append(seqs[string(r.Key)], n)
	}
	return seqs, records, v2
}

// latestOf returns the last number of each sequence.
func latestOf(seqs map[string][]int) map[string]int {
	out := map[string]int{}
	for k, s := range seqs {
		out[k] = s[len(s)-1]
	}
	return out
}

// sequenceBreaks returns the keys whose values are not exactly 1, 2, ..., n in order (a
// duplicate, a gap or a value that went back), with an example.
func sequenceBreaks(seqs map[string][]int) (n int, example string) {
	for _, k := range crashSortedKeys(seqs) {
		s := seqs[k]
		if i := crashFirstBreak(s); i >= 0 {
			if n == 0 {
				example = fmt.Sprintf("%q: %s", k, crashAround(s, i))
			}
			n++
		}
	}
	return n, example
}

// soakChangelogLatest reads a changelog read_committed and returns the latest value of each
// key that is a count (decimal, or countjson's {"n":5}), leaving out countv2's "seen:" keys
// and the store's version records.
func soakChangelogLatest(t *testing.T, addr, topic string) map[string]int {
	t.Helper()
	latest, _ := topictest.LatestCommitted(t, []string{addr}, topic)
	out := map[string]int{}
	for k, v := range latest {
		if strings.HasPrefix(k, soakV2Prefix) || store.IsVersionRecordKey([]byte(k)) {
			continue
		}
		n, ok := soakCount(v)
		if !ok {
			t.Errorf("changelog %s: key %q has the value %q, not a count", topic, k, v)
			continue
		}
		out[k] = n
	}
	return out
}

// soakRange reads the key-value store of every partition through the admin API of an
// instance (GET /v1/stores/{store}/range?partition=N, which redirects to the instance that
// runs the partition), as interactive queries read it: its committed state. It waits while a
// partition answers 503 (restoring or moving).
func soakRange(t *testing.T, admin, store string, partitions int32) (map[int32]map[string]string, error) {
	t.Helper()
	out := map[int32]map[string]string{}
	for p := range partitions {
		deadline := time.Now().Add(60 * time.Second)
		for {
			entries, status, err := soakRangeOnce(t.Context(), admin, store, p)
			if err == nil && status == http.StatusOK {
				out[p] = entries
				break
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("range of store %s partition %d through %s: status %d: %v", store, p, admin, status, err)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	return out, nil
}

func soakRangeOnce(ctx context.Context, admin, store string, p int32) (map[string]string, int, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	u := fmt.Sprintf("http://%s/v1/stores/%s/range?partition=%d&limit=100000", admin, store, p)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		return nil, resp.StatusCode, fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	out := map[string]string{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e struct {
			Key, Value, Error string
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, resp.StatusCode, fmt.Errorf("line %q: %w", sc.Text(), err)
		}
		if e.Error != "" {
			return nil, resp.StatusCode, fmt.Errorf("the answer ends with an error: %s", e.Error)
		}
		out[e.Key] = e.Value
	}
	return out, resp.StatusCode, sc.Err()
}

// countsOf turns store entries into counts (decimal, or countjson's {"n":5}), leaving out
// countv2's "seen:" keys and, with skip, the keys skip says to leave out.
func countsOf(t *testing.T, what string, parts map[int32]map[string]string, skip func(string) bool) map[string]int {
	t.Helper()
	out := map[string]int{}
	for p, entries := range parts {
		for k, v := range entries {
			if strings.HasPrefix(k, soakV2Prefix) || (skip != nil && skip(k)) {
				continue
			}
			n, ok := soakCount(v)
			if !ok {
				t.Errorf("%s partition %d: key %q has the value %q, not a count", what, p, k, v)
				continue
			}
			if _, dup := out[k]; dup {
				t.Errorf("%s: key %q is in two partitions", what, k)
			}
			out[k] = n
		}
	}
	return out
}

// soakProcessors returns the module each processor of an instance runs (GET /v1/processors).
func soakProcessors(ctx context.Context, admin string) (map[string]runtime.ProcessorStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/v1/processors", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var ps []runtime.ProcessorStatus
	if err := json.NewDecoder(resp.Body).Decode(&ps); err != nil {
		return nil, fmt.Errorf("GET /v1/processors of %s: %s: %w", admin, resp.Status, err)
	}
	out := map[string]runtime.ProcessorStatus{}
	for _, p := range ps {
		out[p.Name] = p
	}
	return out, nil
}

// soakCLI runs the statehost program with args and returns its exit code and output.
func soakCLI(ctx context.Context, bin string, args ...string) (int, string) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	code := 0
	if err != nil {
		code = -1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
	}
	return code, strings.TrimSpace(string(out))
}

// soakCommitted returns the group's committed offsets of the sentences and repartition
// topics, and their end offsets.
func soakCommitted(ctx context.Context, adm *kadm.Client) (committed, ends map[string]int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := adm.FetchOffsets(ctx, e2eApp)
	if err != nil {
		return nil, nil, err
	}
	listed, err := adm.ListEndOffsets(ctx, soakSentences, e2eRepart)
	if err != nil {
		return nil, nil, err
	}
	committed, ends = map[string]int64{}, map[string]int64{}
	var lerr error
	listed.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			lerr = o.Err
			return
		}
		id := fmt.Sprintf("%s/%d", o.Topic, o.Partition)
		ends[id] = o.Offset
		if c, ok := resp.Lookup(o.Topic, o.Partition); ok && c.Err == nil {
			committed[id] = max(c.At, 0)
		}
	})
	return committed, ends, lerr
}

// sortedIDs returns the keys of m in order.
func sortedIDs(m map[string]int64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
