//go:build !linux

package changelog

import "time"

func cpuTimes() (process, thread time.Duration, ok bool) { return 0, 0, false }
