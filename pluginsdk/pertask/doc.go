// Package pertask asks the host for an instance of the plugin per task: import it for its
// side effect in a plugin that keeps per-task data in globals.
//
//	import _ "github.com/statehost/statehost/pluginsdk/pertask"
//
// By default a host lends one instance to many tasks of the processor, one call at a time,
// so that memory grows with its workers rather than its tasks (see "Instances and tasks" in
// package abi). A plugin that imports this package exports the marker
// abi.ExportInstancePerTask: each of its tasks then gets an instance of its own, whose
// statehost_init runs for that task, and which serves no other. It costs an instance's
// memory per task (several MiB for a Go guest): keep state in stores instead where you can.
//
// Natively (sdktest) the package does nothing: the in-memory host serves one task.
package pertask
