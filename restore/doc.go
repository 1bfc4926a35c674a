// Package restore rebuilds the local state of tasks from their changelog topics.
package restore
