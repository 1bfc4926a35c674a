package runtime

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/statehost/statehost/changelog"
	"github.com/statehost/statehost/host/engine"
	"github.com/statehost/statehost/internal/topictest"
	"github.com/statehost/statehost/store"
)

// TestRecordsLeaveAfterEachCall checks that the records a plugin call writes and emits reach
// the broker when the call returns, not at the next commit (a task queues them during the
// call): with a commit interval of a minute, what a wall-clock punctuation of an idle task
// writes and emits, and what a batch of a processor without punctuations (count) writes and
// emits, are in their topics within seconds, before any offset is committed.
func TestRecordsLeaveAfterEachCall(t *testing.T) {
	brokers := cluster(t)
	cfg := loadConfig(t, t.TempDir(), `
application_id  = "flush"
commit_interval = "1m"
admin { listen = "" }
topic "cmds" {
  partitions = 1
}
topic "words" {
  partitions = 1
}
processor "probe" {
  module  = "{{probe}}"
  inputs  = ["cmds"]
  outputs = ["out"]
  store "ticks" {}
}
processor "count" {
  module  = "{{count}}"
  inputs  = ["words"]
  outputs = ["counts"]
  store "counts" {}
}
`)
	start(t, cfg, brokers)
	cl, _ := client(t, brokers)
	produceKeyed(t, cl, "words", []string{"a", "b", "a"})
	// The probe's punctuations count in ticks/n and emit each count under "tick".
	waitFor(t, 30*time.Second, "the probe's punctuations to emit", func() bool {
		got, _ := latest(t, brokers, "out")
		return got["tick"] != ""
	})
	if got, _ := latest(t, brokers, "flush-ticks-changelog"); got["n"] == "" {
		t.Fatalf("the punctuations' writes are not in the changelog: %v", got)
	}
	topictest.WaitLatest(t, brokers, "counts", map[string]string{"a": "2", "b": "1"}, 15*time.Second)
	if got, _ := latest(t, brokers, "flush-counts-changelog"); got["a"] != "2" || got["b"] != "1" {
		t.Fatalf("the batch's writes are not in the changelog: %v", got)
	}
	if c := committed(t, brokers, "flush", "words"); len(c) != 0 {
		t.Fatalf("offsets committed already (%v): the test shows nothing", c)
	}
}

// TestEmitWaitsForRoomUntilItsDeadline fills the producer of a task (its client may buffer 3
// records; the broker holds every produce) and checks that the emitter the engine calls waits
// for room until the plugin call's context ends, then returns an error wrapping the context's
// that names the output topic and partition; and that an emit goes through once the broker
// answers.
func TestEmitWaitsForRoomUntilItsDeadline(t *testing.T) {
	c, brokers := kfakeCluster(t)
	_, adm := client(t, brokers)
	if _, err := adm.CreateTopic(context.Background(), 2, 1, nil, "out"); err != nil {
		t.Fatal(err)
	}
	pcl, _ := client(t, brokers, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MaxBufferedRecords(3))
	producer, err := changelog.NewProducer(pcl)
	if err != nil {
		t.Fatal(err)
	}
	m, err := store.Open(store.Settings{Dir: t.TempDir(), MemoryBytes: store.MinMemoryBytes})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	cl, err := changelog.OpenTask(m, producer, changelog.TaskConfig{AppID: "emit", Processor: "p", Partition: 1})
	if err != nil {
		t.Fatal(err)
	}
	tk := &task{id: taskID{Processor: "p", Partition: 1}, cl: cl, rt: &Runtime{outParts: map[string]int32{"out": 2}}}
	defer tk.cl.Close(context.Background())

	release := make(chan struct{})
	var once sync.Once
	answer := func() { once.Do(func() { close(release) }) }
	defer answer()
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		c.SleepControl(func() { <-release })
		return nil, nil, false
	})
	emit := func(ctx context.Context, key string) error {
		return emitter{tk}.Emit(ctx, engine.OutputRecord{Topic: "out", Key: []byte(key), Value: []byte("v")})
	}
	for _, k := range []string{"a", "b"} { // the two places the producer has
		if err := emit(context.Background(), k); err != nil {
			t.Fatal(err)
		}
	}
	call, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	began := time.Now()
	emitted := make(chan error, 1)
	go func() { emitted <- emit(call, "c") }()
	select {
	case err = <-emitted:
	case <-time.After(5 * time.Second):
		answer() // lets it return, after the test
		t.Fatal("an emit into a full producer did not return at its deadline")
	}
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "output to out partition") {
		t.Fatalf("emit into a full producer: %v", err)
	}
	if waited := time.Since(began); waited < 250*time.Millisecond {
		t.Fatalf("the emit returned after %v, before its deadline (300ms)", waited)
	}
	answer()
	if err := emit(context.Background(), "d"); err != nil {
		t.Fatalf("emit once the broker answers: %v", err)
	}
	if err := tk.cl.Commit(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	got, n := topictest.Latest(t, brokers, "out")
	if n != 3 || got["a"] != "v" || got["b"] != "v" || got["d"] != "v" {
		t.Fatalf("out: %d records, latest %v; want a, b and d", n, got)
	}
}
