package runtime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// The deploy history of an instance, for GET /v1/deploys and the web console: each deploy
// (statehost deploy, or a changed module file) this instance made or refused since it started,
// the latest first, up to deployHistoryLen of them. The modules loaded at start are not in it:
// /v1/processors has each processor's current and previous module.

// deployHistoryLen bounds the deploys GET /v1/deploys keeps.
const deployHistoryLen = 100

// DeployRecord is one deploy in GET /v1/deploys.
type DeployRecord struct {
	Time      time.Time `json:"time"`
	Processor string    `json:"processor"`
	// Result is "deployed", "unchanged" (the module ran already), "pending" (deployed, but its
	// tasks had not all switched when the deploy stopped waiting: they switch at their next
	// commit) or "refused" (the processor runs on as it was).
	Result string `json:"result"`
	// Hash is the module's SHA-256 (absent when it was refused before it was read), Previous
	// the one it replaced.
	Hash     string `json:"hash,omitempty"`
	Previous string `json:"previous,omitempty"`
	// Origin is where it came from: "api <remote address>" or "file <path>".
	Origin string `json:"origin"`
	Tasks  int    `json:"tasks"`           // running tasks switched to it
	Error  string `json:"error,omitempty"` // why it was refused, or is pending
}

// deployHistory keeps the latest deploys. Its zero value is empty and ready.
type deployHistory struct {
	mu      sync.Mutex
	records []DeployRecord // oldest first
}

// deployOutcome is the Result of a deploy that returned res and err.
func deployOutcome(res DeployResult, err error) string {
	switch {
	case err == nil && res.Unchanged:
		return "unchanged"
	case err == nil:
		return "deployed"
	case res.Version.Hash != "" && (errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)):
		return "pending" // validated and deployed; the wait ended before every task switched
	}
	return "refused"
}

// add records a deploy of the processor name's module: its outcome (deployOutcome), res and
// err as Deploy returned them, and origin, the key and value logDeploy logs ("remote", addr or
// "file", path).
func (h *deployHistory) add(name, outcome string, res DeployResult, err error, origin ...any) {
	rec := DeployRecord{Time: time.Now(), Processor: name, Result: outcome, Hash: res.Version.Hash,
		Previous: res.Previous.Hash, Tasks: res.Tasks, Error: errorText(err)}
	if len(origin) == 2 {
		kind := origin[0]
		if kind == "remote" {
			kind = "api"
		}
		rec.Origin = fmt.Sprint(kind, " ", origin[1])
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.records) == deployHistoryLen {
		h.records = slices.Delete(h.records, 0, 1)
	}
	h.records = append(h.records, rec)
}

// list returns the deploys, the latest first.
func (h *deployHistory) list() []DeployRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := slices.Clone(h.records)
	slices.Reverse(out)
	if out == nil {
		out = []DeployRecord{}
	}
	return out
}
