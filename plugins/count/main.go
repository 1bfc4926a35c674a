// Command count is the second half of the word-count demo: it counts records per key in the
// store "counts" and emits each new count to its first output topic.
//
// For a record with key k and a null value it deletes k from counts and emits a tombstone
// for k. Otherwise it increments the count stored under k (decimal ASCII; absent means 0),
// stores it, and emits key k with the new count in decimal. Records with a null key are
// skipped with a warning, as Kafka Streams' aggregations do.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o count.wasm .
// (or go run ./plugins/build from the repository root).
package main

import (
	"fmt"
	"strconv"

	"github.com/statehost/statehost/plugins/internal/tally"
	"github.com/statehost/statehost/pluginsdk"
)

func init() {
	pluginsdk.Register(count, pluginsdk.WithStores("counts"))
}

// num is a reusable buffer for the decimal count (the host copies what it is given).
var num []byte

func count(ctx pluginsdk.Context) error {
	rec := ctx.Record()
	if rec.Key == nil {
		ctx.Log(pluginsdk.Warn, "skipping record with a null key")
		return nil
	}
	counts := ctx.Store("counts")
	if rec.IsNull() {
		if err := counts.Delete(rec.Key); err != nil {
			return err
		}
		return ctx.Emit(rec.Key, nil)
	}
	old, found, err := counts.Get(rec.Key)
	if err != nil {
		return err
	}
	var n uint64
	if found {
		if n, err = tally.Parse(old); err != nil {
			return fmt.Errorf("count: key %q: %w", rec.Key, err)
		}
	}
	num = strconv.AppendUint(num[:0], n+1, 10)
	if err := counts.Put(rec.Key, num); err != nil {
		return err
	}
	return ctx.Emit(rec.Key, num)
}

func main() {}
