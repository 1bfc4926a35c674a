package engine

import (
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// guestLogReportEvery is the shortest time between two "N guest log lines dropped" reports of
// a task, and the longest a dropped line waits to be reported.
const guestLogReportEvery = 5 * time.Second

// LogLimiter is the rate limit of one task's guest log: the entries of the log host function
// and the lines the guest writes to stdout and stderr share one token bucket that refills at
// Config.GuestLogRate lines a second up to Config.GuestLogBurst lines. A line that finds the
// bucket empty is dropped; the dropped lines are counted and reported in a WARN entry
// "N guest log lines dropped" (keys processor, partition, dropped) when the limit lets a line
// through again, or 5 s after the first unreported drop, and at most about every 5 s; and they
// are passed to Config.OnGuestLogsDropped at the end of the guest call that dropped them.
//
// Lines below the logger's level are not logged and take no token. A Go runtime crash dump
// is one entry (see guestOutput); it is logged even when the bucket is empty if the call
// failed, since it says why.
//
// The zero value is ready to use: the first instance that uses it sets its rate from its
// engine's Config. Give every instance of a task the same one (Task.LogLimiter), so that
// the limit holds across the instances that replace one another after a failure or a deploy.
type LogLimiter struct {
	mu        sync.Mutex
	set       bool          // rate and burst are set
	unlimited bool          // GuestLogRate < 0
	rate      float64       // tokens a second
	burst     float64       // the most tokens
	tokens    float64       // tokens at last
	last      time.Time     // when tokens was computed
	log       hclog.Logger  // the logger of the instance that used it last
	dropped   int64         // lines dropped since the last report
	since     time.Time     // the first of them
	unmetered int64         // lines dropped since the last call of OnGuestLogsDropped
	reported  time.Time     // the last report
	timer     *time.Timer   // reports the drops reportIn after the first unreported one
	reportIn  time.Duration // guestLogReportEvery; tests shorten it
}

// attach prepares the limiter for an instance: its rate, if not set yet, comes from cfg, and
// its reports go to log, the instance's logger.
func (l *LogLimiter) attach(cfg Config, log hclog.Logger) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.log = log
	if l.set {
		return
	}
	l.set = true
	l.unlimited = cfg.GuestLogRate < 0
	l.rate, l.burst = cfg.GuestLogRate, float64(cfg.GuestLogBurst)
	l.tokens, l.last = l.burst, time.Now()
	if l.reportIn == 0 {
		l.reportIn = guestLogReportEvery
	}
}

// allow takes a token for one line and reports whether the line may be logged; a line it
// refuses is counted as dropped.
func (l *LogLimiter) allow() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.unlimited {
		return true
	}
	now := time.Now()
	l.tokens = min(l.burst, l.tokens+now.Sub(l.last).Seconds()*l.rate)
	l.last = now
	if l.tokens >= 1 {
		l.tokens--
		if l.dropped > 0 && now.Sub(l.reported) >= l.reportIn {
			l.report(now) // before the line it lets through
		}
		return true
	}
	if l.dropped == 0 {
		l.since = now
		if l.timer == nil {
			l.timer = time.AfterFunc(l.reportIn, l.expire)
		} else {
			l.timer.Reset(l.reportIn)
		}
	}
	l.dropped++
	l.unmetered++
	return false
}

// force takes a token for a line that is logged anyway: it may leave the bucket in debt.
func (l *LogLimiter) force() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.unlimited {
		l.tokens--
	}
}

// takeUnmetered returns the lines dropped since its last call.
func (l *LogLimiter) takeUnmetered() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := l.unmetered
	l.unmetered = 0
	return n
}

// expire runs on the timer's goroutine: it reports the lines dropped since the last report.
// A fire that raced with a report finds nothing dropped, or the first drop too recent.
func (l *LogLimiter) expire() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now := time.Now(); l.dropped > 0 && now.Sub(l.since) >= l.reportIn {
		l.report(now)
	}
}

// report logs the count of dropped lines and starts counting again; l.mu is held.
func (l *LogLimiter) report(now time.Time) {
	l.log.Warn(fmt.Sprintf("%d guest log lines dropped", l.dropped), "dropped", l.dropped,
		"rate_per_second", l.rate, "burst", l.burst)
	l.dropped, l.reported = 0, now
	l.timer.Stop()
}
