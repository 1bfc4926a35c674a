//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package broker

import (
	"fmt"
	"os"
	"path/filepath"
)

// lockFileName: see lock.go. Without flock the file is created but not locked, so two
// brokers on one data directory are not prevented on this platform.
const lockFileName = "statehost-broker.lock"

func lockDataDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockFileName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("broker: locking data dir %s: %w", dir, err)
	}
	return f, nil
}
