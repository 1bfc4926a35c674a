package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/internal/topictest"
)

// TestLoopingRecord runs two processors of the hostile guest, p1 over in1 and p2 over in2
// (2 partitions each), and sends p1 a record that loops until the batch time limit (10 s, the
// default), on partition 0. It is tried again alone, loops again, and is then skipped or
// dead-lettered as p1's on_error says. Meanwhile probes keep going to in2 and to in1
// partition 1: the other tasks must process and commit them while the record loops (one
// task's stuck record holds back no other task), the application must keep running (under
// exactly-once the default timeouts used to make the broker abort the transaction every
// ~20 s until run exited with PRODUCER_FENCED), and every healthy record is counted exactly
// once, those after the looping record on its partition too. The test logs the longest time
// a probe took to reach its output topic while the record looped.
func TestLoopingRecord(t *testing.T) {
	bin := buildBinary(t)
	for _, c := range []struct{ guarantee, onError string }{
		{"exactly_once", "skip"},
		{"exactly_once", "dead_letter"},
		{"at_least_once", "skip"},
	} {
		t.Run(c.guarantee+"_"+c.onError, func(t *testing.T) {
			t.Parallel()
			loopingRecord(t, bin, c.guarantee, c.onError)
		})
	}
}

func loopingRecord(t *testing.T, bin, guarantee, onError string) {
	dir := t.TempDir()
	br := startBroker(t, brokerOptions{})
	createTopics(t, br.addr, map[string]int{"in1": 2, "in2": 2, "out1": 2, "out2": 2})
	app := &hostileApp{guarantee: guarantee, procs: []hostileProc{
		{name: "p1", input: "in1", output: "out1", onError: onError},
		{name: "p2", input: "in2", output: "out2"},
	}}
	if guarantee == "at_least_once" {
		app.commitInterval = time.Second // its default is 30 s; outputs go out at once anyway
	}
	cfg := app.write(t, dir, br.addr)
	p := startApp(t, bin, cfg, "app")

	counts := map[string]int{} // key -> healthy records produced
	send := func(topic string, part int32, key, value string) {
		produceKeyed(t, br.addr, topic, keyed{key, value, part})
		counts[topic+"/"+key]++
	}
	for part := range int32(2) {
		send("in1", part, fmt.Sprintf("warm1-%d", part), "")
		send("in2", part, fmt.Sprintf("warm2-%d", part), "")
	}
	seen := followFirstSeen(t, br.addr, "out1", "out2")
	waitSeen(t, p, seen, 60*time.Second, "out1/warm1-0", "out1/warm1-1", "out2/warm2-0", "out2/warm2-1")

	produceKeyed(t, br.addr, "in1", keyed{"bad", "loop", 0})
	loopAt := time.Now()
	for range 3 {
		send("in1", 0, "after", "") // behind the looping record: held until it is dropped
	}
	poison := func() float64 {
		name, labels := "statehost_records_skipped_total", []string{"processor", "p1", "reason", "timeout"}
		if onError == "dead_letter" {
			name, labels = "statehost_records_dead_lettered_total", []string{"processor", "p1"}
		}
		v, err := metricSum(app.admin, name, labels...)
		if err != nil {
			t.Fatalf("reading the metrics: %v", err)
		}
		return v
	}

	// Probes, every 200ms, until the looping record is dropped and 2 s more.
	var (
		probes        []string // their output keys
		producedAt    = map[string]time.Time{}
		droppedAt     time.Time
		seenWhileLoop bool // a probe sent 1 s after the looping record came out while it looped
	)
	deadline := time.Now().Add(90 * time.Second)
	for i := 0; droppedAt.IsZero() || time.Since(droppedAt) < 2*time.Second; i++ {
		if p.exited() {
			t.Fatalf("run exited %d while the record looped", p.code)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the looping record was not dropped within 90 s (poison metric %v)", poison())
		}
		for _, pr := range []struct {
			topic, out string
			part       int32
		}{{"in2", "out2", int32(i % 2)}, {"in1", "out1", 1}} {
			key := fmt.Sprintf("probe-%s-%d", pr.topic, i)
			send(pr.topic, pr.part, key, "")
			producedAt[pr.out+"/"+key] = time.Now()
			probes = append(probes, pr.out+"/"+key)
		}
		if droppedAt.IsZero() {
			// Read what came out before the metric: a probe seen, then the metric still 0,
			// came out while the record looped.
			early := slices.ContainsFunc(probes, func(k string) bool {
				_, ok := seen.at(k)
				return ok && producedAt[k].After(loopAt.Add(time.Second))
			})
			switch n := poison(); {
			case n > 0:
				droppedAt = time.Now()
			case early:
				seenWhileLoop = true
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	waitSeen(t, p, seen, 60*time.Second, probes...)
	waitSeen(t, p, seen, 60*time.Second, "out1/after")

	var stall time.Duration
	for _, k := range probes {
		if at := producedAt[k]; at.After(loopAt) && at.Before(droppedAt) {
			s, _ := seen.at(k)
			stall = max(stall, s.Sub(at))
		}
	}
	t.Logf("%s %s: the record looped for %v; the longest a probe took meanwhile: %v", guarantee, onError,
		droppedAt.Sub(loopAt).Round(100*time.Millisecond), stall.Round(time.Millisecond))
	if !seenWhileLoop {
		t.Errorf("no probe came out while the record looped (the longest a probe took: %v)", stall)
	}
	if n := poison(); n != 1 {
		t.Errorf("poison records counted: %v, want 1", n)
	}
	if code := p.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("run exited %d on SIGTERM", code)
	}

	// Every healthy record counted once, in order; nothing of the looping record.
	hist := map[string][]string{}
	for _, topic := range []string{"out1", "out2"} {
		for key, vals := range topictest.Histories(t, []string{br.addr}, topic) {
			hist["in"+topic[3:]+"/"+key] = vals
		}
	}
	for key, vals := range hist {
		if counts[key] == 0 {
			t.Errorf("%s: outputs %v of a key never sent healthy", key, vals)
		}
	}
	for key, n := range counts {
		want := make([]string, n)
		for i := range want {
			want[i] = strconv.Itoa(i + 1)
		}
		if !slices.Equal(hist[key], want) {
			t.Errorf("%s: outputs %v, want %v", key, hist[key], want)
		}
	}
	if guarantee == "exactly_once" {
		// No transaction aborted meanwhile: every record written is committed.
		for _, topic := range []string{"out1", "out2"} {
			all, committed := topictest.Read(t, []string{br.addr}, topic, false), topictest.Read(t, []string{br.addr}, topic, true)
			if len(all) != len(committed) {
				t.Errorf("%s: %d records, of which %d committed: transactions aborted", topic, len(all), len(committed))
			}
		}
	}
	if guarantee == "exactly_once" {
		// No transaction aborted meanwhile: every record written is committed.
		for _, topic := range []string{"out1", "out2"} {
			all, committed := topictest.Read(t, []string{br.addr}, topic, false), topictest.Read(t, []string{br.addr}, topic, true)
			if len(all) != len(committed) {
				t.Errorf("%s: %d records, of which %d committed: transactions aborted", topic, len(all), len(committed))
			}
		}
	}
	if onError == "dead_letter" {
		recs := topictest.Read(t, []string{br.addr}, "hostile-p1-dlq", true)
		if len(recs) != 1 || string(recs[0].Key) != "bad" {
			t.Fatalf("dead letters: %d records (%v), want the looping record once", len(recs), recs)
		}
		// Why, in words: the time limit, not the trap the host's stop makes.
		var why string
		for _, h := range recs[0].Headers {
			if h.Key == "statehost.error" {
				why = string(h.Value)
			}
		}
		if !strings.Contains(why, "batch time limit") || strings.Contains(why, "unreachable") {
			t.Errorf("statehost.error of the dead letter: %q, want the batch time limit and no \"unreachable\"", why)
		}
	}
}

// firstSeen is when each key of the topics a follower reads first came out, as
// "topic/key".
type firstSeen struct {
	mu sync.Mutex
	m  map[string]time.Time
}

func (s *firstSeen) at(key string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.m[key]
	return at, ok
}

// followFirstSeen follows topics from their start, read_committed, until the test ends.
func followFirstSeen(t *testing.T, addr string, topics ...string) *firstSeen {
	t.Helper()
	s := &firstSeen{m: map[string]time.Time{}}
	cl := testClient(t, addr, kgo.ConsumeTopics(topics...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(100*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			now := time.Now()
			s.mu.Lock()
			fs.EachRecord(func(r *kgo.Record) {
				k := r.Topic + "/" + string(r.Key)
				if _, ok := s.m[k]; !ok {
					s.m[k] = now
				}
			})
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		cl.Close()
	})
	return s
}

// waitSeen waits until every key has come out; it fails the test if the app exits first.
func waitSeen(t *testing.T, p *appProcess, s *firstSeen, timeout time.Duration, keys ...string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var missing []string
		for _, k := range keys {
			if _, ok := s.at(k); !ok {
				missing = append(missing, k)
			}
		}
		switch {
		case len(missing) == 0:
			return
		case p.exited():
			t.Fatalf("run exited %d; outputs missing: %v", p.code, missing)
		case time.Now().After(deadline):
			t.Fatalf("outputs missing after %v: %v", timeout, missing)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSharedPartitionOffsets: p1 (the hostile guest) and p2 (count) read the same partition.
// A record loops in p1 while p2 processes it and the records after it, and p2's task
// commits. The partition's committed offset must not pass the looping record until p1 has
// committed past it: the test SIGKILLs the instance while the record loops, and the restarted
// instance must still process the records behind it for p1. Under exactly-once every record
// is counted once by each processor (p1's ended jobs before the looping record may have been
// committed while it looped); at-least-once may count some twice in p2. (Under exactly-once
// the two tasks take the partition's records together, so p2 waits for p1 meanwhile.)
func TestSharedPartitionOffsets(t *testing.T) {
	bin := buildBinary(t)
	for _, guarantee := range []string{"at_least_once", "exactly_once"} {
		t.Run(guarantee, func(t *testing.T) {
			t.Parallel()
			sharedPartitionOffsets(t, bin, guarantee)
		})
	}
}

func sharedPartitionOffsets(t *testing.T, bin, guarantee string) {
	dir := t.TempDir()
	br := startBroker(t, brokerOptions{})
	createTopics(t, br.addr, map[string]int{"in": 1, "out1": 1, "out2": 1})
	app := &hostileApp{guarantee: guarantee, commitInterval: 500 * time.Millisecond, procs: []hostileProc{
		{name: "p1", input: "in", output: "out1", onError: "skip"},
		{name: "p2", input: "in", output: "out2", module: buildModules(t)["count"], store: "counts"},
	}}
	cfg := app.write(t, dir, br.addr)
	p := startApp(t, bin, cfg, "app")
	seen := followFirstSeen(t, br.addr, "out1", "out2")
	produceKeyed(t, br.addr, "in", keyed{"k1", "", 0}, keyed{"k2", "", 0})
	waitSeen(t, p, seen, 60*time.Second, "out1/k1", "out1/k2", "out2/k1", "out2/k2")
	produceKeyed(t, br.addr, "in", keyed{"bad", "loop", 0}, keyed{"k3", "", 0}, keyed{"k4", "", 0})
	if guarantee == "at_least_once" {
		// p2 processes everything; let it commit a few times while p1's record loops. (Under
		// exactly-once the tasks of a shared partition take its records together, and commit
		// only together: p2's outputs wait for p1.)
		waitSeen(t, p, seen, 60*time.Second, "out2/bad", "out2/k3", "out2/k4")
	} else {
		time.Sleep(time.Second) // the record loops; both tasks have it
	}
	cl := testClient(t, br.addr)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	// What is read before the poison metric shows 0 was read while the record looped.
	looping := func() bool {
		n, err := metricSum(app.admin, "statehost_records_skipped_total", "processor", "p1")
		if err != nil {
			t.Fatal(err)
		}
		return n == 0
	}
	checked := 0
	for range 6 {
		time.Sleep(app.commitInterval)
		offs, err := adm.FetchOffsets(t.Context(), "hostile")
		if err != nil {
			t.Fatal(err)
		}
		_, k3 := seen.at("out1/k3")
		if !looping() {
			break
		}
		checked++
		if o, ok := offs.Lookup("in", 0); ok && o.At > 2 {
			t.Fatalf("committed offset of in/0: %d, past the looping record (offset 2) that p1 has not committed", o.At)
		}
		if k3 {
			t.Fatal("p1 processed k3 while the record before it looped")
		}
	}
	if checked == 0 {
		t.Fatal("the record was dropped before the committed offsets could be checked while it looped")
	}
	p.stop(t, syscall.SIGKILL)
	t.Logf("committed offsets checked %d times while the record looped", checked)

	p = startApp(t, bin, cfg, "app-restarted")
	waitSeen(t, p, seen, 90*time.Second, "out1/k3", "out1/k4")
	stopClean(t, p)
	out1 := topictest.Histories(t, []string{br.addr}, "out1")
	out2 := topictest.Histories(t, []string{br.addr}, "out2")
	for _, k := range []string{"k1", "k2", "k3", "k4"} {
		if len(out1[k]) == 0 {
			t.Errorf("p1 never counted %s", k)
		}
		if guarantee == "exactly_once" && (!slices.Equal(out1[k], []string{"1"}) || !slices.Equal(out2[k], []string{"1"})) {
			t.Errorf("%s: p1 counted %v, p2 %v; want [1] each", k, out1[k], out2[k])
		}
	}
	if len(out1["bad"]) > 0 {
		t.Errorf("p1 emitted for the looping record: %v", out1["bad"])
	}
	if guarantee == "exactly_once" && !slices.Equal(out2["bad"], []string{"1"}) {
		t.Errorf("bad: p2 counted %v, want [1]", out2["bad"])
	}
}

// TestBusyTaskKilledExactlyOnce: under exactly-once, the commits made while a task's record
// loops take what the task's ended jobs did (a record just before the looping one comes out
// meanwhile), its store applying later. The test SIGKILLs the instance while the record
// loops: the restarted instance must count every record once, the one before the looping
// record included (its count is in the committed changelog, not yet in the store).
func TestBusyTaskKilledExactlyOnce(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	br := startBroker(t, brokerOptions{})
	createTopics(t, br.addr, map[string]int{"in": 1, "out": 1})
	app := &hostileApp{guarantee: "exactly_once", procs: []hostileProc{{name: "p1", input: "in", output: "out", onError: "skip"}}}
	cfg := app.write(t, dir, br.addr)
	p := startApp(t, bin, cfg, "app")
	seen := followFirstSeen(t, br.addr, "out")
	produceKeyed(t, br.addr, "in", keyed{"k", "", 0})
	waitSeen(t, p, seen, 60*time.Second, "out/k")
	// Two produces: most likely two polls, so that the record before the looping one ends a
	// job of its own.
	produceKeyed(t, br.addr, "in", keyed{"k", "", 0})
	produceKeyed(t, br.addr, "in", keyed{"bad", "loop", 0}, keyed{"k", "", 0})
	looping := func() bool {
		n, err := metricSum(app.admin, "statehost_records_skipped_total", "processor", "p1")
		if err != nil {
			t.Fatal(err)
		}
		return n == 0
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		hist := topictest.Histories(t, []string{br.addr}, "out")
		if !looping() {
			t.Fatal("the record was dropped before the test could kill the instance while it looped")
		}
		if slices.Equal(hist["k"], []string{"1", "2"}) {
			break // the record before the looping one came out while it loops
		}
		if time.Now().After(deadline) {
			t.Fatalf("the count of the record before the looping one did not come out while it looped: %v", hist["k"])
		}
		time.Sleep(100 * time.Millisecond)
	}
	p.stop(t, syscall.SIGKILL)

	p = startApp(t, bin, cfg, "app-restarted")
	deadline = time.Now().Add(90 * time.Second)
	for {
		hist := topictest.Histories(t, []string{br.addr}, "out")
		if len(hist["k"]) >= 3 {
			if !slices.Equal(hist["k"], []string{"1", "2", "3"}) || len(hist["bad"]) > 0 {
				t.Fatalf("outputs %v, want k counted 1, 2, 3 and nothing for the looping record", hist)
			}
			break
		}
		if p.exited() || time.Now().After(deadline) {
			t.Fatalf("the restarted instance did not count the record after the looping one (exited %v): %v", p.exited(), hist)
		}
		time.Sleep(200 * time.Millisecond)
	}
	stopClean(t, p)
}
