package engine

import (
	"errors"
	"fmt"

	"github.com/statehost/statehost/abi"
	"github.com/statehost/statehost/internal/recordbatch"
)

// Size limits of what host calls produce: a state write's changelog record and an emitted
// record must fit their topic (Task.StoreLimits, Task.OutputLimits), and the emits of one
// input record its budget (Task.EmitBudget). A call past a limit answers CodeLimit at once,
// before anything changed, instead of a record that the producer or the broker would refuse
// at the commit (which would fail every commit of the task, whatever on_error says).

// ErrEmitBudget: the guest emitted more for its current record than the task's emit budget
// (Task.EmitBudget). The emit that passed it answered CodeLimit, and the call fails with this
// cause whatever the guest did then: it is the record's fault.
var ErrEmitBudget = errors.New("engine: emit budget exceeded")

// LimitError describes a host call answered with CodeLimit because of a size limit: a write
// whose changelog record, or an emit whose record, would not fit its topic, or an emit past
// the record's emit budget. When the guest call then fails, its *GuestError carries the last
// one (errors.As finds it): the guest's failure most likely follows it.
type LimitError struct {
	Call   string // what was refused: `store "counts": state_put`, `output "out": emit`
	Size   int64  // what it would take: the record batch's bytes, or the record's emitted bytes with this emit
	Limit  int64  // the limit it passes
	Budget bool   // the limit is the emit budget; else the topic's
	// Changelog is set when the record is a store's changelog record.
	Changelog bool
}

// Error implements error.
func (e *LimitError) Error() string {
	if e.Budget {
		return fmt.Sprintf("%s refused (CodeLimit): the emits of the record would take %d bytes, past its emit budget of %d bytes (emit_budget)",
			e.Call, e.Size, e.Limit)
	}
	what := "its record"
	if e.Changelog {
		what = "its changelog record"
	}
	return fmt.Sprintf("%s refused (CodeLimit): %s would take %d bytes as a Kafka record batch, more than the limit of %d bytes of its topic (max.message.bytes, and the producer's batch bound)",
		e.Call, what, e.Size, e.Limit)
}

// changelogKeyExtra is what a store's changelog key adds to the guest's key: the window start
// of a window store (8 bytes), the session end and start of a session store (16); see
// store.ChangelogKey.
func changelogKeyExtra(kind int32) int {
	switch kind {
	case abi.StoreWindow:
		return 8
	case abi.StoreSession:
		return 16
	}
	return 0
}

// writeFits reports whether the changelog record of a write to s (a key of keyLen bytes, a
// value of valueLen, 0 for a delete) fits the store's limit; when it does not, it notes the
// refusal of op for the call's error, and the caller answers CodeLimit.
func (c *call) writeFits(s *openStore, op string, keyLen, valueLen int) bool {
	if s.limit <= 0 {
		return true
	}
	size := recordbatch.Size(keyLen+changelogKeyExtra(s.kind), valueLen, 0, 0)
	if size <= s.limit {
		return true
	}
	c.in.refused = &LimitError{Call: fmt.Sprintf("store %q: %s", s.name, op), Size: int64(size), Limit: int64(s.limit), Changelog: true}
	return false
}

// emitFits reports whether an emit to output out, of these key and value lengths with
// headers hs, fits the output's limit and the current record's emit budget, counting it in
// the budget when it does. An emit past the limit is noted (as writeFits does); one past the
// budget fails the call (ErrEmitBudget). The caller answers CodeLimit when it does not fit.
func (c *call) emitFits(out int32, keyLen, valueLen int, hs []Header) bool {
	in := c.in
	if int(out) < len(in.task.OutputLimits) && in.task.OutputLimits[out] > 0 {
		limit, hb := in.task.OutputLimits[out], 0
		for _, h := range hs {
			hb += recordbatch.Header(len(h.Key), len(h.Value))
		}
		if size := recordbatch.Size(keyLen, valueLen, len(hs), hb); size > limit {
			in.refused = &LimitError{Call: fmt.Sprintf("output %q: emit", in.task.Outputs[out]), Size: int64(size), Limit: int64(limit)}
			return false
		}
	}
	budget := in.task.EmitBudget
	if budget <= 0 || in.current() == nil { // a punctuation's emits are not budgeted
		return true
	}
	if in.emittedAt != in.cursor {
		in.emittedAt, in.emitted = in.cursor, 0
	}
	n := int64(keyLen + valueLen)
	for _, h := range hs {
		n += int64(len(h.Key) + len(h.Value))
	}
	if in.emitted+n > budget {
		err := &LimitError{Call: fmt.Sprintf("output %q: emit", in.task.Outputs[out]), Size: in.emitted + n, Limit: budget, Budget: true}
		in.refused = err
		in.hostFailed(ErrEmitBudget, err)
		return false
	}
	in.emitted += n
	return true
}
