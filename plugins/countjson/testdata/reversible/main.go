// Command reversible is plugins/countjson whose migration of count's decimal counts can be
// undone (pluginsdk.WithReverseMigration): a rollback from it to count turns each {"n":5}
// back into "5". The tests of a rollback after a migration run it; plugins/countjson, whose
// migration is one way, is the refused case.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o reversible.wasm .
package main

import (
	"github.com/statehost/statehost/plugins/internal/jsoncount"
	"github.com/statehost/statehost/pluginsdk"
)

func init() {
	pluginsdk.Register(jsoncount.Count, pluginsdk.WithStores("counts"),
		pluginsdk.WithStoreVersion("counts", jsoncount.Version, jsoncount.Migrate),
		pluginsdk.WithReverseMigration("counts", 1, jsoncount.MigrateBack))
}

func main() {}
