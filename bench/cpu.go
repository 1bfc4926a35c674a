package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of the CPU times in /proc/<pid>/stat (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// cpuTime returns the user plus system CPU time process pid has used so far, from
// /proc/<pid>/stat (fields 14 and 15), or an error where there is no /proc.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces: fields are counted after its ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("bench: /proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("bench: /proc/%d/stat: %d fields", pid, len(f))
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bench: /proc/%d/stat: bad CPU times", pid)
	}
	return time.Duration(utime+stime) * clockTick, nil
}

// cpuMark is the CPU time of the contender and of the broker (this process, or Apache
// Kafka's) at one moment.
type cpuMark struct{ child, broker time.Duration }

func markCPU(pid, brokerPID int) (cpuMark, bool) {
	c, err1 := cpuTime(pid)
	b, err2 := cpuTime(brokerPID)
	return cpuMark{c, b}, err1 == nil && err2 == nil
}

// peakRSS returns the peak resident set of process pid so far (VmHWM in /proc/<pid>/status),
// in bytes. Unlike the rusage of a waited child, it counts only the child's own memory: on
// Linux a child's ru_maxrss starts from its parent's resident set at the fork, and the parent
// here holds the broker's data.
func peakRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				return kb << 10, err
			}
		}
	}
	return 0, fmt.Errorf("bench: /proc/%d/status: no VmHWM", pid)
}
