package runtime

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/statehost/statehost/internal/kafkacluster"
)

// TestCreatedTopicsReplication has every topic the runtime creates (the topic block's, the
// repartition, output, dead-letter and changelog topics) take kafka.replication_factor, on a
// 3-node cluster: kfake's, or with STATEHOST_TEST_KAFKA=1 Apache Kafka's (whose own default
// is 3 there, so the test asks for 2 as well as 3).
func TestCreatedTopicsReplication(t *testing.T) {
	var brokers []string
	if kafkacluster.Requested() {
		brokers = kafkacluster.Start(t, 3).Brokers()
	} else {
		c, err := kfake.NewCluster(kfake.NumBrokers(3))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		brokers = c.ListenAddrs()
	}
	for _, rf := range []int16{2, 3} {
		t.Run(fmt.Sprint(rf), func(t *testing.T) {
			app := fmt.Sprintf("rf%d", rf)
			src := fmt.Sprintf(`application_id = %q
admin { listen = "" }
kafka {
  brokers            = [%q]
  replication_factor = %d
}
topic "sentences-%[1]s" {
  partitions = 2
}
repartition "words" {
  partitions = 2
}
processor "tokenize" {
  module  = "{{tokenize}}"
  inputs  = ["sentences-%[1]s"]
  outputs = ["%[1]s-words-repartition"]
}
processor "count" {
  module   = "{{count}}"
  inputs   = ["%[1]s-words-repartition"]
  outputs  = ["counts-%[1]s"]
  on_error = "dead_letter"
  store "counts" {}
}
`, app, brokers[0], rf)
			cfg := loadConfig(t, t.TempDir(), src)
			rt, err := New(context.Background(), Options{Config: cfg, Brokers: brokers})
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			rt.Close()
			_, adm := client(t, brokers)
			want := []string{"sentences-" + app, app + "-words-repartition", "counts-" + app, app + "-count-dlq", app + "-counts-changelog"}
			// Another broker than the one that created a topic may list it a moment later.
			var td kadm.TopicDetails
			waitFor(t, 15*time.Second, "every topic listed", func() bool {
				td, err = adm.ListTopics(context.Background(), want...)
				if err != nil {
					t.Fatal(err)
				}
				for _, name := range want {
					if d, ok := td[name]; !ok || d.Err != nil {
						return false
					}
				}
				return true
			})
			for _, name := range want {
				d := td[name]
				for _, p := range d.Partitions {
					if len(p.Replicas) != int(rf) {
						t.Errorf("topic %s partition %d has replicas %v, want %d", name, p.Partition, p.Replicas, rf)
					}
				}
			}
		})
	}
}
