package engine

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Defaults of Config.
const (
	// DefaultMemoryLimit is the default of Config.MemoryLimit: 64 MiB per instance.
	DefaultMemoryLimit = 64 << 20
	// DefaultBatchTimeout is the default of Config.BatchTimeout.
	DefaultBatchTimeout = 10 * time.Second
	// DefaultGuestLogRate is the default of Config.GuestLogRate: 100 lines a second per task.
	DefaultGuestLogRate = 100
	// DefaultGuestLogBurst is the default of Config.GuestLogBurst: 1000 lines per task.
	DefaultGuestLogBurst = 1000
	// wasmPageSize is the size of a WebAssembly memory page.
	wasmPageSize = 64 << 10
	// maxMemoryLimit is the largest memory a wasm32 guest can address.
	maxMemoryLimit = 4 << 30
)

// Config holds the settings of an Engine.
type Config struct {
	// CacheDir is the directory of wazero's on-disk compilation cache, created if missing.
	// The runtime passes <state_dir>/<application_id>/wasm-cache. Default: "" keeps compiled
	// code in memory only, so every process start compiles again.
	CacheDir string

	// MemoryLimit is the most linear memory one instance may have, in bytes, rounded up to
	// whole 64 KiB pages. A guest that grows past it sees memory.grow fail (a Go guest then
	// dies with "out of memory"). Default: DefaultMemoryLimit (64 MiB); at most 4 GiB.
	MemoryLimit int64

	// BatchTimeout bounds each guest call: one batch, a punctuation, the start of an
	// instance (_initialize and statehost_init). A guest that runs longer is stopped at its
	// next loop iteration or function call and its batch fails with ErrTimeout. Compile puts
	// the checks that make this possible into every module (package loopcheck; see the
	// decision note 20261130_loop_checks.md). Default: DefaultBatchTimeout (10 s).
	//
	// The limit measures the guest's own running time and the host's work for it, but not
	// the time a host function waits for room in a producer through the task's HostWaits
	// (Task.Waits): a slow or absent broker does not make a batch time out (that wait has a
	// bound of its own, the producer's). The call's context (the one host functions and the
	// Emitter get) is canceled when the limit runs out, with the cause
	// context.DeadlineExceeded.
	//
	// A negative value disables the limit. Canceling the context of ProcessBatch or
	// Instantiate still stops the guest (ErrCanceled), and ends a paused wait at once.
	BatchTimeout time.Duration

	// Logger receives the engine's and the guests' log entries; the engine logs under the
	// sub-logger "engine" and guests under "guest" with the keys processor, partition and
	// offset. Default: a logger that discards everything.
	Logger hclog.Logger

	// GuestLogRate is how many lines a second each task's guests may log, the entries of the
	// log host function and the lines written to stdout and stderr together: a token bucket
	// of this rate and GuestLogBurst lines, kept by the task's LogLimiter (Task.LogLimiter),
	// drops the lines beyond it and reports how many. Default: DefaultGuestLogRate (100
	// lines a second); negative: no limit.
	GuestLogRate float64

	// GuestLogBurst is how many lines a task's guests may log at once, beyond GuestLogRate:
	// the size of the token bucket, full at the start. Default: DefaultGuestLogBurst (1000
	// lines); at least 1.
	GuestLogBurst int

	// OnGuestLogsDropped, when set, is told after each guest call that dropped log lines how
	// many it dropped, with the task's processor and partition (the runtime counts them in a
	// metric). It runs on the call's goroutine and must not block. Default: nil.
	OnGuestLogsDropped func(processor string, partition int32, lines int64)

	// Now is the clock of wall-clock punctuations. Default: time.Now.
	Now func() time.Time
}

// withDefaults returns c with zero settings replaced by their defaults, or an error naming
// each invalid setting.
func (c Config) withDefaults() (Config, error) {
	var errs []error
	if c.MemoryLimit == 0 {
		c.MemoryLimit = DefaultMemoryLimit
	}
	if c.MemoryLimit < wasmPageSize || c.MemoryLimit > maxMemoryLimit {
		errs = append(errs, fmt.Errorf("engine: MemoryLimit %d is outside [64 KiB, 4 GiB]", c.MemoryLimit))
	}
	if c.BatchTimeout == 0 {
		c.BatchTimeout = DefaultBatchTimeout
	}
	if c.GuestLogRate == 0 {
		c.GuestLogRate = DefaultGuestLogRate
	}
	if c.GuestLogBurst == 0 {
		c.GuestLogBurst = DefaultGuestLogBurst
	}
	if c.GuestLogBurst < 1 {
		errs = append(errs, fmt.Errorf("engine: GuestLogBurst %d is less than 1", c.GuestLogBurst))
	}
	if c.Logger == nil {
		c.Logger = hclog.NewNullLogger()
	}
	return c, errors.Join(errs...)
}

// memoryLimitPages returns MemoryLimit in whole pages.
func (c Config) memoryLimitPages() uint32 {
	return uint32((c.MemoryLimit + wasmPageSize - 1) / wasmPageSize)
}
