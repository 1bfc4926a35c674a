package engine

import (
	"bytes"
	"strings"

	"github.com/hashicorp/go-hclog"
)

const (
	// maxGuestLine is the longest line of guest output logged as one entry.
	maxGuestLine = 4 << 10
	// maxGuestDetail is how much of a call's stderr is kept for GuestError.Detail.
	maxGuestDetail = 1 << 10
	// maxCrashLines is how many lines of a Go runtime crash dump its log entry keeps.
	maxCrashLines = 20
)

// guestOutput receives a guest's stdout or stderr: it logs each line at a fixed level, as
// the task's LogLimiter allows, and, for stderr, keeps the start of what one guest call
// wrote, notes the markers the Go runtime prints when it panics or runs out of memory, and
// folds a Go runtime crash dump into one entry.
//
// A crash dump begins with a line "panic: " or "fatal error: ", or with the "runtime: "
// lines the runtime may print just before its fatal error ("runtime: out of memory: ...");
// that line and every line after it in the same call (the goroutines' stacks) are not logged
// one by one but kept, the first maxCrashLines of them, and logged by endCall as one ERROR
// entry. Lines "runtime: " wait for the next line: when it does not begin a crash dump, they
// are logged as the others.
type guestOutput struct {
	log    hclog.Logger
	level  hclog.Level
	stream string
	limit  *LogLimiter
	line   []byte

	keep     bool   // keep head and markers, fold crash dumps (stderr)
	head     []byte // the first maxGuestDetail bytes written in this call
	panicked bool   // a line began with "panic: "
	oom      bool   // a line said the runtime ran out of memory

	crash      []string // the first maxCrashLines lines of the crash dump, nil if none
	crashLines int      // how many lines the crash dump had
	runtime    []string // "runtime: " lines that may begin a crash dump, at most maxCrashLines
}

// reset forgets what the previous guest call wrote.
func (w *guestOutput) reset() {
	w.head, w.panicked, w.oom = w.head[:0], false, false
	w.crash, w.crashLines, w.runtime = nil, 0, w.runtime[:0]
}

// Write implements io.Writer; it never fails.
func (w *guestOutput) Write(p []byte) (int, error) {
	if w.keep && len(w.head) < maxGuestDetail {
		w.head = append(w.head, p[:min(len(p), maxGuestDetail-len(w.head))]...)
	}
	for rest := p; len(rest) > 0; {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			w.line = append(w.line, rest[:min(len(rest), maxGuestLine-len(w.line))]...)
			break
		}
		w.line = append(w.line, rest[:min(i, maxGuestLine-len(w.line))]...)
		rest = rest[i+1:]
		w.flush()
	}
	return len(p), nil
}

// flush logs the pending line, if any.
func (w *guestOutput) flush() {
	if len(w.line) == 0 {
		return
	}
	line := strings.ToValidUTF8(string(w.line), "\uFFFD")
	w.line = w.line[:0]
	if !w.keep {
		w.emit(line)
		return
	}
	switch {
	case strings.HasPrefix(line, "panic: "):
		w.panicked = true
	case strings.Contains(line, "out of memory"):
		w.oom = true
	}
	if w.crash == nil {
		switch {
		case strings.HasPrefix(line, "panic: ") || strings.HasPrefix(line, "fatal error: "):
			w.crash = make([]string, 0, maxCrashLines)
			for _, l := range w.runtime {
				w.addCrash(l)
			}
			w.runtime = w.runtime[:0]
		case strings.HasPrefix(line, "runtime: ") && len(w.runtime) < maxCrashLines:
			w.runtime = append(w.runtime, line)
			return
		default:
			w.flushRuntime()
			w.emit(line)
			return
		}
	}
	w.addCrash(line)
}

// addCrash adds a line to the crash dump.
func (w *guestOutput) addCrash(line string) {
	if w.crashLines++; len(w.crash) < maxCrashLines {
		w.crash = append(w.crash, line)
	}
}

// flushRuntime logs the "runtime: " lines that did not begin a crash dump.
func (w *guestOutput) flushRuntime() {
	for _, l := range w.runtime {
		w.emit(l)
	}
	w.runtime = w.runtime[:0]
}

// emit logs one line at the stream's level, if the level is on and the limit allows it.
func (w *guestOutput) emit(line string) {
	if w.level < w.log.GetLevel() || !w.limit.allow() {
		return
	}
	w.log.Log(w.level, line, "stream", w.stream)
}

// endCall flushes the pending line and logs the crash dump of the call, if any, as one ERROR
// entry: its first line is the message, the first maxCrashLines lines are the value of
// "crash", and "crash_lines" says how many it had. failed says the call failed: the entry
// is then logged even when the rate limit would drop it.
func (w *guestOutput) endCall(failed bool) {
	w.flush()
	w.flushRuntime()
	if len(w.crash) == 0 {
		return
	}
	if failed {
		w.limit.force()
	} else if !w.limit.allow() {
		return
	}
	w.log.Error(w.crash[0], "stream", w.stream, "crash", strings.Join(w.crash, "\n"), "crash_lines", w.crashLines)
}

// detail returns what GuestError.Detail keeps of what the guest wrote in this call: the
// start of its crash dump if it had one, else the start of its stderr, at most
// maxGuestDetail bytes, trimmed.
func (w *guestOutput) detail() string {
	if len(w.crash) == 0 {
		return string(bytes.TrimSpace(w.head))
	}
	var b strings.Builder
	for _, l := range w.crash { // flush keeps no empty line
		if b.Len()+len(l)+1 > maxGuestDetail {
			if b.Len() == 0 {
				b.WriteString(l[:maxGuestDetail])
			}
			break
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(l)
	}
	return strings.ToValidUTF8(b.String(), "")
}
