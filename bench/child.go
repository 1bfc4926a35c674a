package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"syscall"
	"time"
)

// spec tells a child process which contender to run and where. The parent passes it as JSON
// in the -child flag; the child runs until SIGTERM, or in restore mode until its stores are
// restored, and prints its findings as one "BENCH <json>" line on stdout.
type spec struct {
	Kind           string        // "statehost", "native", "goka", "kstreams", "quix", "scale" or "consume"
	Mode           string        // "process" (default) or "restore" (statehost, kstreams, quix)
	Brokers        []string      //
	App            string        // application ID / consumer group
	Input          string        // input topic; kind "consume": the topic to read
	Output         string        // output topic
	Guarantee      string        // statehost, kstreams, quix: "at_least_once" or "exactly_once"
	Coalesce       bool          // statehost: coalesce = true on the store; kstreams: the record cache on
	Dir            string        // the contender's state directory
	Module         string        // statehost: the count module's path
	StateMemory    string        // statehost: state_memory
	MemoryLimit    string        // statehost: memory_limit, or "" for none
	CommitInterval time.Duration //
	CPUProfile     string        // write a CPU profile of the whole run to this file
	HeapProfile    string        // write a heap profile to this file when asked to stop
	Trace          string        // write an execution trace of the whole run to this file
	Scale          *scaleSpec    `json:",omitempty"` // kind "scale": the scale profile's child (scale_child.go)
}

// childReport is what a child prints on stdout.
type childReport struct {
	// Restore mode: the records restored, and the time from the first store's restore start
	// to the last one's end.
	Restored     int64
	RestoreNanos int64
	// Kind "consume": the data records a plain consume read, and its time (consumeTopic).
	Consumed     int64 `json:",omitempty"`
	ConsumeNanos int64 `json:",omitempty"`
	// PeakRSS is the child's own peak resident set (VmHWM) as it ends, in bytes; 0 where
	// /proc is missing. The parent reads it of a child that ends by itself, whose /proc entry
	// is gone once it is waited for: the rusage would count the parent's memory too (peakRSS).
	PeakRSS int64  `json:",omitempty"`
	Error   string `json:",omitempty"`
	// The changelog topic, where the contender names it itself (quix-streams).
	Changelog string `json:",omitempty"`
}

// runChild runs one contender in this process, as the parent asked with -child.
func runChild(arg string) int {
	var s spec
	if err := json.Unmarshal([]byte(arg), &s); err != nil {
		fmt.Fprintf(os.Stderr, "bench child: bad spec: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if s.CPUProfile != "" {
		f, err := os.Create(s.CPUProfile)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench child: %v\n", err)
			return 1
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(os.Stderr, "bench child: %v\n", err)
			return 1
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	if s.Trace != "" {
		f, err := os.Create(s.Trace)
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench child: %v\n", err)
			return 1
		}
		if err := trace.Start(f); err != nil {
			fmt.Fprintf(os.Stderr, "bench child: %v\n", err)
			return 1
		}
		defer func() {
			trace.Stop()
			f.Close()
		}()
	}
	if s.HeapProfile != "" {
		// The contender runs until the profile is written: what it held while it ran, not
		// what is left as it closes.
		asked := ctx
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(context.Background())
		defer cancel()
		go func() {
			<-asked.Done()
			writeHeapProfile(s.HeapProfile)
			cancel()
		}()
	}
	var (
		rep childReport
		err error
	)
	switch s.Kind {
	case "statehost":
		rep, err = runStatehost(ctx, s)
	case "native":
		err = runNative(ctx, s)
	case "goka":
		err = runGoka(ctx, s)
	case "scale":
		rep, err = runScaleChild(ctx, s)
	case "consume":
		rep, err = runConsumeChild(ctx, s)
	default:
		err = fmt.Errorf("unknown contender kind %q", s.Kind)
	}
	if err != nil {
		rep.Error = err.Error()
		fmt.Fprintf(os.Stderr, "bench child %s %s: %v\n", s.Kind, s.App, err)
	}
	rep.PeakRSS, _ = peakRSS(os.Getpid())
	out, _ := json.Marshal(rep)
	fmt.Printf("BENCH %s\n", out)
	if err != nil {
		return 1
	}
	return 0
}

// writeHeapProfile writes the heap in use to path.
func writeHeapProfile(path string) {
	runtime.GC() // the profile reports the heap as of the last collection
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench child: %v\n", err)
		return
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		fmt.Fprintf(os.Stderr, "bench child: heap profile: %v\n", err)
	}
}
