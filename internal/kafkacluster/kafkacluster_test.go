package kafkacluster_test

import (
	"context"
	"errors"
	"flag"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/internal/kafkacluster"
	"github.com/statehost/statehost/internal/topictest"
)

var kafkaFlag = flag.Bool("kafka", false, "run the tests on a real Kafka cluster, as "+kafkacluster.EnvVar+"=1 does")

func TestMain(m *testing.M) {
	flag.Parse()
	if *kafkaFlag {
		os.Setenv(kafkacluster.EnvVar, "1")
	}
	os.Exit(m.Run())
}

// TestThreeNodes runs a 3-node cluster through a node's SIGKILL and restart, then through a
// SIGKILL of every node and a restart of the cluster: a topic with 3 replicas, 2 of them in
// sync, takes acks=all writes while node 2 is down and holds every record afterwards.
func TestThreeNodes(t *testing.T) {
	c := kafkacluster.Start(t, 3)
	adm := admin(t, c)
	const topic = "replicated"
	createTopic(t, adm, topic, 3, map[string]*string{"min.insync.replicas": ptr("2")})
	produce(t, c, topic, "before")
	if got := values(t, c, topic); !slices.Equal(got, []string{"before"}) {
		t.Fatalf("read %q, want [before]", got)
	}
	checkBrokers(t, adm, 1, 2, 3)

	// The internal topics take 3 replicas; a group commit creates __consumer_offsets.
	commitGroup(t, c, topic)
	checkReplicas(t, adm, "__consumer_offsets", 3)
	// A topic created with the broker's default replication factor, as statehost's are.
	createTopic(t, adm, "defaulted", -1, nil)
	checkReplicas(t, adm, "defaulted", 3)

	c.Kill(t, 2)
	produce(t, c, topic, "while-2-down") // acks=all: 2 in sync of 3 suffice
	c.StartNode(t, 2)
	checkBrokers(t, adm, 1, 2, 3)
	produce(t, c, topic, "after")
	if got := values(t, c, topic); !slices.Equal(got, []string{"before", "while-2-down", "after"}) {
		t.Fatalf("read %q, want [before while-2-down after]", got)
	}

	// The whole cluster SIGKILLed at once, then started again on its data.
	c.KillAll(t)
	checkClosed(t, c)
	c.StartAll(t)
	checkBrokers(t, adm, 1, 2, 3)
	produce(t, c, topic, "after-all")
	if got := values(t, c, topic); !slices.Equal(got, []string{"before", "while-2-down", "after", "after-all"}) {
		t.Fatalf("read %q, want [before while-2-down after after-all]", got)
	}

	c.Stop(t)
	checkClosed(t, c)
}

// TestOneNode runs a 1-node cluster through a SIGKILL and a restart on its data.
func TestOneNode(t *testing.T) {
	c := kafkacluster.Start(t, 1)
	adm := admin(t, c)
	const topic = "single"
	createTopic(t, adm, topic, -1, nil)
	checkReplicas(t, adm, topic, 1)
	produce(t, c, topic, "one")
	c.Kill(t, 1)
	c.StartNode(t, 1)
	checkBrokers(t, adm, 1)
	produce(t, c, topic, "two")
	if got := values(t, c, topic); !slices.Equal(got, []string{"one", "two"}) {
		t.Fatalf("read %q, want [one two]", got)
	}
	c.Stop(t)
	checkClosed(t, c)
}

// TestScriptUsage checks scripts/kafka's exit codes for --help and bad usage, which need
// neither java nor a cluster, so it runs in the default go test.
func TestScriptUsage(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"--help"}, 0},
		{[]string{}, 2},
		{[]string{"up"}, 2},
		{[]string{"bogus", "--dir", dir}, 2},
		{[]string{"up", "--dir", dir, "--nodes", "2"}, 2},
		{[]string{"kill", "--dir", dir}, 2},
		{[]string{"start", "x", "--dir", dir}, 2},
		{[]string{"up", "--dir", dir, "--bogus"}, 2},
		{[]string{"down", "--dir", dir}, 1}, // no cluster in dir
	} {
		err := exec.Command("../../scripts/kafka", tc.args...).Run()
		got := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			got = exit.ExitCode()
		} else if err != nil {
			t.Fatalf("scripts/kafka %q: %v", tc.args, err)
		}
		if got != tc.want {
			t.Errorf("scripts/kafka %q: exit %d, want %d", tc.args, got, tc.want)
		}
	}
}

func admin(t *testing.T, c *kafkacluster.Cluster) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

func createTopic(t *testing.T, adm *kadm.Client, topic string, replicas int16, cfg map[string]*string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, 1, replicas, cfg, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("creating topic %s: %v", topic, err)
	}
}

// produce writes one record with acks=all (franz-go's default) within 60 seconds: time for a
// killed node to be fenced and its partitions led elsewhere.
func produce(t *testing.T, c *kafkacluster.Cluster, topic, value string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers()...), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(value)}).FirstErr(); err != nil {
		t.Fatalf("producing %q to %s: %v", value, topic, err)
	}
}

// commitGroup commits offset 0 of topic's partition 0 for a group, which makes the cluster
// create __consumer_offsets.
func commitGroup(t *testing.T, c *kafkacluster.Cluster, topic string) {
	t.Helper()
	adm := admin(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: 0, LeaderEpoch: -1})
	resp, err := adm.CommitOffsets(ctx, "kafkacluster-test", offs)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("committing a group's offset: %v", err)
	}
}

func checkBrokers(t *testing.T, adm *kadm.Client, want ...int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	if got := md.Brokers.NodeIDs(); !slices.Equal(got, want) {
		t.Fatalf("metadata lists brokers %v, want %v", got, want)
	}
}

// checkReplicas checks that every partition of topic has want replicas, waiting up to 30
// seconds for the broker that answers to learn of a topic just created.
func checkReplicas(t *testing.T, adm *kadm.Client, topic string, want int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		tds, err := adm.ListTopicsWithInternal(ctx, topic)
		cancel()
		if err == nil {
			err = tds[topic].Err
		}
		if err == nil {
			for _, p := range tds[topic].Partitions.Sorted() {
				if len(p.Replicas) != want {
					t.Fatalf("%s partition %d has replicas %v, want %d of them", topic, p.Partition, p.Replicas, want)
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("describing %s: %v", topic, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkClosed checks that no broker accepts connections after Stop.
func checkClosed(t *testing.T, c *kafkacluster.Cluster) {
	t.Helper()
	for i, addr := range c.Brokers() {
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conn.Close()
			t.Errorf("node %s at %s still accepts connections after Stop", strconv.Itoa(i+1), addr)
		}
	}
}

// values reads topic to its end and returns the records' values in offset order.
func values(t *testing.T, c *kafkacluster.Cluster, topic string) []string {
	t.Helper()
	var out []string
	for _, r := range topictest.Read(t, c.Brokers(), topic, false) {
		out = append(out, string(r.Value))
	}
	return out
}

func ptr(s string) *string { return &s }
