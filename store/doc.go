// Package store provides the ordered key-value state stores of statehost tasks, with per-task write buffers and atomic checkpoints.
package store
