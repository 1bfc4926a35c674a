// Command countjson counts records per key as plugins/count does, and emits the same
// records, but keeps each count in the store "counts" as JSON, {"n":5}: version 2 of that
// store (pluginsdk.WithStoreVersion). Deployed over count's store, whose version 1 holds each
// count in decimal ASCII, it migrates the store first: each "5" becomes {"n":5}. The
// processor and the migration are in plugins/internal/jsoncount.
//
// For a record with key k and a null value it deletes k from counts and emits a tombstone
// for k. Otherwise it increments the count stored under k (absent means 0), stores it, and
// emits key k with the new count in decimal. Records with a null key are skipped with a
// warning.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o countjson.wasm .
// (or go run ./plugins/build countjson from the repository root).
package main

import (
	"github.com/statehost/statehost/plugins/internal/jsoncount"
	"github.com/statehost/statehost/pluginsdk"
)

func init() {
	pluginsdk.Register(jsoncount.Count, pluginsdk.WithStores("counts"),
		pluginsdk.WithStoreVersion("counts", jsoncount.Version, jsoncount.Migrate))
}

func main() {}
