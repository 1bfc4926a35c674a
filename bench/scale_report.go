package main

import (
	"fmt"
	"io"
	"time"
)

// The goals of issue 27 for the scale profile (a benchmark, not timed tests).
const (
	goalTasks     = 4096
	goalRSS       = 1 << 30          // peak RSS of one instance with goalTasks tasks, default settings
	goalStart     = 10 * time.Second // every task running after a start on empty state
	goalMove      = 15 * time.Second // moving goalTasks/2 tasks until they process again
	goalRateRatio = 0.8              // records/s at goalTasks over the rate at 8 tasks, same input
)

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// printScaleRun prints one size's figures as they come.
func printScaleRun(r *scaleRun) {
	if r.err != nil {
		fmt.Printf("  %5d tasks: FAILED: %v\n", r.tasks, r.err)
		return
	}
	fmt.Printf("  %5d tasks: peak RSS %.0f MiB, all running %s after the start (%s after the join), %.0f records/s (%d records, %d not committed), %.1f CPU µs/record, "+
		"%d tasks moved in %s (%s after the join; second instance peak RSS %.0f MiB; standby restores begun by then %d + %d), stop %s\n",
		r.tasks, mib(r.peakRSS), r.startTook.Round(time.Millisecond), r.joinTook.Round(time.Millisecond), r.rate, r.produced, r.behind, r.cpu,
		r.moved, r.moveTook.Round(time.Millisecond), r.moveJoinTook.Round(time.Millisecond), mib(r.peakRSS2), r.standbys1, r.standbys2,
		r.stopTook.Round(time.Millisecond))
	fmt.Printf("         start: %s\n         move:  %s\n", r.phases, r.movePhases)
}

// reportScale prints the table of every size, the goals of issue 27 beside the figures, and
// the RESULT lines.
func reportScale(out io.Writer, runs []*scaleRun, standbys int) {
	var base *scaleRun // the smallest size that ran: the rate's reference
	for _, r := range runs {
		if r.err == nil && (base == nil || r.tasks < base.tasks) {
			base = r
		}
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out, "| tasks | peak RSS MiB | all running s | from join s | records/s | vs smallest | CPU µs/record | moved tasks | move s | from join s | 2nd peak RSS MiB | stop s |")
	fmt.Fprintln(out, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range runs {
		if r.err != nil {
			fmt.Fprintf(out, "| %d | failed: %v |\n", r.tasks, r.err)
			continue
		}
		fmt.Fprintf(out, "| %d | %.0f | %.2f | %.2f | %.0f | %.2fx | %.1f | %d | %.2f | %.2f | %.0f | %.2f |\n",
			r.tasks, mib(r.peakRSS), r.startTook.Seconds(), r.joinTook.Seconds(), r.rate, r.rate/base.rate, r.cpu,
			r.moved, r.moveTook.Seconds(), r.moveJoinTook.Seconds(), mib(r.peakRSS2), r.stopTook.Seconds())
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out, "Goals of issue 27:")
	goal := func(what string, ok bool, got string) {
		verdict := "missed"
		if ok {
			verdict = "met"
		}
		fmt.Fprintf(out, "  %-62s %-8s %s\n", what, got, verdict)
	}
	for _, r := range runs {
		if r.err != nil || r.tasks != goalTasks {
			continue
		}
		goal("4,096 tasks on one instance: peak RSS <= 1,024 MiB", r.peakRSS <= goalRSS, fmt.Sprintf("%.0f MiB", mib(r.peakRSS)))
		goal("every task running <= 10 s after a start on empty state", r.startTook <= goalStart, fmt.Sprintf("%.1f s", r.startTook.Seconds()))
		goal(fmt.Sprintf("moving 2,048 tasks to a new instance <= 15 s (standby_replicas %d)", standbys), r.moveTook <= goalMove, fmt.Sprintf("%.1f s", r.moveTook.Seconds()))
		if base.tasks == 8 {
			goal("records/s at 4,096 tasks >= 0.8x the rate at 8, same input", r.rate >= goalRateRatio*base.rate, fmt.Sprintf("%.2fx", r.rate/base.rate))
		}
	}
	if !hasSize(runs, goalTasks) {
		fmt.Fprintln(out, "  (judged at 4,096 tasks, which did not run: see the table)")
	}
	fmt.Fprintln(out)
	for _, r := range runs {
		if r.err != nil {
			continue
		}
		p := fmt.Sprintf("RESULT scale_%d_", r.tasks)
		fmt.Fprintf(out, "%srss_mib=%.0f\n", p, mib(r.peakRSS))
		fmt.Fprintf(out, "%sstart_s=%.3f\n", p, r.startTook.Seconds())
		fmt.Fprintf(out, "%srate=%.0f\n", p, r.rate)
		fmt.Fprintf(out, "%srate_vs_%d=%.3f\n", p, base.tasks, r.rate/base.rate)
		fmt.Fprintf(out, "%scpu_us_per_record=%.2f\n", p, r.cpu)
		fmt.Fprintf(out, "%smove_s=%.3f\n", p, r.moveTook.Seconds())
		fmt.Fprintf(out, "%smoved=%d\n", p, r.moved)
	}
}

func hasSize(runs []*scaleRun, n int) bool {
	for _, r := range runs {
		if r.err == nil && r.tasks == n {
			return true
		}
	}
	return false
}
