package store

import (
	"os"

	"golang.org/x/sys/unix"
)

// canSyncFS reports whether syncFS syncs a whole file system in one call (syncfs(2)).
const canSyncFS = true

// syncFS makes durable what was written to the file system that holds dir.
func syncFS(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return unix.Syncfs(int(d.Fd()))
}
