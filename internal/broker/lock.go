//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package broker

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// lockFileName is the file in the data directory that a running broker holds an exclusive
// flock on. The kernel releases the lock when the process dies, even by SIGKILL, so a stale
// file never blocks a restart. The file holds the process ID of the broker, for operators.
const lockFileName = "statehost-broker.lock"

// lockDataDir takes the data directory's lock; closing the returned file releases it. The
// file is never removed: removing it would let a second broker lock a new file of the same
// name while the first still holds the old one.
func lockDataDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("broker: locking data dir %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			owner := ""
			if pid, _ := os.ReadFile(path); len(bytes.TrimSpace(pid)) > 0 {
				owner = " (pid " + string(bytes.TrimSpace(pid)) + ")"
			}
			return nil, fmt.Errorf("broker: data dir %s is used by another broker%s", dir, owner)
		}
		return nil, fmt.Errorf("broker: locking data dir %s: %w", dir, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}
