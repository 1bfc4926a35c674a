package runtime

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/statehost/statehost/internal/wordgen"
)

// TestReloadDuringQueries reloads, on two instances of the word count, a configuration that
// adds a processor with stores while interactive queries run in a loop on both (the list of
// stores, a key and a range of the running store, a key of the store being added): under the
// race detector, the queries must not race with the reload's change of the processors
// (view.go). Then a key of the new store is answered by the instance that runs its task and
// redirected (307) there by the other: the other knows where the new processor's units run.
func TestReloadDuringQueries(t *testing.T) {
	brokers := cluster(t)
	src := withAdmin(fmt.Sprintf(wordcountHCL, "pebble", true))
	dirA, dirB := t.TempDir(), t.TempDir()
	a, evA := startRecorded(t, src, dirA, brokers)
	b, evB := startRecorded(t, src, dirB, brokers)
	poison := buildPoison(t, t.TempDir())
	cl, _ := client(t, brokers)
	lines, ref := wordgen.Sentences(200, 3)
	produce(t, cl, "sentences", lines...)
	waitCounts(t, brokers, "word-counts", wordgen.Strings(ref))
	waitFor(t, 60*time.Second, "both instances running count tasks", func() bool {
		return runningCount(a.rt) > 0 && runningCount(b.rt) > 0
	})

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	answers := map[string]map[int]int{} // path -> status -> how many
	for _, in := range []*instance{a, b} {
		base := "http://" + in.rt.local.adminAddr()
		wg.Go(func() {
			paths := []string{"/v1/stores", "/v1/stores/counts/keys/the", "/v1/stores/counts/range?limit=3",
				"/v1/stores/counts-sentences/keys/k?partition=1", "/v1/stores/counts-sentences/range?limit=3"}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				path := paths[i%len(paths)]
				resp, err := noRedirect.Get(base + path)
				if err != nil {
					continue // the test fails on what follows, not on a refused connection
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				if answers[path] == nil {
					answers[path] = map[int]int{}
				}
				answers[path][resp.StatusCode]++
				mu.Unlock()
			}
		})
	}
	next := src + fmt.Sprintf(tallyHCL, poison)
	mustReload(t, a, dirA, next)
	mustReload(t, b, dirB, next)
	waitFor(t, 60*time.Second, "tally enabled on both and its 4 tasks running", func() bool {
		running := append(evA.tasksRunning("tally"), evB.tasksRunning("tally")...)
		slices.Sort(running)
		return len(evA.of(EventProcessorEnabled)) == 1 && len(evB.of(EventProcessorEnabled)) == 1 && len(slices.Compact(running)) == 4
	})
	close(stop)
	wg.Wait()
	for _, path := range []string{"/v1/stores", "/v1/stores/counts/range?limit=3"} {
		if n := answers[path][http.StatusOK]; n == 0 {
			t.Errorf("GET %s during the reload: answers %v, want some 200", path, answers[path])
		}
	}

	// A key of the new store, in a partition each instance runs: answered there, redirected
	// by the other.
	_, body, _ := query(t, noRedirect, a, "/v1/stores")
	var stores []StoreInfo
	if err := json.Unmarshal([]byte(body), &stores); err != nil {
		t.Fatalf("GET /v1/stores: %v: %s", err, body)
	}
	if !slices.ContainsFunc(stores, func(s StoreInfo) bool { return s.Name == "counts-sentences" && s.Processor == "tally" }) {
		t.Fatalf("GET /v1/stores after the reload: %s, want the store counts-sentences of tally", body)
	}
	for _, pair := range [][2]*instance{{a, b}, {b, a}} {
		runner, other := pair[0], pair[1]
		var part int32 = -1
		for p := range int32(4) {
			if runner.rt.status.state(taskID{Processor: "tally", Partition: p}) == "running" {
				part = p
				break
			}
		}
		if part < 0 {
			t.Fatalf("instance %s runs no tally task", runner.rt.local.adminAddr())
		}
		path := fmt.Sprintf("/v1/stores/counts-sentences/keys/absent?partition=%d", part)
		if code, body, _ := query(t, noRedirect, runner, path); code != http.StatusNotFound || !strings.Contains(body, "no key") {
			t.Errorf("GET %s on the instance that runs it: %d %s, want 404 no key", path, code, body)
		}
		waitFor(t, 30*time.Second, "the other instance redirects to the one that runs tally's partition", func() bool {
			code, _, resp := query(t, noRedirect, other, path)
			return code == http.StatusTemporaryRedirect && strings.Contains(resp.Header.Get("Location"), runner.rt.local.adminAddr())
		})
	}
}
