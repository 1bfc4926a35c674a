package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"
)

// printRun prints one run's figures as it ends.
func printRun(r *run) {
	if r.err != nil {
		fmt.Printf("  %-24s FAILED: %v\n", r.c.name, r.err)
		return
	}
	fmt.Printf("  %-24s %9.0f records/s  %5.1f µs CPU/record (broker %4.1f)  (%s in all)\n", r.c.name, r.rate,
		r.childCPU, r.brokerCPU, r.took.Round(time.Millisecond))
}

// kstreamsPeer names the Kafka Streams contender that c compares with: the same guarantee,
// its record cache on where c coalesces.
func kstreamsPeer(c contender) string {
	name := "kstreams-alos"
	if c.guarantee == "exactly_once" {
		name = "kstreams-eos"
	}
	if c.coalesce {
		name += "-cache"
	}
	return name
}

// find returns the run of contender name on workload w, or nil.
func find(runs []*run, w, name string) *run {
	for _, r := range runs {
		if r.w.name == w && r.c.name == name && r.err == nil {
			return r
		}
	}
	return nil
}

// ratio returns a's rate over b's, or NaN when either is missing.
func ratio(a, b *run) float64 {
	if a == nil || b == nil || b.rate == 0 {
		return math.NaN()
	}
	return a.rate / b.rate
}

// cpuRatio returns b's CPU time per record over a's (how many times a's work b's CPU
// would do), or NaN when either is missing: a throughput ratio that the machine's other load
// disturbs less than the rates.
func cpuRatio(a, b *run) float64 {
	if a == nil || b == nil || a.childCPU <= 0 || b.childCPU <= 0 {
		return math.NaN()
	}
	return b.childCPU / a.childCPU
}

// lower returns the lower of the worst ratio so far, x (NaN for none yet), and q.
func lower(x, q float64) float64 {
	if math.IsNaN(x) || q < x {
		return q
	}
	return x
}

func fmtRatio(x float64) string {
	if math.IsNaN(x) {
		return "-"
	}
	return fmt.Sprintf("%.2fx", x)
}

// report prints the tables and the RESULT lines.
func report(out io.Writer, runs []*run) {
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "workload\tcontender\trecords/s\tvs native\tvs goka\tvs kstreams\tCPU µs/record\tCPU vs native\tchangelog rec/input\tchangelog bytes/input\tpeak RSS MiB\t")
	for _, r := range runs {
		if r.err != nil {
			fmt.Fprintf(tw, "%s\t%s\tfailed\t\t\t\t\t\t\t\t\t\n", r.w.name, r.c.name)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%s\t%s\t%s\t%.1f\t%s\t%.3f\t%.1f\t%.0f\t\n", r.w.name, r.c.name, r.rate,
			fmtRatio(ratio(r, find(runs, r.w.name, "native"))), fmtRatio(ratio(r, find(runs, r.w.name, "goka"))),
			fmtRatio(ratio(r, find(runs, r.w.name, kstreamsPeer(r.c)))),
			r.childCPU, fmtRatio(cpuRatio(r, find(runs, r.w.name, "native"))),
			float64(r.changelogRecs)/float64(r.w.n), float64(r.changelogBytes)/float64(r.w.n),
			float64(r.peakRSS)/(1<<20))
	}
	tw.Flush()

	var restores []*run
	for _, r := range runs {
		if r.err == nil && r.hasRestore {
			restores = append(restores, r)
		}
	}
	if len(restores) > 0 {
		fmt.Fprintln(out)
		tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "workload\tcontender\tchangelog records\trestored\tplain consume rec/s\twarm consume rec/s\tcold restore\trestore rec/s\trestore vs consume\tvs warm consume\twarm restart replayed\twarm tail\ttail rec/s\ttail vs processing\t")
		for _, r := range restores {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.0f\t%.0f\t%s\t%.0f\t%.2fx\t%.2fx\t", r.w.name, r.c.name, r.changelogRecs, r.restored, r.consumeRate,
				r.warmConsumeRate, r.restoreTook.Round(time.Millisecond), r.restoreRate(), r.restoreRate()/r.consumeRate, r.restoreRate()/r.warmConsumeRate)
			if r.c.kind == "statehost" {
				fmt.Fprintf(tw, "%d\t%d\t%.0f\t%.2fx\t\n", r.warmReplayed, r.tailReplayed, r.tailRate(), r.tailRate()/r.rate)
			} else {
				fmt.Fprintf(tw, "-\t-\t-\t-\t\n")
			}
		}
		tw.Flush()
	}

	fmt.Fprintln(out)
	for _, r := range runs {
		if r.err != nil {
			continue
		}
		p := r.w.name + "_" + strings.ReplaceAll(r.c.name, "-", "_")
		fmt.Fprintf(out, "RESULT %s_records_per_s=%.0f\n", p, r.rate)
		fmt.Fprintf(out, "RESULT %s_cpu_us_per_record=%.2f\n", p, r.childCPU)
		fmt.Fprintf(out, "RESULT %s_broker_cpu_us_per_record=%.2f\n", p, r.brokerCPU)
		fmt.Fprintf(out, "RESULT %s_changelog_records_per_input=%.4f\n", p, float64(r.changelogRecs)/float64(r.w.n))
		fmt.Fprintf(out, "RESULT %s_changelog_bytes_per_input=%.2f\n", p, float64(r.changelogBytes)/float64(r.w.n))
		fmt.Fprintf(out, "RESULT %s_peak_rss_mib=%.0f\n", p, float64(r.peakRSS)/(1<<20))
		if r.hasRestore {
			fmt.Fprintf(out, "RESULT %s_cold_restore_seconds=%.3f\n", p, r.restoreTook.Seconds())
			fmt.Fprintf(out, "RESULT %s_restore_records_per_s=%.0f\n", p, r.restoreRate())
			fmt.Fprintf(out, "RESULT %s_consume_records_per_s=%.0f\n", p, r.consumeRate)
			fmt.Fprintf(out, "RESULT %s_warm_consume_records_per_s=%.0f\n", p, r.warmConsumeRate)
			if r.c.kind == "statehost" {
				fmt.Fprintf(out, "RESULT %s_warm_restart_replayed=%d\n", p, r.warmReplayed)
				fmt.Fprintf(out, "RESULT %s_warm_tail_records_per_s=%.0f\n", p, r.tailRate())
			}
		}
	}
	// The headline ratios: statehost as configured by default (at_least_once, coalescing
	// off), the worst workload.
	worst := func(name, base string) float64 {
		x := math.NaN()
		for _, w := range workloadNames(runs) {
			x = lower(x, ratio(find(runs, w, name), find(runs, w, base)))
		}
		return x
	}
	for _, c := range contenders {
		if c.kind != "statehost" || c.cGuest || c.asGuest {
			continue
		}
		s := strings.TrimPrefix(strings.ReplaceAll(c.name, "-", "_"), "statehost_")
		fmt.Fprintf(out, "RESULT wordcount_%s_vs_native=%.3f\n", s, worst(c.name, "native"))
		fmt.Fprintf(out, "RESULT wordcount_%s_vs_goka=%.3f\n", s, worst(c.name, "goka"))
	}
	restoreWorst, warmWorst, tailWorst := math.NaN(), math.NaN(), math.NaN()
	for _, r := range restores {
		if r.c.kind != "statehost" {
			continue
		}
		restoreWorst = lower(restoreWorst, r.restoreRate()/r.consumeRate)
		warmWorst = lower(warmWorst, r.restoreRate()/r.warmConsumeRate)
		tailWorst = lower(tailWorst, r.tailRate()/r.rate)
	}
	fmt.Fprintf(out, "RESULT wordcount_vs_native=%.3f\n", worst("statehost-alos", "native"))
	fmt.Fprintf(out, "RESULT wordcount_vs_goka=%.3f\n", worst("statehost-alos", "goka"))
	fmt.Fprintf(out, "RESULT wordcount_c_guest_vs_native=%.3f\n", worst("statehost-alos-c", "native"))
	fmt.Fprintf(out, "RESULT wordcount_c_guest_vs_goka=%.3f\n", worst("statehost-alos-c", "goka"))
	fmt.Fprintf(out, "RESULT wordcount_as_guest_vs_native=%.3f\n", worst("statehost-alos-as", "native"))
	fmt.Fprintf(out, "RESULT wordcount_as_guest_vs_goka=%.3f\n", worst("statehost-alos-as", "goka"))
	fmt.Fprintf(out, "RESULT restore_vs_consume=%.3f\n", restoreWorst)
	fmt.Fprintf(out, "RESULT restore_vs_warm_consume=%.3f\n", warmWorst)
	// Against the peers, their caches off as statehost's coalescing is by default, the worst
	// workload: rates and restores over theirs (higher is better), peak RSS over theirs
	// (lower is better, so the highest is the worst).
	fmt.Fprintf(out, "RESULT wordcount_vs_kstreams=%.3f\n", worst("statehost-alos", "kstreams-alos"))
	fmt.Fprintf(out, "RESULT wordcount_eos_vs_kstreams=%.3f\n", worst("statehost-eos", "kstreams-eos"))
	fmt.Fprintf(out, "RESULT restore_vs_kstreams=%.3f\n", worstOf(runs, "statehost-alos", "kstreams-alos", (*run).restoreRate, false))
	fmt.Fprintf(out, "RESULT rss_vs_kstreams=%.3f\n", worstOf(runs, "statehost-alos", "kstreams-alos", (*run).rss, true))
	fmt.Fprintf(out, "RESULT wordcount_vs_quix=%.3f\n", worst("statehost-alos", "quix-alos"))
	// A standby or a restart replays a tail in batches: how many times the rate at which the
	// same contender processed (and so wrote its changelog), the worst workload.
	fmt.Fprintf(out, "RESULT warm_tail_vs_processing=%.3f\n", tailWorst)
}

// worstOf returns, over the workloads, the worst ratio of figure f of contender name to that
// of base: the lowest, or with higherWorse the highest; NaN where either is missing.
func worstOf(runs []*run, name, base string, f func(*run) float64, higherWorse bool) float64 {
	x := math.NaN()
	for _, w := range workloadNames(runs) {
		a, b := find(runs, w, name), find(runs, w, base)
		if a == nil || b == nil {
			continue
		}
		q := f(a) / f(b)
		if math.IsNaN(q) || math.IsInf(q, 0) {
			continue
		}
		if math.IsNaN(x) || (higherWorse && q > x) || (!higherWorse && q < x) {
			x = q
		}
	}
	return x
}

func (r *run) rss() float64 { return float64(r.peakRSS) }

func (r *run) tailRate() float64 {
	if r.tailTook <= 0 {
		return math.NaN()
	}
	return float64(r.tailReplayed) / r.tailTook.Seconds()
}

func (r *run) restoreRate() float64 {
	if r.restoreTook <= 0 {
		return math.NaN()
	}
	return float64(r.restored) / r.restoreTook.Seconds()
}

func workloadNames(runs []*run) []string {
	var names []string
	for _, r := range runs {
		if len(names) == 0 || names[len(names)-1] != r.w.name {
			names = append(names, r.w.name)
		}
	}
	return names
}
