// Command bench runs statehost's keyed word count side by side with a hand-written Go
// pipeline of the same semantics and durability (the practical upper bound) and with goka,
// on one embedded broker, and prints their rates, the ratios between them, their changelog
// volume, restore speed and peak memory.
//
//	cd bench && go run .          # the quick profile, under 3 minutes
//	cd bench && go run . --full   # the profile of the README's performance section
//
// The last lines are machine-readable: "RESULT <name>=<value>".
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"

	"github.com/statehost/statehost/internal/broker"
	"github.com/statehost/statehost/pluginsdk/wasmbuild"
)

func main() {
	os.Exit(mainRun())
}

// contenders are every way of running the count, in the order they run.
var contenders = []contender{
	{name: "statehost-alos", kind: "statehost", guarantee: "at_least_once"},
	{name: "statehost-alos-coalesce", kind: "statehost", guarantee: "at_least_once", coalesce: true},
	{name: "statehost-eos", kind: "statehost", guarantee: "exactly_once"},
	{name: "statehost-eos-coalesce", kind: "statehost", guarantee: "exactly_once", coalesce: true},
	// The same count processor built from C (plugins/count_c, its checked-in build): what the
	// host costs without the Go guest's own cost on wasm.
	{name: "statehost-alos-c", kind: "statehost", guarantee: "at_least_once", cGuest: true},
	{name: "native", kind: "native"},
	{name: "goka", kind: "goka"},
}

func mainRun() int {
	var (
		childSpec  = flag.String("child", "", "internal: run one contender, as the parent asks")
		full       = flag.Bool("full", false, "the full profile: 2M records per workload, restore figures for every statehost contender")
		records    = flag.Int("records", 0, "records per workload (default 250000, or 2000000 with --full)")
		keys       = flag.Int("keys", 1000000, "distinct words per workload")
		only       = flag.String("only", "", "run only the contenders whose names match this `regexp`")
		workloads  = flag.String("workloads", "zipf,uniform", "the workloads to run, comma-separated")
		interval   = flag.Duration("commit-interval", time.Second, "every contender's commit interval")
		cpuProfile = flag.String("cpuprofile", "", "write each child's CPU profile into this `dir`")
		traces     = flag.Bool("trace", false, "with -cpuprofile: write each child's execution trace there too")
		modulePath = flag.String("module", "", "the count `module` statehost runs (default: plugins/count, built now)")
		keep       = flag.Bool("keep", false, "keep the working directory (state, logs) and print its path")
		bigRestore = flag.Int("big-restore", 0, "also restore a changelog of this many `records` cold, and report the restoring process's peak RSS (e.g. 20000000)")
	)
	flag.Parse()
	if *childSpec != "" {
		return runChild(*childSpec)
	}
	n := *records
	if n == 0 {
		n = 250000
		if *full {
			n = 2000000
		}
	}
	match, err := regexp.Compile(*only)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: -only: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	*traceFlag, *moduleFlag, *bigRestoreFlag = *traces, *modulePath, *bigRestore
	if err := runBench(ctx, n, *keys, *workloads, match, *interval, *cpuProfile, *full, *keep); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 1
	}
	return 0
}

// traceFlag is -trace, moduleFlag -module, bigRestoreFlag -big-restore, for runBench.
var (
	traceFlag      = new(bool)
	moduleFlag     = new(string)
	bigRestoreFlag = new(int)
)

func runBench(ctx context.Context, n, keys int, workloadList string, match *regexp.Regexp, interval time.Duration,
	cpuProfile string, full, keep bool) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "statehost-bench-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Printf("working directory: %s\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	module := *moduleFlag
	if module == "" {
		// The count plugin as `go run ./plugins/build count` builds it, from this checkout.
		module = filepath.Join(dir, "count.wasm")
		src, err := filepath.Abs(filepath.Join("..", "plugins", "count"))
		if err != nil {
			return err
		}
		if err := wasmbuild.Go(ctx, src, module); err != nil {
			return fmt.Errorf("build the count plugin (run the bench from the bench directory): %w", err)
		}
	}
	if module, err = filepath.Abs(module); err != nil {
		return err
	}
	cModule, err := filepath.Abs(filepath.Join("..", "plugins", "count_c", "testdata", "count_c.wasm"))
	if err != nil {
		return err
	}
	if cpuProfile != "" {
		if cpuProfile, err = filepath.Abs(cpuProfile); err != nil {
			return err
		}
		if err := os.MkdirAll(cpuProfile, 0o755); err != nil {
			return err
		}
	}
	brk, err := broker.Start(broker.Options{Listen: "127.0.0.1:0", DataDir: filepath.Join(dir, "broker")})
	if err != nil {
		return err
	}
	defer brk.Close()
	b := &bench{brokers: []string{brk.Addr()}, self: self, dir: dir, module: module, cModule: cModule, interval: interval,
		cpuProfile: cpuProfile, trace: *traceFlag, timeout: max(2*time.Minute, time.Duration(n/5000)*time.Second)}
	adm, cl, err := adminClient(b.brokers)
	if err != nil {
		return err
	}
	defer cl.Close()
	b.adm = adm

	fmt.Printf("statehost bench: %d records per workload, %d distinct words, %d partitions, commit interval %s, GOMAXPROCS %d\n",
		n, keys, partitions, interval, runtime.GOMAXPROCS(0))
	var runs []*run
	for i, name := range strings.Split(workloadList, ",") {
		w := &workload{name: name, topic: "words-" + name, keys: keys, n: n}
		switch name {
		case "zipf":
			w.zipf = true
		case "uniform":
		default:
			return fmt.Errorf("unknown workload %q (zipf, uniform)", name)
		}
		t0 := time.Now()
		if err := produceWorkload(ctx, b.brokers, w, int64(i+1)); err != nil {
			return err
		}
		fmt.Printf("%s: %d records, %d distinct words, written in %s\n", w.topic, w.n, w.distinct, time.Since(t0).Round(time.Millisecond))
		for _, c := range contenders {
			if !match.MatchString(c.name) {
				continue
			}
			withRestore := c.kind == "statehost" && !c.cGuest && (full || !c.coalesce && c.guarantee == "at_least_once")
			r := b.measure(ctx, c, w, withRestore)
			printRun(r)
			runs = append(runs, r)
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
		w.counts = nil // the reference is no longer needed
	}
	report(os.Stdout, runs)
	if n := *bigRestoreFlag; n > 0 {
		res, err := b.measureBigRestore(ctx, n)
		if err != nil {
			return fmt.Errorf("big restore: %w", err)
		}
		reportBigRestore(os.Stdout, res)
	}
	for _, r := range runs {
		if r.err != nil {
			return fmt.Errorf("%d of %d runs failed", countFailed(runs), len(runs))
		}
	}
	return nil
}

func countFailed(runs []*run) int {
	n := 0
	for _, r := range runs {
		if r.err != nil {
			n++
		}
	}
	return n
}
