package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestPartialPurgeSurvivesRestart checks what host/runtime's repartition purge relies on: a
// partition purged with DeleteRecords below its last record keeps its offsets across a
// restart. (kfake reloads a partition emptied by DeleteRecords at offset 0, so the runtime
// never empties one.)
func TestPartialPurgeSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	b, err := Start(Options{Listen: "127.0.0.1:0", DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.DefaultProduceTopic("p"))
	if err != nil {
		t.Fatal(err)
	}
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, -1, nil, "p"); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	offs := make(kadm.Offsets)
	offs.Add(kadm.Offset{Topic: "p", Partition: 0, At: 2})
	if resp, err := adm.DeleteRecords(ctx, offs); err != nil || resp.Error() != nil {
		t.Fatal(err, resp.Error())
	}
	cl.Close()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b2 := start(t, dir)
	cl2 := client(t, b2)
	ends, _ := kadm.NewClient(cl2).ListEndOffsets(testContext(t), "p")
	starts, _ := kadm.NewClient(cl2).ListStartOffsets(testContext(t), "p")
	e, _ := ends.Lookup("p", 0)
	s, _ := starts.Lookup("p", 0)
	if e.Offset != 3 || s.Offset != 2 {
		t.Errorf("after a purge to 2 of 3 and a clean restart: start %d end %d, want 2 and 3", s.Offset, e.Offset)
	}
}
