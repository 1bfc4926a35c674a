package runtime

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/statehost/statehost/restore"
)

// TaskStatus is one task in GET /v1/status.
type TaskStatus struct {
	Processor string        `json:"processor"`
	Partition int32         `json:"partition"`
	State     string        `json:"state"` // "restoring" or "running"
	Restores  []StoreStatus `json:"restores,omitempty"`
}

// StoreStatus is the last restore of a store partition of a task.
type StoreStatus struct {
	Store       string `json:"store"`
	StartOffset int64  `json:"start_offset"`
	EndOffset   int64  `json:"end_offset"`
	Restored    int64  `json:"restored"` // records applied so far
	Done        bool   `json:"done"`
}

// Status is the body of GET /v1/status.
type Status struct {
	ApplicationID string       `json:"application_id"`
	Tasks         []TaskStatus `json:"tasks"`
}

// statusBoard keeps the state of the tasks and their restores for the admin endpoint. It is a
// restore.Listener.
type statusBoard struct {
	mu    sync.Mutex
	tasks map[taskID]*TaskStatus
}

func newStatusBoard() *statusBoard { return &statusBoard{tasks: make(map[taskID]*TaskStatus)} }

func (b *statusBoard) setState(id taskID, state string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ts := b.tasks[id]
	if ts == nil {
		ts = &TaskStatus{Processor: id.proc, Partition: id.part}
		b.tasks[id] = ts
	}
	ts.State = state
}

func (b *statusBoard) remove(id taskID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.tasks, id)
}

// store returns the restore status of a store of a task; the caller holds b.mu.
func (b *statusBoard) store(id taskID, name string) *StoreStatus {
	ts := b.tasks[id]
	if ts == nil {
		ts = &TaskStatus{Processor: id.proc, Partition: id.part, State: "restoring"}
		b.tasks[id] = ts
	}
	for i := range ts.Restores {
		if ts.Restores[i].Store == name {
			return &ts.Restores[i]
		}
	}
	ts.Restores = append(ts.Restores, StoreStatus{Store: name})
	return &ts.Restores[len(ts.Restores)-1]
}

func (b *statusBoard) OnRestoreStart(e restore.StartEvent) {
	b.mu.Lock()
	defer b.mu.Unlock()
	*b.store(taskID{e.Processor, e.Partition}, e.Store) = StoreStatus{Store: e.Store, StartOffset: e.StartOffset, EndOffset: e.EndOffset}
}

func (b *statusBoard) OnBatchRestored(e restore.BatchEvent) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.store(taskID{e.Processor, e.Partition}, e.Store).Restored += int64(e.Records)
}

func (b *statusBoard) OnRestoreEnd(e restore.EndEvent) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.store(taskID{e.Processor, e.Partition}, e.Store)
	s.Restored, s.Done = e.Records, true
}

// snapshot returns the tasks sorted by processor and partition.
func (b *statusBoard) snapshot() []TaskStatus {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]TaskStatus, 0, len(b.tasks))
	for _, ts := range b.tasks {
		c := *ts
		c.Restores = slices.Clone(ts.Restores)
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b TaskStatus) int {
		return cmp.Or(cmp.Compare(a.Processor, b.Processor), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}

// Status returns the tasks of the instance and their restores.
func (r *Runtime) Status() Status {
	return Status{ApplicationID: r.cfg.ApplicationID, Tasks: r.status.snapshot()}
}

// Handler returns the admin HTTP API: GET /v1/status.
func (r *Runtime) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(r.Status())
	})
	return mux
}

// serveAdmin starts the admin listener when the configuration has one. The returned function
// stops it.
func (r *Runtime) serveAdmin() (stop func(), err error) {
	addr := r.cfg.Admin.Listen
	if addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("runtime: admin listener on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: r.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			r.log.Error("admin listener stopped", "addr", addr, "error", err)
		}
	}()
	r.log.Info("admin listening", "addr", ln.Addr().String())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}
