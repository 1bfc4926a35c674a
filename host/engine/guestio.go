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
)

// guestOutput receives a guest's stdout or stderr: it logs each line at a fixed level, as
// the task's LogLimiter allows, and, for stderr, keeps the start of what one guest call
// wrote and notes the markers the Go runtime prints when it panics or runs out of memory.
type guestOutput struct {
	log    hclog.Logger
	level  hclog.Level
	stream string
	limit  *LogLimiter
	line   []byte

	keep     bool   // keep head and markers (stderr)
	head     []byte // the first maxGuestDetail bytes written in this call
	panicked bool   // a line began with "panic: "
	oom      bool   // a line said the runtime ran out of memory
}

// reset forgets what the previous guest call wrote.
func (w *guestOutput) reset() {
	w.head, w.panicked, w.oom = w.head[:0], false, false
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
	if w.keep {
		switch {
		case bytes.HasPrefix(w.line, []byte("panic: ")):
			w.panicked = true
		case bytes.Contains(w.line, []byte("out of memory")):
			w.oom = true
		}
	}
	if w.level >= w.log.GetLevel() && w.limit.allow() {
		w.log.Log(w.level, strings.ToValidUTF8(string(w.line), "\uFFFD"), "stream", w.stream)
	}
	w.line = w.line[:0]
}

// detail returns the start of what the guest wrote in this call, trimmed.
func (w *guestOutput) detail() string {
	return string(bytes.TrimSpace(w.head))
}
