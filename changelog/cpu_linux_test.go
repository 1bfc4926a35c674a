package changelog

import (
	"syscall"
	"time"
)

// cpuTimes returns the CPU time (user + system) used so far by the process and by the
// calling thread; ok is false where the system cannot tell.
func cpuTimes() (process, thread time.Duration, ok bool) {
	var p, t syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &p) != nil || syscall.Getrusage(syscall.RUSAGE_THREAD, &t) != nil {
		return 0, 0, false
	}
	d := func(r syscall.Rusage) time.Duration {
		return time.Duration(r.Utime.Nano() + r.Stime.Nano())
	}
	return d(p), d(t), true
}
