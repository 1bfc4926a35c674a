package runtime

import (
	"testing"

	"github.com/statehost/statehost/changelog"
	"github.com/statehost/statehost/config"
	"github.com/statehost/statehost/restore"
	"github.com/statehost/statehost/store"
)

// TestMetricRemainingRecordsIsTheLag feeds the same standby events to the metrics, the status
// board and the local state, and checks that statehost_restore_remaining_records, the store's
// lag and the task's lag in the admin API (the task's is also the warmups') are the same
// restore.Lag: under exactly-once a standby that has applied every record is at 0, though the
// commit marker after its last record is an offset.
func TestMetricRemainingRecordsIsTheLag(t *testing.T) {
	id := taskID{Processor: "count", Partition: 2}
	for _, tc := range []struct {
		name      string
		guarantee config.Guarantee
		last, hw  int64 // the offset of the last record applied, the high watermark then
		want      int64
	}{
		{name: "at_least_once, caught up", guarantee: config.AtLeastOnce, last: 41, hw: 42, want: 0},
		{name: "at_least_once, behind", guarantee: config.AtLeastOnce, last: 41, hw: 50, want: 8},
		{name: "exactly_once, caught up: the marker at 42", guarantee: config.ExactlyOnce, last: 41, hw: 43, want: 0},
		{name: "exactly_once, behind", guarantee: config.ExactlyOnce, last: 41, hw: 50, want: 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			board := newStatusBoard()
			board.setState(id, "standby")
			board.markers = endMarkers(tc.guarantee)
			m := newMetrics(board)
			local := newLocalState([]*processor{{cfg: &config.Processor{Name: id.Processor},
				stores: []changelog.StoreSpec{{Name: "counts", Options: store.Options{Backend: store.Pebble}}}}})
			local.markers = endMarkers(tc.guarantee)
			for _, l := range []restore.Listener{board, restoreListener{m: m, follow: true}, local} {
				l.OnRestoreStart(restore.StartEvent{Processor: id.Processor, Store: "counts", Partition: id.Partition, StartOffset: 0, EndOffset: 10})
				l.OnBatchRestored(restore.BatchEvent{Processor: id.Processor, Store: "counts", Partition: id.Partition, Records: 1, Offset: tc.last, HighWatermark: tc.hw})
			}
			lag, known := local.lag(id)
			if !known || lag != tc.want {
				t.Errorf("task lag = %d (known %t), want %d", lag, known, tc.want)
			}
			if ts := board.snapshot(); len(ts) != 1 || len(ts[0].Restores) != 1 || ts[0].Restores[0].Lag != tc.want {
				t.Errorf("status board %+v, want one store with lag %d", ts, tc.want)
			}
			fams, err := m.reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			var series int
			for _, f := range fams {
				if f.GetName() != "statehost_restore_remaining_records" {
					continue
				}
				for _, s := range f.GetMetric() {
					series++
					if got := int64(s.GetGauge().GetValue()); got != tc.want {
						t.Errorf("statehost_restore_remaining_records = %d, want %d", got, tc.want)
					}
				}
			}
			if series != 1 {
				t.Errorf("%d series of statehost_restore_remaining_records, want 1", series)
			}
		})
	}
}
