// The guest's exports. The entry file of a plugin re-exports them:
//
//     export * from "@statehost/sdk/assembly/exports";

import { init, migrate, processBatch, punctuate, storeVersion } from "./guest";

/** The ABI version marker: never called. */
export function statehost_abi_version_1(): void {}

/** Called once per instance, after _initialize (which runs the entry file's top level). */
export function statehost_init(): i32 {
  return init();
}

/** Processes one batch of count records. */
export function statehost_process_batch(count: i32): i32 {
  return processBatch(count);
}

/** Runs the punctuation id at timeMs. */
export function statehost_punctuate(id: i32, timeMs: i64): i32 {
  return punctuate(id, timeMs);
}

/** The version of the entries of the store with that handle (withStoreVersion; 1 without). */
export function statehost_store_version(store: i32): i32 {
  return storeVersion(store);
}

/** Migrates the old entries of the iterator entries into the store's current form. */
export function statehost_migrate(store: i32, fromVersion: i32, entries: i32): i32 {
  return migrate(store, fromVersion, entries);
}
