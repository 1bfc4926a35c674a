// A plugin that keeps per-task data in globals re-exports this too, and gets an instance of
// its own for each task (see "Instances and tasks" in abi/doc.go):
//
//     export * from "@statehost/sdk/assembly/pertask";

/** The marker that asks for an instance per task: never called. */
export function statehost_instance_per_task(): void {}
