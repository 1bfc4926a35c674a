// Command gopertask is a Go guest for the engine's tests that asks for an instance per task
// (package pertask): it counts the records its instance saw in a global, and emits the
// count for each record.
//
// Built by the engine's TestMain with:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o gopertask.wasm ./host/engine/testdata/gopertask
package main

import (
	"strconv"

	"github.com/statehost/statehost/pluginsdk"
	_ "github.com/statehost/statehost/pluginsdk/pertask"
)

func init() {
	pluginsdk.Register(process)
}

// seen is per-task data in a global: right only with an instance per task.
var seen int

func process(ctx pluginsdk.Context) error {
	seen++
	return ctx.Emit(ctx.Record().Key, []byte(strconv.Itoa(seen)))
}

func main() {}
