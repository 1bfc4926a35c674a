//go:build wasip1

package pertask

// The marker is never called; exporting it is the request (abi.ExportInstancePerTask).
//
//go:wasmexport statehost_instance_per_task
func exportInstancePerTask() {}
