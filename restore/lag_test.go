package restore

import "testing"

func TestLag(t *testing.T) {
	for _, tc := range []struct {
		name                          string
		start, end, position, markers int64
		want                          int64
	}{
		{name: "empty changelog, no checkpoint", end: 0, want: 0},
		{name: "empty changelog under exactly-once", end: 0, markers: 1, want: 0},
		{name: "no checkpoint: the whole log", end: 10, want: 10},
		{name: "no checkpoint under exactly-once: the last commit marker is no record", end: 10, markers: 1, want: 9},
		{name: "caught up", end: 10, position: 10, want: 0},
		{name: "behind", end: 10, position: 4, want: 6},
		{name: "behind under exactly-once", end: 10, position: 4, markers: 1, want: 5},
		// The last record at 8, its commit marker at 9: the store has applied every record.
		{name: "caught up under exactly-once", end: 10, position: 9, markers: 1, want: 0},
		{name: "caught up, past the marker", end: 10, position: 10, markers: 1, want: 0},
		{name: "no checkpoint, truncated log: from the log start", start: 6, end: 10, want: 4},
		{name: "checkpoint before the log start: from the log start", start: 6, end: 10, position: 3, want: 4},
		{name: "checkpoint before the log start under exactly-once", start: 6, end: 10, position: 3, markers: 1, want: 3},
		{name: "position at the log start", start: 6, end: 10, position: 6, want: 4},
		{name: "position past the log start", start: 6, end: 10, position: 8, want: 2},
		{name: "everything deleted", start: 10, end: 10, want: 0},
		{name: "position past the end seen", end: 10, position: 15, want: 0},
		{name: "position past the end under exactly-once", end: 10, position: 15, markers: 1, want: 0},
		// Two changelogs of a task, summed: ends 10 and 20, positions 9 and 15, one marker each.
		{name: "sum of two partitions under exactly-once", end: 30, position: 24, markers: 2, want: 4},
		{name: "sum of two caught-up partitions under exactly-once", end: 30, position: 28, markers: 2, want: 0},
	} {
		if got := Lag(tc.start, tc.end, tc.position, tc.markers); got != tc.want {
			t.Errorf("%s: Lag(%d, %d, %d, %d) = %d, want %d", tc.name, tc.start, tc.end, tc.position, tc.markers, got, tc.want)
		}
	}
}
