package runtime

import (
	"fmt"

	"github.com/statehost/statehost/changelog"
	"github.com/statehost/statehost/config"
	"github.com/statehost/statehost/store"
)

// StoreSpecs returns the specs of the stores of processor pc as the runtime opens them in
// its tasks (changelog.OpenTask), without metrics: for the tools that open an application's
// stores outside a run, such as statehost state export and import, so that they read and
// write them exactly as a run does.
func StoreSpecs(pc *config.Processor) ([]changelog.StoreSpec, error) {
	specs := make([]changelog.StoreSpec, 0, len(pc.Stores))
	for _, sc := range pc.Stores {
		backend, err := store.ParseBackend(sc.Backend)
		if err != nil {
			return nil, fmt.Errorf("runtime: processor %s store %s: %w", pc.Name, sc.Name, err)
		}
		specs = append(specs, storeSpec(sc, backend))
	}
	return specs, nil
}
