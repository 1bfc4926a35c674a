package runtime

import (
	"time"

	"github.com/statehost/statehost/store"
)

// MigrationStatus is the migration of a task's store in GET /v1/status (migrate.go): while it
// runs, and once its entries wait for their commit (Done).
type MigrationStatus struct {
	Module      string `json:"module"` // the SHA-256 of the module it migrates for
	Store       string `json:"store"`
	FromVersion uint32 `json:"from_version"`
	ToVersion   uint32 `json:"to_version"`
	Total       int64  `json:"total"`    // the store's entries when it began
	Migrated    int64  `json:"migrated"` // the entries the module has migrated so far
	Done        bool   `json:"done"`     // every entry is migrated; the new ones wait for the commit
	// Rate is the entries migrated per second since it began; ETASeconds the time left at that
	// rate, -1 when unknown.
	Rate       float64 `json:"rate"`
	ETASeconds float64 `json:"eta_seconds"`

	began time.Time
}

// migrationStarted shows the migration ms of a store of task id, begun at began.
func (b *statusBoard) migrationStarted(id taskID, ms MigrationStatus, began time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ts := b.task(id)
	ms.began = began
	ts.Migration = &ms
}

// migrationProgress counts n more entries migrated by task id's migration.
func (b *statusBoard) migrationProgress(id taskID, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ms := b.task(id).Migration; ms != nil {
		ms.Migrated += n
		ms.Done = ms.Migrated >= ms.Total
	}
}

// migrated forgets task id's migration: its module runs.
func (b *statusBoard) migrated(id taskID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ts := b.tasks[id]; ts != nil {
		ts.Migration = nil
	}
}

// setModule shows the hash of the module task id runs.
func (b *statusBoard) setModule(id taskID, hash string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.task(id).Module = hash
}

// setWaiting shows why task id waits ("": it does not).
func (b *statusBoard) setWaiting(id taskID, why string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.task(id).Waiting = why
}

// setVersions shows the versions of task id's stores.
func (b *statusBoard) setVersions(id taskID, versions map[string]uint32) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.task(id).StoreVersions = versions
}

// storeVersions returns the versions of t's key-value stores' committed entries.
func (t *task) storeVersions() map[string]uint32 {
	out := map[string]uint32{}
	for _, s := range t.proc.stores {
		if p := t.cl.StoreTask().Partition(s.Name); p != nil && s.Kind == store.KeyValue {
			out[s.Name] = p.Version()
		}
	}
	return out
}

// task returns the status of task id, making it when missing; the caller holds b.mu.
func (b *statusBoard) task(id taskID) *TaskStatus {
	ts := b.tasks[id]
	if ts == nil {
		ts = &TaskStatus{Processor: id.Processor, Partition: id.Partition, State: "migrating"}
		b.tasks[id] = ts
	}
	return ts
}

// migrationSnapshot returns a copy of ms with its rate and time left; nil for nil.
func migrationSnapshot(ms *MigrationStatus) *MigrationStatus {
	if ms == nil {
		return nil
	}
	c := *ms
	c.ETASeconds = -1
	if secs := time.Since(c.began).Seconds(); secs > 0 {
		c.Rate = float64(c.Migrated) / secs
	}
	switch left := max(c.Total-c.Migrated, 0); {
	case c.Done || left == 0:
		c.ETASeconds = 0
	case c.Rate > 0:
		c.ETASeconds = float64(left) / c.Rate
	}
	return &c
}
