package main

import (
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/statehost/statehost/host/runtime"
)

// A migration that the runtime's status lists gets a "migration progress" line every interval
// with its entries migrated of its total, and goes once the status no longer lists it.
func TestMigrationProgressLines(t *testing.T) {
	prog := newRestoreProgress(hclog.NewNullLogger(), nil, time.Hour) // its loop logs nothing within the test
	defer prog.Close()
	ms := migrationsOf([]runtime.TaskStatus{
		{Processor: "count", Partition: 2, State: "migrating", Migration: &runtime.MigrationStatus{
			Store: "counts", FromVersion: 1, ToVersion: 2, Total: 4000, Migrated: 1000}},
		{Processor: "count", Partition: 1, State: "running"},
	})
	now := time.Now()
	if lines := prog.tick(now, nil, ms); len(lines) != 0 {
		t.Fatalf("lines before an interval: %v", lines)
	}
	ms[0].Migrated = 3000
	lines := prog.tick(now.Add(2*time.Hour), nil, ms)
	if len(lines) != 1 || lines[0][0] != migrationLine {
		t.Fatalf("lines = %v, want one migration line", lines)
	}
	kv := keyvals(lines[0][1:])
	if kv["partition"] != int32(2) || kv["store"] != "counts" || kv["migrated"] != int64(3000) || kv["total"] != int64(4000) ||
		kv["percent"] != int64(75) || kv["versions"] != "version 1 to 2" {
		t.Errorf("line %v", kv)
	}
	if lines := prog.tick(now.Add(4*time.Hour), nil, nil); len(lines) != 0 {
		t.Errorf("lines after the migration ended: %v", lines)
	}
	prog.mu.Lock()
	defer prog.mu.Unlock()
	if len(prog.migs) != 0 {
		t.Errorf("%d migrations left after it ended", len(prog.migs))
	}
}

// statehost status shows a task's migration on its line: the store and versions, the entries
// migrated of the store's, the rate and the time left.
func TestStatusShowsMigration(t *testing.T) {
	var b strings.Builder
	writeStatus(&b, runtime.Status{ApplicationID: "app", Tasks: []runtime.TaskStatus{
		{Processor: "count", Partition: 0, State: "running"},
		{Processor: "count", Partition: 1, State: "migrating", Migration: &runtime.MigrationStatus{
			Store: "counts", FromVersion: 1, ToVersion: 2, Total: 4000, Migrated: 1000, Rate: 500, ETASeconds: 6}},
	}})
	line := ""
	for _, l := range strings.Split(b.String(), "\n") {
		if strings.HasPrefix(l, "count_1") {
			line = strings.Join(strings.Fields(l), " ")
		}
	}
	if want := "count_1 migrating 0 counts (version 1 to 2) 1000 of 4000 500/s 6s"; line != want {
		t.Errorf("status line %q, want %q; all:\n%s", line, want, b.String())
	}
}
