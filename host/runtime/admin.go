package runtime

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/statehost/statehost/config"
	"github.com/statehost/statehost/host/console"
	"github.com/statehost/statehost/restore"
)

// TaskStatus is one task in GET /v1/status.
type TaskStatus struct {
	Processor string `json:"processor"`
	Partition int32  `json:"partition"`
	State     string `json:"state"` // "restoring", "migrating", "running", "waiting" or "standby"
	// Waiting says why a task waits (state "waiting"): its module cannot read its stores, and
	// it processes nothing until its processor gets one here that does (a deploy).
	Waiting string `json:"waiting,omitempty"`
	// Lag is the changelog lag (restore.Lag) of this copy of the task's stores, summed, against
	// the ends last seen (0 for a running task, which writes them; -1 when not known yet).
	Lag      int64         `json:"lag"`
	Restores []StoreStatus `json:"restores,omitempty"`
	// Module is the SHA-256 of the module it runs (a running task; one that migrates runs none
	// until its migration commits).
	Module string `json:"module,omitempty"`
	// StoreVersions are the versions of its key-value stores' entries, as of its start or its
	// last migration (migrate.go).
	StoreVersions map[string]uint32 `json:"store_versions,omitempty"`
	// Migration is the migration of one of its stores to a new module's version, while the
	// task migrates (migrate.go).
	Migration *MigrationStatus `json:"migration,omitempty"`
}

// StoreStatus is the last restore of a store partition of a task (for a standby: the
// following of its changelog, which never ends).
type StoreStatus struct {
	Store       string `json:"store"`
	StartOffset int64  `json:"start_offset"`
	EndOffset   int64  `json:"end_offset"` // the end it restores to; a standby's grows
	Total       int64  `json:"total"`      // end_offset - start_offset: the records at most to apply
	Restored    int64  `json:"restored"`   // records applied so far
	Done        bool   `json:"done"`
	// Lag is the changelog lag (restore.Lag) of this copy of the store, against the changelog
	// end last seen (0 once a restore is done: the running task writes the changelog).
	Lag int64 `json:"lag"`
	// Rate is the records applied per second since the restore began; ETASeconds the time
	// left at that rate (offsets, so an upper bound: compaction and markers leave gaps), -1
	// when unknown.
	Rate       float64 `json:"rate"`
	ETASeconds float64 `json:"eta_seconds"`

	began    time.Time
	position int64 // the next offset to apply
}

// Status is the body of GET /v1/status.
type Status struct {
	ApplicationID string            `json:"application_id"`
	Admin         string            `json:"admin,omitempty"` // the address this instance publishes
	Tasks         []TaskStatus      `json:"tasks"`
	Processors    []ProcessorStatus `json:"processors"` // the module versions
	// Summary and Page answer the query parameters of GET /v1/status (status.go): absent
	// without them.
	Summary *StatusSummary `json:"summary,omitempty"`
	Page    *StatusPage    `json:"page,omitempty"`
}

// statusBoard keeps the state of the tasks and their restores for the admin endpoint. It is a
// restore.Listener.
type statusBoard struct {
	mu      sync.Mutex
	tasks   map[taskID]*TaskStatus
	markers int64 // the transaction markers that end each changelog partition (endMarkers); set before use
}

// endMarkers is the number of transaction markers that end each changelog partition, the
// markers of restore.Lag: under exactly-once the commit marker of its last transaction.
func endMarkers(guarantee config.Guarantee) int64 {
	if guarantee == config.ExactlyOnce {
		return 1
	}
	return 0
}

func newStatusBoard() *statusBoard { return &statusBoard{tasks: make(map[taskID]*TaskStatus)} }

func (b *statusBoard) setState(id taskID, state string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	ts := b.tasks[id]
	if ts == nil {
		ts = &TaskStatus{Processor: id.Processor, Partition: id.Partition}
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
		ts = &TaskStatus{Processor: id.Processor, Partition: id.Partition, State: "restoring"}
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
	*b.store(taskID{Processor: e.Processor, Partition: e.Partition}, e.Store) = StoreStatus{Store: e.Store, StartOffset: e.StartOffset,
		EndOffset: e.EndOffset, began: time.Now(), position: e.StartOffset}
}

func (b *statusBoard) OnBatchRestored(e restore.BatchEvent) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.store(taskID{Processor: e.Processor, Partition: e.Partition}, e.Store)
	s.Restored += int64(e.Records)
	s.position = e.Offset + 1
	s.EndOffset = max(s.EndOffset, e.HighWatermark)
}

func (b *statusBoard) OnRestoreEnd(e restore.EndEvent) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.store(taskID{Processor: e.Processor, Partition: e.Partition}, e.Store)
	s.Restored, s.Done = e.Records, true
	s.position = max(s.position, s.EndOffset)
}

// snapshot returns the tasks sorted by processor and partition.
func (b *statusBoard) snapshot() []TaskStatus {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]TaskStatus, 0, len(b.tasks))
	for _, ts := range b.tasks {
		c := *ts
		c.Restores = slices.Clone(ts.Restores)
		c.Migration = migrationSnapshot(ts.Migration)
		c.StoreVersions = maps.Clone(ts.StoreVersions)
		for i := range c.Restores {
			s := &c.Restores[i]
			s.Total = max(s.EndOffset-s.StartOffset, 0)
			s.ETASeconds = -1
			if secs := time.Since(s.began).Seconds(); !s.began.IsZero() && secs > 0 {
				s.Rate = float64(s.Restored) / secs
			}
			if !s.Done {
				s.Lag = restore.Lag(0, s.EndOffset, s.position, b.markers)
			}
			switch left := max(s.EndOffset-s.position, 0); {
			case s.Done || left == 0:
				s.ETASeconds = 0
			case s.Rate > 0:
				s.ETASeconds = float64(left) / s.Rate
			}
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b TaskStatus) int {
		return cmp.Or(cmp.Compare(a.Processor, b.Processor), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}

// Status returns the tasks of the instance and their restores.
func (r *Runtime) Status() Status {
	st := Status{ApplicationID: r.cfg.ApplicationID, Admin: r.local.adminAddr(), Tasks: r.status.snapshot()}
	if v := r.deploy.versions.Load(); v != nil {
		st.Processors = *v
	}
	for i := range st.Tasks {
		ts := &st.Tasks[i]
		if ts.State == "running" {
			continue
		}
		ts.Lag = -1
		if lag, known := r.local.lag(taskID{Processor: ts.Processor, Partition: ts.Partition}); known {
			ts.Lag = lag
		}
	}
	return st
}

// maxModuleBytes bounds the body of POST /v1/processors/{name}/module.
const maxModuleBytes = 256 << 20

// Handler returns the admin HTTP API:
//
//	GET  /v1/status                    the tasks and their restores (Status); summary, state,
//	                                   processor, limit and after narrow it (status.go)
//	GET  /v1/processors                each processor's module versions ([]ProcessorStatus)
//	POST /v1/processors/{name}/module  deploy the body as the processor's module (DeployResult);
//	                                   ?partitions=0,3: as a canary, on those partitions only
//	POST /v1/processors/{name}/promote the canary's module on every task (DeployResult; canary.go)
//	POST /v1/processors/{name}/rollback back to the previous module, or end the canary (DeployResult)
//	GET  /v1/deploys                   the deploys since start, the latest first (deploys_history.go)
//	GET  /v1/stores                    the stores ([]StoreInfo, iq_page.go)
//	GET  /v1/stores/{store}/keys/{key} interactive query: a key's value (iq.go)
//	GET  /v1/stores/{store}/range      interactive query: entries as JSON lines (iq.go)
//	GET  /v1/peers/watch               a watch of this instance by another (peers.go): JSON lines
//	POST /v1/reload                    reload the configuration file (ReloadResult; reload_admin.go)
//	GET  /metrics                      Prometheus metrics, text format, not JSON (metrics.go)
//	GET  /                             the web console, and its assets under /console/ (host/console)
//
// A deploy answers 200 with the DeployResult (unchanged when the processor already runs the
// module), 400 for an empty body, 404 for an unknown processor, 409 when a task could not
// start the module (every task went back to the previous one), 413 for a body over 256 MiB,
// 422 for a module that failed its checks or its trial (nothing changed), and 504 when the
// tasks had not all switched within the wait (the module stays deployed: they switch at their
// next commit). A canary, a promotion and a rollback answer as a deploy, and 409 when another
// is in progress, there is no canary to promote or module to roll back to, or a rollback is
// refused (a store migrated irreversibly, or its reverse migration fails); 400 for bad
// partitions. Errors are {"error": "..."}; every response is JSON.
//
// With admin.token set, every request needs "Authorization: Bearer <token>" (GET /metrics
// too, unless admin.metrics_public), or it is answered 401 (auth.go); the console's page and
// assets excepted, which hold no data: the page asks for the token.
func (r *Runtime) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", func(w http.ResponseWriter, req *http.Request) {
		q, err := parseStatusQuery(req.URL.Query())
		if err != nil {
			writeError(w, http.StatusBadRequest, fmt.Errorf("%w: %w", errStatusQuery, err))
			return
		}
		writeJSON(w, http.StatusOK, r.statusFor(q))
	})
	mux.HandleFunc("GET /v1/processors", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, r.Processors())
	})
	mux.HandleFunc("POST /v1/processors/{name}/module", r.postModule)
	mux.HandleFunc("POST /v1/processors/{name}/promote", r.postPromote)
	mux.HandleFunc("POST /v1/processors/{name}/rollback", r.postRollback)
	mux.HandleFunc("GET /v1/deploys", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, r.history.list())
	})
	mux.HandleFunc("GET /v1/stores", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, r.Stores())
	})
	mux.HandleFunc("GET /v1/stores/{store}/keys/{key...}", r.iq.getKey)
	mux.HandleFunc("GET /v1/stores/{store}/range", r.iq.getRange)
	mux.HandleFunc("GET "+peerWatchPath, r.peers.serve)
	mux.HandleFunc("POST /v1/reload", r.postReload)
	mux.Handle("GET /metrics", r.metrics.handler())
	api := http.Handler(mux)
	if r.cfg.Admin.Token != "" {
		api = requireToken(mux, r.cfg.Admin.Token, r.cfg.Admin.MetricsPublic)
	}
	return guardBrowsers(console.Wrap(api), r.cfg.Admin.Token)
}

// postModule is POST /v1/processors/{name}/module: it deploys the body as the module of the
// processor name and waits for its running tasks to switch.
func (r *Runtime) postModule(w http.ResponseWriter, req *http.Request) {
	name := req.PathValue("name")
	wasm, err := io.ReadAll(http.MaxBytesReader(w, req.Body, maxModuleBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("the module is larger than %d bytes", tooBig.Limit))
			return
		}
		writeError(w, http.StatusBadRequest, fmt.Errorf("reading the module: %w", err))
		return
	}
	if len(wasm) == 0 {
		writeError(w, http.StatusBadRequest, errors.New("empty body: send the .wasm module as the request body"))
		return
	}
	var res DeployResult
	if q := req.URL.Query(); q.Has("partitions") {
		parts, perr := parsePartitions(q.Get("partitions"))
		if perr != nil {
			writeError(w, http.StatusBadRequest, perr)
			return
		}
		res, err = r.DeployCanary(req.Context(), name, "deploy", wasm, parts)
	} else {
		res, err = r.Deploy(req.Context(), name, "deploy", wasm)
	}
	r.answerDeploy(w, req, name, res, err)
}

// answerDeploy logs the outcome of a deploy, a canary, a promotion or a rollback that
// returned res and err, and answers it.
func (r *Runtime) answerDeploy(w http.ResponseWriter, req *http.Request, name string, res DeployResult, err error) {
	r.logDeploy(name, res, err, "remote", req.RemoteAddr)
	if err != nil {
		code := http.StatusInternalServerError
		switch {
		case errors.Is(err, ErrUnknownProcessor):
			code = http.StatusNotFound
		case errors.Is(err, ErrBadPartitions):
			code = http.StatusBadRequest
		case errors.Is(err, ErrInvalidModule):
			code = http.StatusUnprocessableEntity
		case errors.Is(err, ErrSwitchFailed), errors.Is(err, ErrSwitchPending), errors.Is(err, ErrCanaryPending),
			errors.Is(err, ErrNoCanary), errors.Is(err, ErrNoPrevious), errors.Is(err, ErrRollbackRefused):
			code = http.StatusConflict
		case errors.Is(err, ErrNotRunning):
			code = http.StatusServiceUnavailable
		case errors.Is(err, context.DeadlineExceeded):
			code = http.StatusGatewayTimeout
			err = fmt.Errorf("%w (module %s is deployed: the remaining tasks switch at their next commit)", err, short(res.Version.Hash))
		}
		writeError(w, code, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// logDeploy logs the outcome of a deploy of the processor name's module, with keyvals saying
// where the module came from.
func (r *Runtime) logDeploy(name string, res DeployResult, err error, keyvals ...any) {
	kv := func(more ...any) []any { return append(append([]any{"processor", name}, keyvals...), more...) }
	outcome := deployOutcome(res, err)
	r.history.add(name, outcome, res, err, keyvals...)
	switch outcome {
	case "unchanged":
		r.log.Info("module unchanged", kv("hash", short(res.Version.Hash))...)
	case "deployed":
		r.log.Info("module deployed", kv("hash", short(res.Version.Hash), "previous", short(res.Previous.Hash), "tasks", res.Tasks)...)
		r.emit(Event{Kind: EventModuleDeployed, Processor: name, ModuleHash: res.Version.Hash})
	case "pending":
		r.log.Warn("module deployed, tasks not all switched yet", kv("hash", short(res.Version.Hash), "previous", short(res.Previous.Hash), "error", err)...)
		r.emit(Event{Kind: EventModuleDeployed, Processor: name, ModuleHash: res.Version.Hash, Error: err.Error()})
	default:
		r.log.Error("module refused", kv("error", err)...)
		r.emit(Event{Kind: EventModuleRefused, Processor: name, Error: err.Error()})
	}
}

// writeJSON writes v as the indented JSON body of a response with the status code.
func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// writeError writes err as the body {"error": "..."} of a response with the status code.
func writeError(w http.ResponseWriter, code int, err error) {
	writeJSON(w, code, struct {
		Error string `json:"error"`
	}{err.Error()})
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
	if err := checkAdminExposure(ln.Addr(), r.cfg.Admin.Token); err != nil {
		ln.Close()
		return nil, fmt.Errorf("%w: it listens on %s (admin.listen %q)", err, ln.Addr(), addr)
	}
	srv := &http.Server{Handler: r.Handler(), ReadHeaderTimeout: 10 * time.Second}
	srv.RegisterOnShutdown(r.peers.close) // the watches end, without a goodbye unless one was said
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			r.log.Error("admin listener stopped", "addr", addr, "error", err)
		}
	}()
	r.log.Info("admin listening", "addr", ln.Addr().String(), "token", r.cfg.Admin.Token != "", "metrics_public", r.cfg.Admin.MetricsPublic)
	r.emit(Event{Kind: EventAdminListening, Addr: ln.Addr().String()})
	adv := r.cfg.Admin.Advertise
	if adv == "" {
		adv = advertised(ln.Addr().String())
	}
	r.local.setAdmin(adv)
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			_ = srv.Close() // a client that does not read its answer does not hold the stop
		}
	}, nil
}
