// Command bench runs statehost's keyed word count side by side with a hand-written Go
// pipeline of the same semantics and durability (the practical upper bound), goka, Kafka
// Streams (bench/kstreams) and quix-streams (bench/quix), one after the other, each in a
// process of its own, on one Apache Kafka broker (scripts/kafka), and prints their rates,
// the ratios between them, their changelog volume, restore speed and peak memory.
//
//	cd bench && go run .          # the quick profile, a few minutes
//	cd bench && go run . --full   # the profile of the README's performance section
//	cd bench && go run . -kfake   # on the embedded kfake broker: no Java, no peers
//	cd bench && go run . -scale -kfake  # the scale profile instead: 8 to 4,096 tasks on one instance
//
// The last lines are machine-readable: "RESULT <name>=<value>".
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
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
	// And from AssemblyScript (plugins/count_as, built now with npm ci and asc; skipped
	// without Node.js).
	{name: "statehost-alos-as", kind: "statehost", guarantee: "at_least_once", asGuest: true},
	{name: "native", kind: "native"},
	{name: "goka", kind: "goka"},
	// Kafka Streams 4.4 (bench/kstreams): its record cache off (every write logged, as
	// statehost without coalescing) and on (coalescing); quix-streams (bench/quix).
	{name: "kstreams-alos", kind: "kstreams", guarantee: "at_least_once"},
	{name: "kstreams-alos-cache", kind: "kstreams", guarantee: "at_least_once", coalesce: true, fullOnly: true},
	{name: "kstreams-eos", kind: "kstreams", guarantee: "exactly_once", fullOnly: true},
	{name: "kstreams-eos-cache", kind: "kstreams", guarantee: "exactly_once", coalesce: true, fullOnly: true},
	{name: "quix-alos", kind: "quix", guarantee: "at_least_once"},
	{name: "quix-eos", kind: "quix", guarantee: "exactly_once", fullOnly: true},
}

func mainRun() int {
	var o options
	childSpec := flag.String("child", "", "internal: run one contender, as the parent asks")
	flag.BoolVar(&o.full, "full", false, "the full profile: 2M records per workload, every contender, restore figures for each")
	flag.IntVar(&o.records, "records", 0, "records per workload (default 250000, or 2000000 with --full)")
	flag.IntVar(&o.keys, "keys", 1000000, "distinct words per workload")
	only := flag.String("only", "", "run only the contenders whose names match this `regexp`")
	flag.StringVar(&o.workloads, "workloads", "zipf,uniform", "the workloads to run, comma-separated")
	flag.DurationVar(&o.interval, "commit-interval", time.Second, "every contender's commit interval")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write each statehost, native or goka child's CPU profile into this `dir`, "+
		"and the heap profile of each processing run as it is asked to stop (<app>.heap)")
	flag.BoolVar(&o.trace, "trace", false, "with -cpuprofile: write each child's execution trace there too")
	flag.StringVar(&o.module, "module", "", "the count `module` statehost runs (default: plugins/count, built now)")
	flag.BoolVar(&o.keep, "keep", false, "keep the working directory (state, logs) and print its path")
	flag.IntVar(&o.bigRestore, "big-restore", 0, "also restore a changelog of this many `records` cold, and report the restoring process's peak RSS (e.g. 20000000)")
	flag.BoolVar(&o.kfake, "kfake", false, "run on the embedded kfake broker, in this process, instead of a one-node Apache Kafka (scripts/kafka): quicker, "+
		"and without Java; the Kafka Streams and quix-streams contenders then do not run")
	flag.StringVar(&o.kstreamsHeap, "kstreams-heap", "512m", "the Kafka Streams contenders' JVM heap (-Xms and -Xmx)")
	flag.StringVar(&o.stateMemory, "state-memory", "256MiB", "the statehost contenders' state_memory")
	flag.StringVar(&o.memoryLimit, "memory-limit", "", "the statehost contenders' memory_limit (default none)")
	flag.BoolVar(&o.scale, "scale", false, "run the scale profile instead of the contenders: count and windowcount (Go guests) with -scale-tasks tasks "+
		"on one statehost instance, its peak RSS, the time until every task runs, its records/s at -scale-rate, and the move of half its tasks "+
		"to a second instance (scale.go)")
	scaleTasks := flag.String("scale-tasks", "8,256,1024,4096", "with -scale: the sizes, in tasks, comma-separated (even: two processors, tasks/2 partitions each)")
	flag.IntVar(&o.scaleRate, "scale-rate", 10000, "with -scale: the input rate at every size, records/s over both input topics")
	flag.DurationVar(&o.scaleFor, "scale-for", 15*time.Second, "with -scale: how long the input rate is held for the records/s figure")
	flag.IntVar(&o.scaleStandbys, "scale-standbys", 1, "with -scale: the application's standby_replicas; with 1, the move of half the tasks also "+
		"starts a standby of every task, on the other instance (0: a move without standbys)")
	flag.Parse()
	if *childSpec != "" {
		return runChild(*childSpec)
	}
	if o.scale {
		var err error
		if o.scaleTasks, err = parseScaleTasks(*scaleTasks); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			return 2
		}
	}
	if o.records == 0 {
		o.records = 250000
		if o.full {
			o.records = 2000000
		}
	}
	var err error
	if o.match, err = regexp.Compile(*only); err != nil {
		fmt.Fprintf(os.Stderr, "bench: -only: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := runBench(ctx, o); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		return 1
	}
	return 0
}

// options are the bench's flags.
type options struct {
	full, keep, trace, kfake bool
	records, keys            int
	bigRestore               int
	match                    *regexp.Regexp
	workloads                string
	interval                 time.Duration
	cpuProfile, module       string
	kstreamsHeap             string
	stateMemory, memoryLimit string // statehost's state_memory and memory_limit

	scale      bool          // the scale profile (scale.go) instead of the contenders
	scaleTasks []int         // its sizes
	scaleRate  int           // its input rate, records/s
	scaleFor   time.Duration // how long it holds the rate
	// scaleStandbys is its standby_replicas.
	scaleStandbys int
}

func runBench(ctx context.Context, o options) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "statehost-bench-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Printf("working directory: %s\n", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	module := o.module
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
	cpuProfile := o.cpuProfile
	if cpuProfile != "" {
		if cpuProfile, err = filepath.Abs(cpuProfile); err != nil {
			return err
		}
		if err := os.MkdirAll(cpuProfile, 0o755); err != nil {
			return err
		}
	}
	var brokers []string
	brokerPID := os.Getpid() // kfake runs in this process
	if o.kfake {
		brk, err := broker.Start(broker.Options{Listen: "127.0.0.1:0", DataDir: filepath.Join(dir, "broker")})
		if err != nil {
			return err
		}
		defer brk.Close()
		brokers = []string{brk.Addr()}
	} else {
		fmt.Println("starting a one-node Apache Kafka (scripts/kafka)...")
		k, err := startKafka(ctx, filepath.Join(dir, "kafka"))
		if err != nil {
			return err
		}
		defer k.stop()
		brokers, brokerPID = []string{k.addr}, k.pid
	}
	n := o.records
	b := &bench{brokers: brokers, brokerPID: brokerPID, self: self, dir: dir, module: module, cModule: cModule, interval: o.interval,
		cpuProfile: cpuProfile, trace: o.trace, stateMemory: o.stateMemory, memoryLimit: o.memoryLimit, timeout: max(2*time.Minute, time.Duration(n/5000)*time.Second)}
	adm, cl, err := adminClient(b.brokers)
	if err != nil {
		return err
	}
	defer cl.Close()
	b.adm = adm
	if o.scale {
		return b.scaleProfile(ctx, o)
	}
	var selected []contender
	wantKStreams, wantQuix := false, false
	for _, c := range contenders {
		if o.match.MatchString(c.name) && (o.full || !c.fullOnly) {
			selected = append(selected, c)
			wantKStreams = wantKStreams || c.kind == "kstreams"
			wantQuix = wantQuix || c.kind == "quix"
		}
	}
	if slices.ContainsFunc(selected, func(c contender) bool { return c.asGuest }) {
		if err := b.buildASModule(ctx); err != nil {
			return err
		}
	}
	if o.kfake {
		b.peers = peers{kstreamsWhy: "not with -kfake", quixWhy: "not with -kfake"}
	} else {
		b.peers = preparePeers(ctx, wantKStreams, wantQuix, o.kstreamsHeap)
	}

	brokerName := "Apache Kafka (one node)"
	if o.kfake {
		brokerName = "kfake (embedded)"
	}
	fmt.Printf("statehost bench: %d records per workload, %d distinct words, %d partitions, commit interval %s, GOMAXPROCS %d, broker %s\n",
		n, o.keys, partitions, o.interval, runtime.GOMAXPROCS(0), brokerName)
	fmt.Printf("statehost: state_memory %s, memory_limit %s\n", o.stateMemory, cmp.Or(o.memoryLimit, "none"))
	if wantKStreams && b.peers.kstreamsJar != "" {
		fmt.Printf("Kafka Streams: JVM heap %s (-Xms and -Xmx)\n", o.kstreamsHeap)
	}
	var runs []*run
	for i, name := range strings.Split(o.workloads, ",") {
		w := &workload{name: name, topic: "words-" + name, keys: o.keys, n: n}
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
		for _, c := range selected {
			if why := b.unavailable(c); why != "" {
				fmt.Printf("  %-24s skipped: %s\n", c.name, why)
				continue
			}
			r := b.measure(ctx, c, w, c.restores(o.full))
			printRun(r)
			runs = append(runs, r)
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
		w.counts = nil // the reference is no longer needed
	}
	report(os.Stdout, runs)
	if n := o.bigRestore; n > 0 {
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

// buildASModule builds plugins/count_as for the statehost-alos-as contender, or says why it
// cannot run (no Node.js).
func (b *bench) buildASModule(ctx context.Context) error {
	if b.asWhy = wasmbuild.MissingNode(); b.asWhy != "" {
		return nil
	}
	src, err := filepath.Abs(filepath.Join("..", "plugins", "count_as"))
	if err != nil {
		return err
	}
	b.asModule = filepath.Join(b.dir, "count_as.wasm")
	if err := wasmbuild.AssemblyScript(ctx, src, b.asModule); err != nil {
		return fmt.Errorf("build the count_as plugin: %w", err)
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
