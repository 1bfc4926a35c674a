package broker

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kfake"
)

// kfakeLogger passes kfake's logs to an hclog logger: kfake's info (one line per request)
// at debug, its debug at trace, its warnings and errors (persistence problems, corrupt data
// truncated at load) at warn and error. While the broker closes it also keeps the first
// error, which is how kfake reports a failed flush to disk.
type kfakeLogger struct {
	log     hclog.Logger
	closing atomic.Bool

	mu       sync.Mutex
	closeErr string
}

var _ kfake.Logger = (*kfakeLogger)(nil)

func (l *kfakeLogger) Logf(level kfake.LogLevel, format string, args ...any) {
	var (
		to      hclog.Level
		enabled bool
	)
	switch level {
	case kfake.LogLevelError:
		to, enabled = hclog.Error, true
	case kfake.LogLevelWarn:
		to, enabled = hclog.Warn, l.log.IsWarn()
	case kfake.LogLevelInfo:
		to, enabled = hclog.Debug, l.log.IsDebug()
	case kfake.LogLevelDebug:
		to, enabled = hclog.Trace, l.log.IsTrace()
	default:
		return
	}
	if !enabled {
		return
	}
	msg := fmt.Sprintf(format, args...)
	if to == hclog.Error && l.closing.Load() {
		l.mu.Lock()
		if l.closeErr == "" {
			l.closeErr = msg
		}
		l.mu.Unlock()
	}
	l.log.Log(to, msg)
}

// closeError returns the first error logged since the broker began to close, or "".
func (l *kfakeLogger) closeError() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.closeErr
}
