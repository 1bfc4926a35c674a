// Command slowmigrate is plugins/countjson whose migration spins for about a tenth of a
// millisecond per entry: the process tests of cmd/statehost kill a statehost in the middle of
// a migration, which must last long enough to be caught.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o slowmigrate.wasm .
package main

import (
	"github.com/statehost/statehost/plugins/internal/jsoncount"
	"github.com/statehost/statehost/pluginsdk"
)

// sink keeps the spin from being compiled away.
var sink uint64

func init() {
	pluginsdk.Register(jsoncount.Count, pluginsdk.WithStores("counts"),
		pluginsdk.WithStoreVersion("counts", jsoncount.Version, func(m *pluginsdk.Migration, key, value []byte) error {
			for i := range uint64(100_000) {
				sink += i ^ sink>>3
			}
			return jsoncount.Migrate(m, key, value)
		}))
}

func main() {}
