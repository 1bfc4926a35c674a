package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/hashicorp/go-hclog"

	"github.com/statehost/statehost/restore"
)

// keyvals returns the keys and values of a progress line as a map.
func keyvals(l []any) map[string]any {
	m := map[string]any{}
	for i := 0; i+1 < len(l); i += 2 {
		m[fmt.Sprint(l[i])] = l[i+1]
	}
	return m
}

// With more restores than maxShownRestores at once, the first ones log lines of their own and
// one line sums up the others: their count, offsets read and to read; once they all end,
// the sum starts over.
func TestRestoreProgressSummed(t *testing.T) {
	const n = 4096
	prog := newRestoreProgress(hclog.NewNullLogger(), nil, time.Hour) // its loop logs nothing within the test
	defer prog.Close()
	for p := range int32(n) {
		prog.OnRestoreStart(restore.StartEvent{Processor: "count", Store: "counts", Topic: "t", Partition: p, StartOffset: 0, EndOffset: 100})
		prog.OnBatchRestored(restore.BatchEvent{Processor: "count", Store: "counts", Topic: "t", Partition: p, Records: 10, Offset: 9})
	}
	// Two of the summed restores end, one of them stops (its task went away).
	prog.OnRestoreEnd(restore.EndEvent{Processor: "count", Store: "counts", Topic: "t", Partition: n - 1, Records: 100})
	prog.OnRestoreStart(restore.StartEvent{Processor: "count", Store: "counts", Topic: "t", Partition: n - 2, StartOffset: 0, EndOffset: 0})

	lines := prog.tick(time.Now().Add(2*time.Hour), nil, nil)
	if len(lines) != maxShownRestores+1 {
		t.Fatalf("%d progress lines for %d restores, want %d of their own and one summed", len(lines), n, maxShownRestores)
	}
	for i, l := range lines[:maxShownRestores] {
		if kv := keyvals(l); kv["partition"] != int32(i) || kv["restored"] != int64(10) {
			t.Errorf("line %d: %v, want partition %d at 10", i, kv, i)
		}
	}
	last := lines[maxShownRestores]
	if last[0] != tallyLine {
		t.Fatalf("last line %v, want the summed one", last)
	}
	others := int64(n - maxShownRestores)
	kv := keyvals(last[1:])
	// The one that ended read all 100; the one that stopped is out, with its 10.
	if kv["restores"] != others-2 || kv["ended"] != int64(2) || kv["restored"] != (others-2)*10+100+10 ||
		kv["total"] != (others-1)*100+10 {
		t.Errorf("summed line %v, want %d restores, 2 ended, %d of %d read", kv, others-2, (others-2)*10+110, (others-1)*100+10)
	}

	// All end: the sum starts over, and no line sums up nothing.
	for p := range int32(n) {
		prog.OnRestoreEnd(restore.EndEvent{Processor: "count", Store: "counts", Topic: "t", Partition: p, Records: 100})
	}
	if lines := prog.tick(time.Now().Add(4*time.Hour), nil, nil); len(lines) != 0 {
		t.Errorf("after the restores ended: %v", lines)
	}
	prog.mu.Lock()
	defer prog.mu.Unlock()
	if prog.shown != 0 || prog.rest.running() || prog.rest.total != 0 || len(prog.active) != 0 {
		t.Errorf("after the restores ended: %d shown, tally %d of %d, %d active", prog.shown, prog.rest.done, prog.rest.total, len(prog.active))
	}
}

// On a terminal, restores past maxShownRestores share one bar that counts them.
func TestRestoreProgressBarsSummed(t *testing.T) {
	master, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer master.Close()
	if err := pty.Setsize(tty, &pty.Winsize{Rows: 40, Cols: 140}); err != nil {
		t.Fatal(err)
	}
	var shown syncBuffer
	done := readPty(master, &shown)
	ui, out := newBarUI(tty)
	prog := newRestoreProgress(hclog.New(&hclog.LoggerOptions{Output: out}), ui, time.Second)
	const n = 40
	for p := range int32(n) {
		prog.OnRestoreStart(restore.StartEvent{Processor: "count", Store: "counts", Topic: "t", Partition: p, StartOffset: 0, EndOffset: 1000})
	}
	time.Sleep(2 * barDelay)
	for p := range int32(n) {
		prog.OnBatchRestored(restore.BatchEvent{Processor: "count", Store: "counts", Topic: "t", Partition: p, Records: 500, Offset: 499})
	}
	want := fmt.Sprintf("%d more restores, 0 ended", n-maxShownRestores)
	pollUntil(t, 20*time.Second, "the bar of the summed restores", func() bool {
		return strings.Contains(ansi.ReplaceAllString(shown.String(), ""), want)
	})
	for p := range int32(n) {
		prog.OnRestoreEnd(restore.EndEvent{Processor: "count", Store: "counts", Topic: "t", Partition: p, Records: 1000})
	}
	pollUntil(t, 20*time.Second, "the bars' container gone after the restores ended", func() bool { return !barsShown(prog, ui) })
	prog.Close()
	tty.Close()
	<-done
	screen := ansi.ReplaceAllString(shown.String(), "")
	for p := range n {
		name := fmt.Sprintf("count/counts p%d ", p)
		if got := strings.Contains(screen, name); got != (p < maxShownRestores) {
			t.Errorf("bar %q shown: %t, want %t", name, got, p < maxShownRestores)
		}
	}
}
