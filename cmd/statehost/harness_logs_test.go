package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// The reading of the JSON log lines of the statehost processes, all of it: the tests read
// what a process did from its logs only through the functions of this file.

// logLine is a JSON log line of the app with the fields the tests read.
type logLine struct {
	Message   string `json:"@message"`
	Level     string `json:"@level"`
	Module    string `json:"@module"`
	Processor string `json:"processor"`
	Store     string `json:"store"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	EndOffset int64  `json:"end_offset"`
	Records   int64  `json:"records"`
	Error     string `json:"error"`
	Addr      string `json:"addr"`
}

// logs returns the JSON lines logged so far with the message msg (all lines for "").
func (p *appProcess) logs(msg string) []logLine {
	var out []logLine
	sc := bufio.NewScanner(strings.NewReader(p.stderr.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l logLine
		if json.Unmarshal(sc.Bytes(), &l) == nil && (msg == "" || l.Message == msg) {
			out = append(out, l)
		}
	}
	return out
}

// waitLog polls the logs until cond holds; it fails the test if the process exits first.
func (p *appProcess) waitLog(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if p.exited() {
			t.Fatalf("%s exited %d while waiting for %s", p.name, p.code, what)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: timed out after %v waiting for %s", p.name, timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitTasks waits until every task of the word count has logged "task running".
func (p *appProcess) waitTasks(t testing.TB, timeout time.Duration) {
	t.Helper()
	p.waitLog(t, timeout, "all tasks running", func() bool {
		seen := map[string]bool{}
		for _, l := range p.logs("task running") {
			seen[fmt.Sprintf("%s_%d", l.Processor, l.Partition)] = true
		}
		return len(seen) == e2eTasks
	})
}

// restores returns the "restore started" and "restore done" lines of the store counts.
func (p *appProcess) restores() (started, done []logLine) {
	for _, l := range p.logs("") {
		switch {
		case l.Store != "counts":
		case l.Message == "restore started":
			started = append(started, l)
		case l.Message == "restore done":
			done = append(done, l)
		}
	}
	return started, done
}

// restoredRecords sums the records of the "restore done" lines of the store counts.
func (p *appProcess) restoredRecords() int64 {
	_, done := p.restores()
	var n int64
	for _, l := range done {
		n += l.Records
	}
	return n
}

// adminAddr waits for the app's "admin listening" line and returns its address.
func (p *appProcess) adminAddr(t testing.TB) string {
	t.Helper()
	var addr string
	p.waitLog(t, 60*time.Second, "its admin listener", func() bool {
		if ls := p.logs("admin listening"); len(ls) > 0 {
			addr = ls[0].Addr
		}
		return addr != ""
	})
	return addr
}

// stoppedError waits for the app to exit and returns its exit code and the error of its
// "statehost stopped" line ("" when there is none).
func (p *appProcess) stoppedError(t testing.TB) (int, string) {
	t.Helper()
	code := p.wait(t, 120*time.Second)
	for _, l := range p.logs("statehost stopped") {
		return code, l.Error
	}
	return code, ""
}
