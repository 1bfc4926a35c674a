package runtime

import (
	"flag"
	"fmt"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

var poisonBench = flag.Int("poison.bench", 0, "TestOnErrorCost: records per policy (0: skip the measurement)")

// onErrorCostHCL runs testdata/poison (module %[2]s) on the topic cost with on_error %[1]q.
const onErrorCostHCL = `
application_id  = "cost"
commit_interval = "1s"
admin { listen = "" }
topic "cost" {
  partitions = 1
}
processor "p" {
  module   = "%[2]s"
  inputs   = ["cost"]
  outputs  = ["out-cost"]
  on_error = "%[1]s"
  store "counts-cost" {}
  store "windows-cost" {
    type        = "window"
    window_size = "1h"
  }
  store "sessions-cost" {
    type           = "session"
    inactivity_gap = "1h"
  }
}
`

// TestOnErrorCost measures what the guard of on_error = "skip" costs a processor without
// poison records: the time its tasks spend in process (statehost_plugin_batch_seconds) per
// record, against on_error = "fail", over the same records. The poison plugin writes four
// entries and emits one record per record. Run with -poison.bench=N.
func TestOnErrorCost(t *testing.T) {
	if *poisonBench <= 0 {
		t.Skip("a measurement: run with -poison.bench=N")
	}
	base := t.TempDir()
	mod := buildPoison(t, base)
	input := make([]poisonInput, *poisonBench)
	for i := range input {
		input[i] = poisonInput{fmt.Sprintf("k%d", i%1000), "x"}
	}
	ts := time.Now()
	for round := range 2 {
		for _, policy := range []string{"fail", "skip"} {
			brokers := cluster(t)
			cfg := loadConfig(t, base, fmt.Sprintf(onErrorCostHCL, policy, mod))
			in := start(t, cfg, brokers, func(o *Options) { o.NoWatch = true })
			cl, _ := client(t, brokers)
			for i := 0; i < len(input); i += 1000 {
				produceAt(t, cl, "cost", ts, input[i:min(i+1000, len(input))]...)
			}
			waitFor(t, 5*time.Minute, "every record", func() bool {
				return int(counterValue(t, in.rt.metrics.proc("p").processed)) == len(input)
			})
			var m dto.Metric
			if err := in.rt.metrics.batch.WithLabelValues("p").(interface{ Write(*dto.Metric) error }).Write(&m); err != nil {
				t.Fatal(err)
			}
			h := m.GetHistogram()
			t.Logf("round %d, on_error=%s: %d records in %d batches, %.0f ns per record in process",
				round, policy, len(input), h.GetSampleCount(), h.GetSampleSum()*1e9/float64(len(input)))
			if err := in.stop(t); err != nil {
				t.Fatal(err)
			}
			wipeState(t, StateDir(cfg))
		}
	}
}
