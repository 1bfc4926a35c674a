package main

import (
	"bufio"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// The reading of the JSON log lines of the statehost processes, all of it: the tests read
// what a process did from its logs only through the functions of this file.

// logLine is a JSON log line of a statehost process (hclog's format, --log-json), with the
// fields that the tests read.
type logLine struct {
	Time       time.Time       `json:"@timestamp"`
	Level      string          `json:"@level"`
	Module     string          `json:"@module"`
	Message    string          `json:"@message"`
	Processor  string          `json:"processor"`
	Store      string          `json:"store"`
	Partition  int32           `json:"partition"`
	Offset     int64           `json:"offset"`
	EndOffset  int64           `json:"end_offset"`
	Records    int64           `json:"records"`
	Partitions json.RawMessage `json:"partitions"` // topic -> partitions in "partitions assigned" and the like
	Tasks      []string        `json:"tasks"`
	Error      string          `json:"error"`
	Reason     string          `json:"reason"`
	Action     string          `json:"action"`
	TxnID      string          `json:"transactional_id"`
	Addr       string          `json:"addr"`
	DataDir    string          `json:"data_dir"`
	Stream     string          `json:"stream"` // a guest's output: "stdout" or "stderr"
	Crash      string          `json:"crash"`  // the crash dump of a guest's output
	raw        string          // the line as logged
}

// parseLogLine reads one log line; ok is false when it is not a JSON object. A field whose
// value has another type than logLine's (the "tasks" that a line counts rather than lists)
// is left zero: the line is kept.
func parseLogLine(line string) (l logLine, ok bool) {
	if err := json.Unmarshal([]byte(line), &l); err == nil {
		l.raw = line
		return l, true
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal([]byte(line), &fields) != nil {
		return logLine{}, false
	}
	l = logLine{raw: line}
	v := reflect.ValueOf(&l).Elem()
	for i := range v.NumField() {
		if key := v.Type().Field(i).Tag.Get("json"); key != "" {
			if raw, ok := fields[key]; ok {
				_ = json.Unmarshal(raw, v.Field(i).Addr().Interface())
			}
		}
	}
	return l, true
}

// logs returns the JSON lines that the process logged so far with the message msg (every
// line for ""), in order: the one way the tests read a process's logs.
func (p *appProcess) logs(msg string) []logLine {
	var out []logLine
	sc := bufio.NewScanner(strings.NewReader(p.stderr.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if l, ok := parseLogLine(sc.Text()); ok && (msg == "" || l.Message == msg) {
			out = append(out, l)
		}
	}
	return out
}

// partitions returns the topic partitions of a "partitions assigned/revoked/lost" line.
func (l logLine) partitions() map[string][]int32 {
	var m map[string][]int32
	_ = json.Unmarshal(l.Partitions, &m)
	return m
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
			seen[taskName(l.Processor, l.Partition)] = true
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

// lastError returns the message and error of the last line that the process logged at error
// level, or "none".
func lastError(p *appProcess) string {
	last := "none"
	for _, l := range p.logs("") {
		if l.Level == "error" {
			last = l.Message
			if l.Error != "" {
				last += ": " + l.Error
			}
		}
	}
	return last
}
