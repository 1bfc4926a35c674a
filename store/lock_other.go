//go:build !unix

package store

import (
	"errors"
	"fmt"
	"os"
)

// lockDir opens path without locking: directory locks are implemented on unix only.
func lockDir(path string, readOnly bool) (*os.File, error) {
	flags := os.O_CREATE | os.O_RDWR
	if readOnly {
		flags = os.O_RDONLY
	}
	f, err := os.OpenFile(path, flags, 0o644)
	if readOnly && errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	return f, nil
}

func unlockDir(f *os.File) { _ = f.Close() }
