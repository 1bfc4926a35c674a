package main

import (
	"bufio"
	"encoding/json"
	"reflect"
	"strings"
	"time"
)

// The reading of the JSON log lines of the statehost processes, for the tests of logging
// itself (what the guests' output became, the restore progress lines, the JSON format) and
// for the diagnostics a test prints (the warnings, the last error). No test waits for or
// counts a log message of statehost's own: that is what the events are for
// (harness_events_test.go), and the log text is free to change.

// logLine is a JSON log line of a statehost process (hclog's format, --log-json), with the
// fields that the tests read.
type logLine struct {
	Time      time.Time `json:"@timestamp"`
	Level     string    `json:"@level"`
	Module    string    `json:"@module"`
	Message   string    `json:"@message"`
	Processor string    `json:"processor"`
	Store     string    `json:"store"`
	Error     string    `json:"error"`
	Stream    string    `json:"stream"` // a guest's output: "stdout" or "stderr"
	Crash     string    `json:"crash"`  // the crash dump of a guest's output
	raw       string    // the line as logged
}

// parseLogLine reads one log line; ok is false when it is not a JSON object. A field whose
// value has another type than logLine's is left zero: the line is kept.
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

// logLines returns the JSON lines that the process logged so far, in order.
func (p *appProcess) logLines() []logLine {
	var out []logLine
	sc := bufio.NewScanner(strings.NewReader(p.stderr.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if l, ok := parseLogLine(sc.Text()); ok {
			out = append(out, l)
		}
	}
	return out
}

// lastError returns the message and error of the last line that the process logged at error
// level, or "none": for the messages of failed tests.
func lastError(p *appProcess) string {
	last := "none"
	for _, l := range p.logLines() {
		if l.Level == "error" {
			last = l.Message
			if l.Error != "" {
				last += ": " + l.Error
			}
		}
	}
	return last
}
