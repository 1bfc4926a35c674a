package runtime

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/statehost/statehost/internal/topictest"
	"github.com/statehost/statehost/internal/wordgen"
)

// noRedirect is an HTTP client that shows redirects instead of following them.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// query GETs path from the instance's admin listener with c and returns the status, the body
// and the response.
func query(t testing.TB, c *http.Client, in *instance, path string) (int, string, *http.Response) {
	t.Helper()
	resp, err := c.Get("http://" + in.rt.local.adminAddr() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body), resp
}

// withAdmin turns the admin listener of a test configuration on, on a free port.
func withAdmin(src string) string {
	return strings.Replace(src, `admin { listen = "" }`, `admin { listen = "127.0.0.1:0" }`, 1)
}

// TestInteractiveQueries: two instances share the word count. Each answers a key of a task it
// runs from its store, and redirects (307) a key of a task the other runs to the other's admin
// address, where it is answered; absent keys are 404, unknown stores 404; ranges of the two
// instances together hold every word once, bounds and limits apply, and a range of a
// partition the other runs is redirected.
func TestInteractiveQueries(t *testing.T) {
	for _, backend := range []string{"pebble", "memory"} {
		t.Run(backend, func(t *testing.T) { testInteractiveQueries(t, backend) })
	}
}

func testInteractiveQueries(t *testing.T, backend string) {
	brokers := cluster(t)
	src := withAdmin(fmt.Sprintf(wordcountHCL, backend, true))
	a := start(t, loadConfig(t, t.TempDir(), src), brokers)
	b := start(t, loadConfig(t, t.TempDir(), src), brokers)
	cl, _ := client(t, brokers)
	lines, ref := wordgen.Sentences(1000, 7)
	produce(t, cl, "sentences", lines...)
	waitCounts(t, brokers, "word-counts", wordgen.Strings(ref))
	waitFor(t, 60*time.Second, "both instances to run count tasks and to know who runs what", func() bool {
		return runningCount(a.rt) > 0 && runningCount(b.rt) > 0 && runningCount(a.rt)+runningCount(b.rt) == 3 &&
			len(a.rt.iq.owners.snapshot()) == 2 && len(b.rt.iq.owners.snapshot()) == 2
	})
	runs := func(in *instance, part int32) bool {
		return in.rt.status.state(taskID{Processor: "count", Partition: part}) == "running"
	}

	words := slices.Sorted(func(yield func(string) bool) {
		for w := range ref {
			if !yield(w) {
				return
			}
		}
	})
	var direct, redirected int
	waitFor(t, 30*time.Second, "every word to read its count through instance a", func() bool {
		direct, redirected = 0, 0
		for _, w := range words {
			path := "/v1/stores/counts/keys/" + url.PathEscape(w)
			code, body, resp := query(t, noRedirect, a, path)
			part := KeyPartition([]byte(w), 3, 0)
			switch {
			case runs(a, part) && code == http.StatusOK:
				direct++
			case !runs(a, part) && code == http.StatusTemporaryRedirect:
				loc := resp.Header.Get("Location")
				if !strings.HasPrefix(loc, "http://"+b.rt.local.adminAddr()+"/") {
					t.Fatalf("%s redirected to %q, want instance b at %s", w, loc, b.rt.local.adminAddr())
				}
				code, body, _ = query(t, http.DefaultClient, a, path) // followed
				redirected++
			default:
				t.Logf("%s (partition %d, a runs it: %v): %d %s", w, part, runs(a, part), code, body)
				return false
			}
			if code != http.StatusOK || body != strconv.Itoa(ref[w]) {
				return false // committed at the next commit
			}
		}
		return true
	})
	if direct == 0 || redirected == 0 {
		t.Errorf("%d words answered directly, %d redirected: want both", direct, redirected)
	}

	if code, _, _ := query(t, http.DefaultClient, a, "/v1/stores/counts/keys/no-such-word"); code != http.StatusNotFound {
		t.Errorf("absent key: %d, want 404", code)
	}
	if code, _, _ := query(t, http.DefaultClient, a, "/v1/stores/nope/keys/x"); code != http.StatusNotFound {
		t.Errorf("unknown store: %d, want 404", code)
	}
	if code, _, _ := query(t, http.DefaultClient, a, "/v1/stores/counts/range?limit=0"); code != http.StatusBadRequest {
		t.Errorf("limit=0: %d, want 400", code)
	}

	// Ranges: a's and b's together are every word once.
	seen := map[string]string{}
	for _, in := range []*instance{a, b} {
		code, body, resp := query(t, http.DefaultClient, in, "/v1/stores/counts/range?limit=100000")
		if code != http.StatusOK {
			t.Fatalf("range: %d %s", code, body)
		}
		var want []string
		for p := range int32(3) {
			if runs(in, p) {
				want = append(want, strconv.Itoa(int(p)))
			}
		}
		if got := resp.Header.Get("X-Statehost-Partitions"); got != strings.Join(want, ",") {
			t.Errorf("range partitions %q, want the partitions it runs %q", got, strings.Join(want, ","))
		}
		for _, e := range rangeLines(t, body) {
			if _, dup := seen[*e.Key]; dup {
				t.Errorf("%s in two ranges", *e.Key)
			}
			seen[*e.Key] = *e.Value
			if KeyPartition([]byte(*e.Key), 3, 0) != e.Partition {
				t.Errorf("%s listed in partition %d", *e.Key, e.Partition)
			}
		}
	}
	if len(seen) != len(ref) {
		t.Errorf("the ranges hold %d words, want %d", len(seen), len(ref))
	}
	for w, n := range ref {
		if seen[w] != strconv.Itoa(n) {
			t.Errorf("range: %s = %q, want %d", w, seen[w], n)
		}
	}

	// Bounds are inclusive, the limit holds, and a partition that b runs is redirected.
	var mine, theirs int32 = -1, -1
	for p := range int32(3) {
		if runs(a, p) {
			mine = p
		} else {
			theirs = p
		}
	}
	var inMine []string
	for _, w := range words {
		if KeyPartition([]byte(w), 3, 0) == mine {
			inMine = append(inMine, w)
		}
	}
	from, to := inMine[1], inMine[3]
	_, body, _ := query(t, http.DefaultClient, a, fmt.Sprintf("/v1/stores/counts/range?partition=%d&from=%s&to=%s", mine, url.QueryEscape(from), url.QueryEscape(to)))
	var keys []string
	for _, e := range rangeLines(t, body) {
		keys = append(keys, *e.Key)
	}
	if !slices.Equal(keys, inMine[1:4]) {
		t.Errorf("range [%s, %s] of partition %d = %v, want %v", from, to, mine, keys, inMine[1:4])
	}
	if _, body, _ = query(t, http.DefaultClient, a, "/v1/stores/counts/range?limit=5"); len(rangeLines(t, body)) != 5 {
		t.Errorf("limit=5 gave %d lines", len(rangeLines(t, body)))
	}
	code, _, resp := query(t, noRedirect, a, fmt.Sprintf("/v1/stores/counts/range?partition=%d", theirs))
	if code != http.StatusTemporaryRedirect || !strings.Contains(resp.Header.Get("Location"), b.rt.local.adminAddr()) {
		t.Errorf("range of b's partition %d from a: %d to %q, want 307 to b", theirs, code, resp.Header.Get("Location"))
	}
}

// rangeLines parses a range answer.
func rangeLines(t testing.TB, body string) []entry {
	t.Helper()
	var out []entry
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		var e entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("range line %q: %v", sc.Text(), err)
		}
		if e.Key == nil || e.Value == nil {
			t.Fatalf("range line %q: the test's keys and values are UTF-8", sc.Text())
		}
		out = append(out, e)
	}
	return out
}

// TestQueryDuringRestore: while a task restores its store, a key query answers 503 with
// Retry-After; with stale=true it reads the restoring copy; once the task runs, the value.
func TestQueryDuringRestore(t *testing.T) {
	c, brokers := kfakeCluster(t)
	cl, adm := client(t, brokers)
	dir := t.TempDir()
	cfg := loadConfig(t, dir, `
application_id  = "iq"
commit_interval = "100ms"
admin { listen = "127.0.0.1:0" }
topic "keys" {
  partitions = 1
}
processor "count" {
  module  = "{{count}}"
  inputs  = ["keys"]
  outputs = ["key-counts"]
  store "counts" {}
}
`)
	in := start(t, cfg, brokers)
	keys := make([]string, 300)
	ref := map[string]int{}
	for i := range keys {
		keys[i] = "k" + strconv.Itoa(i)
		ref[keys[i]] = 1
	}
	produceKeyed(t, cl, "keys", keys)
	waitCounts(t, brokers, "key-counts", wordgen.Strings(ref))
	if err := in.stop(t); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(StateDir(cfg)); err != nil {
		t.Fatal(err)
	}

	// Fetches of the changelog wait until release: the restore cannot end.
	md, err := adm.Metadata(context.Background(), "iq-counts-changelog")
	if err != nil {
		t.Fatal(err)
	}
	clID := md.Topics["iq-counts-changelog"].ID
	release := make(chan struct{})
	c.ControlKey(int16(kmsg.Fetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		for _, ft := range kreq.(*kmsg.FetchRequest).Topics {
			if ft.Topic == "iq-counts-changelog" || ft.TopicID == clID {
				c.SleepControl(func() { <-release })
			}
		}
		return nil, nil, false
	})
	in = start(t, cfg, brokers)
	// The task is restoring before its restore has read the changelog's end and started.
	waitFor(t, 30*time.Second, "the task's restore to start", func() bool {
		ts := in.rt.status.snapshot()
		return len(ts) == 1 && ts[0].State == "restoring" && len(ts[0].Restores) == 1 && in.rt.local.adminAddr() != ""
	})
	code, body, resp := query(t, noRedirect, in, "/v1/stores/counts/keys/k1")
	if code != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("a key of a restoring task: %d (Retry-After %q) %s, want 503 with Retry-After", code, resp.Header.Get("Retry-After"), body)
	}
	if code, body, _ := query(t, noRedirect, in, "/v1/stores/counts/keys/k1?stale=true"); code != http.StatusOK && code != http.StatusNotFound {
		t.Errorf("a stale read of a restoring task: %d %s, want an answer from its copy (200 or 404)", code, body)
	}
	// GET /v1/status shows the restore's progress and the module versions, though the loop is
	// busy restoring.
	code, body, _ = query(t, noRedirect, in, "/v1/status")
	var st Status
	if err := json.Unmarshal([]byte(body), &st); err != nil || code != http.StatusOK {
		t.Fatalf("status during the restore: %d %s %v", code, body, err)
	}
	if len(st.Tasks) != 1 || st.Tasks[0].State != "restoring" || len(st.Tasks[0].Restores) != 1 {
		t.Fatalf("status during the restore: %+v", st.Tasks)
	}
	rs := st.Tasks[0].Restores[0]
	if rs.Store != "counts" || rs.Total != 300 || rs.Restored != 0 || rs.Done || rs.ETASeconds != -1 || rs.Lag != 300 {
		t.Errorf("restore progress %+v, want counts: 0 of 300, not done, no estimate yet, 300 behind", rs)
	}
	if len(st.Processors) != 1 || st.Processors[0].Name != "count" || st.Processors[0].Current.Hash == "" {
		t.Errorf("status processors %+v, want count with its module version", st.Processors)
	}
	if st.Admin != in.rt.local.adminAddr() {
		t.Errorf("status admin %q, want %q", st.Admin, in.rt.local.adminAddr())
	}
	close(release)
	waitFor(t, 30*time.Second, "the task to run and answer", func() bool {
		code, body, _ := query(t, noRedirect, in, "/v1/stores/counts/keys/k1")
		return code == http.StatusOK && body == "1"
	})
}

// TestStatusAfterRestore: once restored, a task's status shows its restore done, all of it
// applied, and lag 0.
func TestStatusAfterRestore(t *testing.T) {
	brokers := cluster(t)
	cl, _ := client(t, brokers)
	src := withAdmin(fmt.Sprintf(wordcountHCL, "pebble", true))
	cfg := loadConfig(t, t.TempDir(), src)
	in := start(t, cfg, brokers)
	lines, ref := wordgen.Sentences(500, 4)
	produce(t, cl, "sentences", lines...)
	waitCounts(t, brokers, "word-counts", wordgen.Strings(ref))
	if err := in.stop(t); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(StateDir(cfg)); err != nil {
		t.Fatal(err)
	}
	in = start(t, cfg, brokers)
	waitFor(t, 30*time.Second, "7 running tasks", func() bool { return running(in.rt) == 7 })
	var total int64
	for _, ts := range in.rt.Status().Tasks {
		if ts.Lag != 0 {
			t.Errorf("task %s_%d: lag %d, want 0", ts.Processor, ts.Partition, ts.Lag)
		}
		for _, rs := range ts.Restores {
			if !rs.Done || rs.Restored != rs.Total || rs.ETASeconds != 0 || rs.Rate <= 0 {
				t.Errorf("task %s_%d restore %+v: want done, all of it, eta 0, a rate", ts.Processor, ts.Partition, rs)
			}
			total += rs.Total
		}
	}
	if total == 0 {
		t.Error("no restore in the status")
	}
}

// startKeysPair starts two instances of application app, whose processor count runs module
// (a name of modules) over the topic keys of partitions partitions, with its store counts,
// its output key-counts and an admin listener; and returns them with a client of brokers.
func startKeysPair(t *testing.T, brokers []string, app string, partitions int, module string) (a, b *instance, cl *kgo.Client) {
	src := fmt.Sprintf(`
application_id  = %q
commit_interval = "100ms"
admin { listen = "127.0.0.1:0" }
topic "keys" {
  partitions = %d
}
processor "count" {
  module  = "{{%s}}"
  inputs  = ["keys"]
  outputs = ["key-counts"]
  store "counts" {}
}
`, app, partitions, module)
	a = start(t, loadConfig(t, t.TempDir(), src), brokers)
	b = start(t, loadConfig(t, t.TempDir(), src), brokers)
	cl, _ = client(t, brokers)
	return a, b, cl
}

// TestQuerySpecialKeys: keys with '?', '#', '%', '/' and bytes that are not UTF-8 are read
// through either instance (redirected with their escapes intact), and a range with empty
// bounds lists them all, the non-UTF-8 one in base64.
func TestQuerySpecialKeys(t *testing.T) {
	brokers := cluster(t)
	a, b, cl := startKeysPair(t, brokers, "keys", 4, "count")
	keys := []string{"a?b", "a#b", "100%", "x/y", "../up", "\xff\xfe", "plain", "sp ace"}
	ref := map[string]int{}
	for _, k := range keys {
		ref[k] = 1
	}
	produceKeyed(t, cl, "keys", keys)
	waitCounts(t, brokers, "key-counts", wordgen.Strings(ref))
	waitFor(t, 60*time.Second, "both instances to run tasks and know who runs what", func() bool {
		return runningCount(a.rt) > 0 && runningCount(b.rt) > 0 && runningCount(a.rt)+runningCount(b.rt) == 4 &&
			len(a.rt.iq.owners.snapshot()) == 2
	})
	for _, k := range keys {
		waitFor(t, 10*time.Second, fmt.Sprintf("key %q through instance a", k), func() bool {
			code, body, _ := query(t, http.DefaultClient, a, "/v1/stores/counts/keys/"+url.PathEscape(k)+"?stale=false")
			return code == http.StatusOK && body == "1"
		})
	}
	found := map[string]bool{}
	for _, in := range []*instance{a, b} {
		code, body, _ := query(t, http.DefaultClient, in, "/v1/stores/counts/range?from=&to=&limit=100")
		if code != http.StatusOK {
			t.Fatalf("range: %d %s", code, body)
		}
		sc := bufio.NewScanner(strings.NewReader(body))
		for sc.Scan() {
			var e entry
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Fatal(err)
			}
			switch {
			case e.Key != nil:
				found[*e.Key] = true
			case e.KeyBase64 != nil:
				k, err := base64.StdEncoding.DecodeString(*e.KeyBase64)
				if err != nil {
					t.Fatal(err)
				}
				found[string(k)] = true
			}
		}
	}
	for _, k := range keys {
		if !found[k] {
			t.Errorf("the ranges miss %q (found %v)", k, found)
		}
	}
}

// TestQueryKeyPartition: a store keyed otherwise than its input records (countv2 keeps
// "seen:<word>", written by the task of <word>) holds such a key in the partition of the
// word, not of the key's own hash. Without ?partition the query looks where the key's hash
// points and answers 404 (or redirects to the instance that runs that partition, which
// answers 404); with ?partition=N, the partition of the word, it answers the value, from
// either instance (redirected to the one that runs N). A partition out of range is 400.
func TestQueryKeyPartition(t *testing.T) {
	brokers := cluster(t)
	a, b, cl := startKeysPair(t, brokers, "iqpart", 3, "countv2")
	// Words whose "seen:" key hashes to another partition than the word itself.
	var words []string
	for i := 0; len(words) < 20; i++ {
		w := "w" + strconv.Itoa(i)
		if KeyPartition([]byte(w), 3, 0) != KeyPartition([]byte("seen:"+w), 3, 0) {
			words = append(words, w)
		}
	}
	produceKeyed(t, cl, "keys", words)
	ref := map[string]string{}
	for _, w := range words {
		ref[w] = "1"
	}
	waitCounts(t, brokers, "key-counts", ref)
	offsets := map[string]string{} // word -> the offset of its record: the value of "seen:<word>"
	for _, r := range topictest.Read(t, brokers, "keys", false) {
		offsets[string(r.Key)] = strconv.FormatInt(r.Offset, 10)
	}
	waitFor(t, 60*time.Second, "both instances to run count tasks and to know who runs what", func() bool {
		return runningCount(a.rt) > 0 && runningCount(b.rt) > 0 && runningCount(a.rt)+runningCount(b.rt) == 3 &&
			len(a.rt.iq.owners.snapshot()) == 2 && len(b.rt.iq.owners.snapshot()) == 2
	})

	var redirected int
	waitFor(t, 30*time.Second, "every seen: key to read through ?partition", func() bool {
		redirected = 0
		for _, w := range words {
			part := KeyPartition([]byte(w), 3, 0)
			path := fmt.Sprintf("/v1/stores/counts/keys/%s?partition=%d", url.PathEscape("seen:"+w), part)
			code, body, resp := query(t, http.DefaultClient, a, path)
			if resp.Request.URL.Host != a.rt.local.adminAddr() {
				redirected++
			}
			if code != http.StatusOK || body != offsets[w] {
				t.Logf("seen:%s?partition=%d: %d %q, want %q", w, part, code, body, offsets[w])
				return false // committed at the next commit
			}
			if got := resp.Header.Get("X-Statehost-Partition"); got != strconv.Itoa(int(part)) {
				t.Errorf("seen:%s?partition=%d answered from partition %s", w, part, got)
			}
		}
		return true
	})
	if redirected == 0 || redirected == len(words) {
		t.Errorf("%d of %d queries were redirected: want some answered by each instance", redirected, len(words))
	}
	for _, w := range words {
		code, body, resp := query(t, http.DefaultClient, a, "/v1/stores/counts/keys/"+url.PathEscape("seen:"+w))
		hashed := strconv.Itoa(int(KeyPartition([]byte("seen:"+w), 3, 0)))
		if code != http.StatusNotFound || resp.Header.Get("X-Statehost-Partition") != hashed {
			t.Errorf("seen:%s without ?partition: %d from partition %q (%s), want 404 from partition %s, its hash's",
				w, code, resp.Header.Get("X-Statehost-Partition"), body, hashed)
		}
	}
	for _, bad := range []string{"3", "-1", "x"} {
		if code, _, _ := query(t, http.DefaultClient, a, "/v1/stores/counts/keys/w0?partition="+bad); code != http.StatusBadRequest {
			t.Errorf("?partition=%s: %d, want 400", bad, code)
		}
	}
}
