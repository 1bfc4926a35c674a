package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestOffsetsOnlyTransactions runs the word count under exactly_once on sentences without a
// word, so that tokenize emits nothing and the instance's transactions commit input offsets
// only, one right after the other (commit_interval 10ms). On Apache Kafka 4.x, whose
// transactions v2 (KIP-890) let a TxnOffsetCommit that comes first in a transaction be refused
// with CONCURRENT_TRANSACTIONS while the previous transaction still writes its markers, such
// commits aborted (and revived their tasks) before the runtime waited for the previous
// transaction to complete. No transaction may abort, and every sentence must be committed.
func TestOffsetsOnlyTransactions(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	broker := startBroker(t, brokerOptions{})
	addr := broker.addr
	app := startInstance(t, bin, addr, filepath.Join(dir, "app"), "app",
		appOptions{guarantee: "exactly_once", commitInterval: 10 * time.Millisecond})
	app.waitTasks(t, 60*time.Second)

	cl := testClient(t, addr, kgo.DefaultProduceTopic("sentences"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	defer cl.Close()
	const batches, batch = 150, 4
	for range batches {
		recs := make([]*kgo.Record, batch)
		for i := range recs {
			recs[i] = &kgo.Record{Value: []byte(" ")}
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		err := cl.ProduceSync(ctx, recs...).FirstErr()
		cancel()
		if err != nil {
			t.Fatalf("producing blank sentences: %v", err)
		}
		time.Sleep(30 * time.Millisecond)
	}
	crashWaitProcessed(t, addr, e2eApp, 60*time.Second, "sentences")
	if app.exited() {
		t.Fatalf("the app exited %d", app.code)
	}
	aborted, err := metricSum(app.admin, "statehost_transactions_aborted_total")
	if err != nil {
		t.Fatal(err)
	}
	processed, err := metricSum(app.admin, "statehost_records_processed_total", "processor", "tokenize")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d blank sentences produced, %v processed (a revived task processes again), all committed; %v transactions aborted",
		batches*batch, processed, aborted)
	if aborted != 0 {
		t.Errorf("%v transactions aborted, want 0", aborted)
	}
	stopClean(t, app.appProcess)
}
