package kafkalog

import (
	"bytes"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestLevels(t *testing.T) {
	var buf bytes.Buffer
	l := New(hclog.New(&hclog.LoggerOptions{Level: hclog.Debug, Output: &buf}))
	if got := l.Level(); got != kgo.LogLevelInfo {
		t.Errorf("hclog debug: kgo level %v, want info (shown at debug)", got)
	}
	l.Log(kgo.LogLevelInfo, "connected", "broker", 1)
	l.Log(kgo.LogLevelDebug, "hidden")
	l.Log(kgo.LogLevelWarn, "slow")
	out := buf.String()
	if !strings.Contains(out, "[DEBUG] connected: broker=1") || !strings.Contains(out, "[WARN]  slow") || strings.Contains(out, "hidden") {
		t.Errorf("unexpected log output:\n%s", out)
	}
	if got := New(hclog.New(&hclog.LoggerOptions{Level: hclog.Off})).Level(); got != kgo.LogLevelNone {
		t.Errorf("hclog off: kgo level %v, want none", got)
	}
}
