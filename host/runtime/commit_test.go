package runtime

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestCommitReasons(t *testing.T) {
	for _, tc := range []struct {
		why        commitReason
		name       string
		deferrable bool
	}{
		{reasonInterval, "interval", true},
		{reasonSize, "size", true},
		{reasonOwed, "owed", true},
		{reasonRebalance, "rebalance", false},
		{reasonRevocation, "revocation", false},
		{reasonRestore, "restore", false},
		{reasonShutdown, "shutdown", false},
	} {
		if got := tc.why.String(); got != tc.name {
			t.Errorf("%d.String() = %q, want %q", tc.why, got, tc.name)
		}
		if got := tc.why.deferrable(); got != tc.deferrable {
			t.Errorf("%s.deferrable() = %v, want %v", tc.name, got, tc.deferrable)
		}
	}
	if got := commitReason(0).String(); got != "commitReason(0)" {
		t.Errorf("the zero reason is %q", got)
	}
}

// TestUncommitted pins the one rule for "this task has uncommitted work" down, for the parts
// of a task that need no open stores (the stores' own work is changelog.Task.HasWork's).
func TestUncommitted(t *testing.T) {
	for _, tc := range []struct {
		name string
		task *task
		want bool
	}{
		{"idle", &task{}, false},
		{"processed records", &task{last: map[string]*kgo.Record{"in": {Offset: 3}}}, true},
		{"a job runs", &task{job: &job{}}, true},
		{"failed", &task{failed: true}, true},
		{"a job was stopped", &task{abandoned: true}, true},
		{"committed", &task{last: map[string]*kgo.Record{}}, false},
	} {
		if got := tc.task.uncommitted(); got != tc.want {
			t.Errorf("%s: uncommitted() = %v, want %v", tc.name, got, tc.want)
		}
	}
}
