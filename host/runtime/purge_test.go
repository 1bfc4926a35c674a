package runtime

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/internal/broker"
	"github.com/statehost/statehost/internal/kafkacluster"
)

// TestPurgeSurvivesBrokerRestart: the runtime purges a repartition partition below its
// committed offset. The statehost broker (kfake with DataDir) reloads a partition emptied by
// DeleteRecords at offset 0 after a restart, while the group's committed offset stays at N:
// records then written at offsets 0..N-1 would never be read. The purge keeps the last
// committed record, so the offsets survive the restart and every record is counted. With
// STATEHOST_TEST_KAFKA=1 it runs on an Apache Kafka cluster, stopped and started again.
func TestPurgeSurvivesBrokerRestart(t *testing.T) {
	dir := t.TempDir()
	brokers, restart := purgeBroker(t, filepath.Join(dir, "broker"))
	cfg := loadConfig(t, dir, `
application_id  = "rp"
state_dir       = "state"
commit_interval = "100ms"
admin { listen = "" }
topic "sentences" {
  partitions = 1
}
repartition "words" {
  partitions = 1
}
processor "tokenize" {
  module  = "{{tokenize}}"
  inputs  = ["sentences"]
  outputs = ["words"]
}
processor "count" {
  module  = "{{count}}"
  inputs  = ["words"]
  outputs = ["word-counts"]
  store "counts" {}
}
`)
	in := start(t, cfg, brokers)
	cl, adm := client(t, brokers)
	produce(t, cl, "sentences", "x x x x x")
	waitCounts(t, brokers, "word-counts", map[string]string{"x": "5"})
	waitFor(t, 20*time.Second, "the repartition topic to be purged", func() bool {
		s, err := adm.ListStartOffsets(context.Background(), "rp-words-repartition")
		if err != nil {
			return false
		}
		o, _ := s.Lookup("rp-words-repartition", 0)
		return o.Offset == 4 // all but the last committed record
	})
	if err := in.stop(t); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	brokers = restart()
	cl2, adm2 := client(t, brokers)
	ends, _ := adm2.ListEndOffsets(context.Background(), "rp-words-repartition")
	e, _ := ends.Lookup("rp-words-repartition", 0)
	t.Logf("after the broker restart: repartition end offset %d, committed %v", e.Offset, committed(t, brokers, "rp", "rp-words-repartition"))

	// Seven words reach the repartition partition before count fetches it.
	var recs []*kgo.Record
	for range 7 {
		recs = append(recs, &kgo.Record{Topic: "rp-words-repartition", Partition: 0, Key: []byte("x"), Value: []byte("1")})
	}
	if err := cl2.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	start(t, cfg, brokers)
	waitCounts(t, brokers, "word-counts", map[string]string{"x": "12"})
}

// purgeBroker starts the broker of TestPurgeSurvivesBrokerRestart, the statehost broker with
// the data directory data, or with STATEHOST_TEST_KAFKA=1 an Apache Kafka cluster; restart
// stops it (SIGTERM) and starts it again on its data, and returns its new addresses.
func purgeBroker(t *testing.T, data string) (brokers []string, restart func() []string) {
	t.Helper()
	if kafkacluster.Requested() {
		c := kafkacluster.Start(t, kafkacluster.Nodes(t))
		return c.Brokers(), func() []string {
			c.Stop(t)
			c.StartAll(t)
			return c.Brokers()
		}
	}
	b, err := broker.Start(broker.Options{Listen: "127.0.0.1:0", DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	return []string{b.Addr()}, func() []string {
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		b2, err := broker.Start(broker.Options{Listen: "127.0.0.1:0", DataDir: data})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { b2.Close() })
		return []string{b2.Addr()}
	}
}
