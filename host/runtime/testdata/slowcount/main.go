// Command slowcount counts records per key in the store "tallies", as plugins/count does in
// "counts", and reads its store 300,000 times more for a record whose value is "slow": a job
// that takes a while, for the tests of tasks that share input partitions.
package main

import (
	"github.com/statehost/statehost/host/runtime/testdata/tally"
	"github.com/statehost/statehost/pluginsdk"
)

func init() {
	pluginsdk.Register(count, pluginsdk.WithStores("tallies"))
}

func count(ctx pluginsdk.Context) error {
	rec := ctx.Record()
	if rec.Key == nil {
		return nil
	}
	tallies := ctx.Store("tallies")
	if string(rec.Value) == "slow" {
		for range 300000 {
			if _, _, err := tallies.Get(rec.Key); err != nil {
				return err
			}
		}
	}
	num, err := tally.Increment(tallies, rec.Key)
	if err != nil {
		return err
	}
	return ctx.Emit(rec.Key, num)
}

func main() {}
