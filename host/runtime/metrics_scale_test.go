package runtime

import (
	"fmt"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/statehost/statehost/restore"
)

// restoreSeries feeds a restore of store "counts" on each of partitions standbys to a fresh
// metrics with the bound limit: partition p is p records behind. It returns the gathered series
// of the two per-partition metrics, by name.
func restoreSeries(t testing.TB, partitions int32, limit int) map[string][]*dto.Metric {
	board := newStatusBoard()
	m := newMetrics(board)
	m.partitionSeries = limit
	l := restoreListener{m: m, follow: true}
	for p := range partitions {
		board.setState(taskID{Processor: "count", Partition: p}, "standby")
		l.OnRestoreStart(restore.StartEvent{Processor: "count", Store: "counts", Partition: p, StartOffset: 0, EndOffset: 100})
		l.OnBatchRestored(restore.BatchEvent{Processor: "count", Store: "counts", Partition: p, Records: 10, Offset: 99, HighWatermark: 100 + int64(p)})
	}
	fams, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]*dto.Metric{}
	for _, f := range fams {
		if n := f.GetName(); n == "statehost_restore_records_total" || n == "statehost_restore_remaining_records" {
			out[n] = f.GetMetric()
		}
	}
	return out
}

// TestPartitionSeriesBounded checks that past Options.PartitionSeries the store partitions
// share one series per store, partition="other", and that the sums per store stay exact: the
// partitions furthest behind keep their own lag series.
func TestPartitionSeriesBounded(t *testing.T) {
	series := restoreSeries(t, 10, 4)
	records := map[string]float64{}
	for _, s := range series["statehost_restore_records_total"] {
		records[label(s, "partition")] = s.GetCounter().GetValue()
	}
	if len(records) != 5 || records["other"] != 60 || records["0"] != 10 || records["3"] != 10 {
		t.Errorf("statehost_restore_records_total by partition: %v; want 0 to 3 at 10 each, other at 60", records)
	}
	lags := map[string]float64{}
	for _, s := range series["statehost_restore_remaining_records"] {
		lags[label(s, "partition")] = s.GetGauge().GetValue()
	}
	// Partition p is p behind: 9, 8, 7, 6 keep their series; 0 to 5 sum to 15.
	want := map[string]float64{"9": 9, "8": 8, "7": 7, "6": 6, "other": 15}
	if fmt.Sprint(lags) != fmt.Sprint(want) {
		t.Errorf("statehost_restore_remaining_records by partition: %v, want %v", lags, want)
	}

	// No bound: a series per partition.
	series = restoreSeries(t, 10, -1)
	if n, m := len(series["statehost_restore_records_total"]), len(series["statehost_restore_remaining_records"]); n != 10 || m != 10 {
		t.Errorf("without a bound: %d and %d series, want 10 and 10", n, m)
	}
}

// BenchmarkPartitionSeries reports the series of the two per-partition metrics at 4,096
// store partitions, without a bound ("unbounded", as before) and with the default.
//
//	go test ./host/runtime -run '^$' -bench PartitionSeries -benchtime 1x
func BenchmarkPartitionSeries(b *testing.B) {
	for _, tc := range []struct {
		name  string
		limit int
	}{{"unbounded", -1}, {"default", defaultPartitionSeries}} {
		b.Run(tc.name, func(b *testing.B) {
			var n int
			for range b.N {
				series := restoreSeries(b, 4096, tc.limit)
				n = len(series["statehost_restore_records_total"]) + len(series["statehost_restore_remaining_records"])
			}
			b.ReportMetric(float64(n), "series")
		})
	}
}
