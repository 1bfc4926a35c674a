// Package kafkalog passes the Kafka client's (franz-go's) logs to an hclog logger.
package kafkalog

import (
	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kgo"
)

// New returns a kgo.Logger that writes to log one level down for the client's chatty levels:
// its info (connections, metadata) at debug and its debug at trace; its warnings and errors
// as they are. Use it with kgo.WithLogger.
func New(log hclog.Logger) kgo.Logger { return logger{log} }

type logger struct{ log hclog.Logger }

func (l logger) Level() kgo.LogLevel {
	switch {
	case l.log.IsTrace():
		return kgo.LogLevelDebug
	case l.log.IsDebug():
		return kgo.LogLevelInfo
	case l.log.IsWarn():
		return kgo.LogLevelWarn
	case l.log.IsError():
		return kgo.LogLevelError
	}
	return kgo.LogLevelNone
}

func (l logger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	switch level {
	case kgo.LogLevelError:
		l.log.Error(msg, keyvals...)
	case kgo.LogLevelWarn:
		l.log.Warn(msg, keyvals...)
	case kgo.LogLevelInfo:
		l.log.Debug(msg, keyvals...)
	case kgo.LogLevelDebug:
		l.log.Trace(msg, keyvals...)
	}
}
