//go:build !linux

package store

import "errors"

// canSyncFS reports whether syncFS syncs a whole file system in one call: not here.
const canSyncFS = false

func syncFS(string) error { return errors.ErrUnsupported }
