// Command countv2 is the second version of plugins/count for the hot-reload tests: it counts
// records per key in the store "counts" as count does, and also keeps each word's last-seen
// offset under "seen:<word>", and marks what it emits with the header version=2.
package main

import (
	"strconv"

	"github.com/statehost/statehost/host/runtime/testdata/tally"
	"github.com/statehost/statehost/pluginsdk"
)

func init() {
	pluginsdk.Register(count, pluginsdk.WithStores("counts"))
}

var version = []pluginsdk.Header{{Key: "version", Value: []byte("2")}}

func count(ctx pluginsdk.Context) error {
	rec := ctx.Record()
	if rec.Key == nil {
		return nil
	}
	counts := ctx.Store("counts")
	num, err := tally.Increment(counts, rec.Key)
	if err != nil {
		return err
	}
	seen := append([]byte("seen:"), rec.Key...)
	if err := counts.Put(seen, strconv.AppendInt(nil, rec.Offset, 10)); err != nil {
		return err
	}
	return ctx.Send(pluginsdk.Message{Key: rec.Key, Value: num, Headers: version})
}

func main() {}
