//go:build !unix

package store

import (
	"fmt"
	"os"
)

// lockDir opens path without locking: directory locks are implemented on unix only.
func lockDir(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	return f, nil
}

func unlockDir(f *os.File) { _ = f.Close() }
