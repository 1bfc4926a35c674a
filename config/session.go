package config

import (
	"math"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// The bounds of session_timeout that hold whatever the broker allows. The broker's own range
// (group.min.session.timeout.ms to group.max.session.timeout.ms: 6s to 30m by default on
// Kafka, 100ms to 5m on the embedded broker) is checked by run, which asks the broker.
const (
	// minSessionTimeout is the shortest session_timeout: the Kafka client refuses a shorter
	// one, and it is the embedded broker's group.min.session.timeout.ms.
	minSessionTimeout = 100 * time.Millisecond
	// maxSessionTimeout is the longest: a JoinGroup request carries the session timeout as
	// a 32-bit number of milliseconds.
	maxSessionTimeout = math.MaxInt32 * time.Millisecond
)

// decodeSessionTimeout decodes session_timeout into c.SessionTimeout (the default when it is
// absent or invalid) and c.SessionTimeoutRange. It must be a whole number of milliseconds
// (the unit of the Kafka protocol) from minSessionTimeout to maxSessionTimeout.
func (d *decoder) decodeSessionTimeout(expr hcl.Expression, body hcl.Body, c *Config) {
	c.SessionTimeout, c.SessionTimeoutRange = defaultSessionTimeout, body.MissingItemRange()
	if absent(expr) {
		return
	}
	c.SessionTimeoutRange = expr.Range()
	dur, text, ok := d.durationValue(expr, "session_timeout", false)
	switch {
	case !ok:
	case dur < minSessionTimeout:
		d.errorf(expr.Range(), "Session timeout too short", "The session_timeout %q is shorter than %s, which the Kafka client refuses. A broker allows its own range besides (group.min.session.timeout.ms to group.max.session.timeout.ms: 6s to 30m by default on Kafka, %s to 5m on the embedded broker), which run checks.", text, FormatDuration(minSessionTimeout), FormatDuration(minSessionTimeout))
	case dur > maxSessionTimeout:
		d.errorf(expr.Range(), "Session timeout too long", "The session_timeout %q is longer than %s (%d ms), the most Kafka's group protocol can carry.", text, FormatDuration(maxSessionTimeout), int64(math.MaxInt32))
	case dur%time.Millisecond != 0:
		d.errorf(expr.Range(), "Invalid duration", "The argument \"session_timeout\" must be a whole number of milliseconds, not %q: Kafka's group protocol counts it in milliseconds.", text)
	default:
		c.SessionTimeout = dur
	}
}
