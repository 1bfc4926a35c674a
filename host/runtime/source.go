package runtime

import (
	"github.com/statehost/statehost/changelog"
	"github.com/statehost/statehost/host/engine"
)

// taskSource is the changelog.Source of a task: the record its plugin call in progress works
// on, as the task's HostWaits knows it. A record the broker refuses then fails the commit
// with an error naming the input record it belongs to. The emits that the poison guard held
// back name theirs themselves (poisonGuard.release), as dead letters do.
type taskSource struct{ w *engine.HostWaits }

// InputRecord implements changelog.Source.
func (s taskSource) InputRecord() (changelog.Input, bool) {
	topic, part, off, ok := s.w.Record()
	return changelog.Input{Topic: topic, Partition: part, Offset: off}, ok
}
