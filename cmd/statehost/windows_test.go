package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/host/runtime"
	"github.com/statehost/statehost/internal/windowtest"
)

// TestWindowCountKilled runs plugins/windowcount under exactly-once as a process and
// SIGKILLs it several times while timestamped events arrive, some of them late: every window
// closed by the end is emitted exactly once, with the count the reference computes (late
// records dropped), and never before it closed.
func TestWindowCountKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the statehost program, and kills it")
	}
	bin := buildBinary(t)
	mods := buildModules(t)
	dir := t.TempDir()
	broker := startBroker(t, brokerOptions{})
	addr := broker.addr
	cfg := filepath.Join(dir, "app.hcl")
	src := fmt.Sprintf(`application_id       = "wkill"
state_dir            = %q
processing_guarantee = "exactly_once"
session_timeout      = "2s"
kafka {
  brokers = [%q]
}
admin {
  listen = ""
}
topic "clicks" {
  partitions = 2
}
processor "wc" {
  module  = %q
  inputs  = ["clicks"]
  outputs = ["window-counts"]
  store "windows" {
    type        = "window"
    window_size = "10s"
    advance     = "5s"
    grace       = "2s"
  }
}
`, filepath.Join(dir, "state"), addr, mods["windowcount"])
	if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}

	// Events on both partitions: 20 keys, 100ms apart, every 9th 4s late, every 13th 30s late.
	const n = 3000
	base := int64(1_700_000_000_000)
	byPart := map[int32][]windowtest.Event{}
	var recs []*kgo.Record
	for i := range n {
		ts := base + int64(i)*100
		switch {
		case i%13 == 12:
			ts -= 30000
		case i%9 == 8:
			ts -= 4000
		}
		e := windowtest.Event{Key: fmt.Sprintf("k%02d", i%20), TS: ts}
		part := int32(i % 20 % 2)
		byPart[part] = append(byPart[part], e)
		recs = append(recs, windowtest.Records("clicks", part, []windowtest.Event{e})...)
	}
	// A last event per partition, far ahead, closes every window of the others.
	end := base + n*100 + 60000
	for p := range int32(2) {
		e := windowtest.Event{Key: "end", TS: end}
		byPart[p] = append(byPart[p], e)
		recs = append(recs, windowtest.Records("clicks", p, []windowtest.Event{e})...)
	}

	cl := testClient(t, addr)
	if _, err := kadm.NewClient(cl).CreateTopic(t.Context(), 2, 1, nil, "clicks"); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	// The events arrive in 40 batches, one every 400ms, while the app is killed.
	prod := startProducer(t, addr, producerOptions{every: 400 * time.Millisecond, opts: []kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner())}},
		batchesOf(recs, len(recs)/40))

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	for i := 1; i <= 4; i++ {
		app := startApp(t, bin, cfg, fmt.Sprintf("run %d", i))
		app.waitFor(t, 90*time.Second, "partitions assigned", func() bool { return len(app.events(runtime.EventPartitionsAssigned)) > 0 })
		after := time.Duration(rng.Int64N(int64(2 * time.Second)))
		select {
		case <-app.done:
			t.Fatalf("%s exited %d by itself", app.name, app.code)
		case <-time.After(after):
		}
		if err := app.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		app.wait(t, 30*time.Second)
		t.Logf("%s killed %v after its assignment", app.name, after)
	}
	app := startApp(t, bin, cfg, "final run")
	app.waitFor(t, 90*time.Second, "both tasks running", func() bool { return len(app.events(runtime.EventTaskRunning)) >= 2 })
	prod.wait(t, 0)
	crashWaitProcessed(t, addr, "wkill", 2*time.Minute, "clicks")
	want := map[string]string{}
	for _, evs := range byPart {
		for k, v := range windowtest.WindowRef(evs, 10000, 5000, 2000, end) {
			want[k] = v
		}
	}
	final := func(start, end, at int64) bool { return end+2000 <= at }
	deadline := time.Now().Add(time.Minute)
	for len(windowtest.Emitted(t, []string{addr}, "window-counts", final)) < len(want) && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
	}
	stopClean(t, app)
	windowtest.Compare(t, "window-counts", windowtest.Emitted(t, []string{addr}, "window-counts", final), want)
}
