// Command sessionize groups each user's events into sessions in the session store
// "sessions", and emits each session once it is final: an example of a session store, the
// SDK's session merge and a stream-time punctuation.
//
// Input: key = a user id, one record per event; the value is ignored. Records with a null
// key are skipped with a warning. An event at time t joins the user's sessions within the
// store's inactivity_gap of t (pluginsdk.SessionStore.Merge): an event within the gap of a
// session extends it, one that bridges two sessions merges them, and one further than the
// gap from every session starts a new one. The value stored per session is its number of
// events, in decimal ASCII. An event that would extend a closed session (end + grace <
// stream time) is late: it is dropped, and the host counts it.
//
// Output: a stream-time punctuation (every second of stream time) emits every final session,
// one no record that is not late can change any more (end + inactivity_gap + grace <
// stream time), to the first output topic: key = the user id, value =
// "<start_ms>,<end_ms>,<count>" in decimal ASCII (start and end are the times of the
// session's first and last event), then removes it. Each session is therefore emitted
// exactly once (across crashes under processing_guarantee = "exactly_once"; under
// at-least-once a crash may emit a session again). The records of one punctuation come by
// session end, then user, with the punctuation's time as timestamp.
//
// The store, for example:
//
//	store "sessions" {
//	  type           = "session"
//	  inactivity_gap = "30m"
//	  grace          = "1m"
//	  retention      = "2h"
//	}
//
// Keep retention well above inactivity_gap + grace: a session is emitted only if a
// punctuation sees it final before it expires (end <= stream time - retention), and stream
// time can jump by a whole batch between punctuations. The default retention, the larger of
// a day and inactivity_gap + grace, leaves a day for that.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o sessionize.wasm .
// (or go run ./plugins/build sessionize from the repository root).
package main

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/statehost/statehost/abi"
	"github.com/statehost/statehost/plugins/internal/tally"
	"github.com/statehost/statehost/pluginsdk"
)

// Store is the name of the session store.
const Store = "sessions"

func init() {
	pluginsdk.Register(sessionize, pluginsdk.WithSessionStores(Store),
		pluginsdk.WithPunctuation(pluginsdk.StreamTimePunctuation, time.Second, emitFinal))
}

// one is the count of a single event.
var one = []byte("1")

func sessionize(ctx pluginsdk.Context) error {
	rec := ctx.Record()
	if rec.Key == nil {
		ctx.Log(pluginsdk.Warn, "skipping record with a null key")
		return nil
	}
	// A late event is dropped (stored = false): the host counts it.
	_, _, _, err := ctx.SessionStore(Store).Merge(rec.Key, rec.Timestamp.UnixMilli(), one, add)
	return err
}

// add sums two decimal counts into acc's memory.
func add(acc, v []byte) ([]byte, error) {
	a, err := tally.Parse(acc)
	if err != nil {
		return nil, err
	}
	b, err := tally.Parse(v)
	if err != nil {
		return nil, err
	}
	return strconv.AppendUint(acc[:0], a+b, 10), nil
}

// finalSession is a session emitFinal found; its user is users[userLo:userHi].
type finalSession struct {
	s              pluginsdk.Session
	count          uint64
	userLo, userHi int
}

// The punctuation's scratch state, reused.
var (
	final []finalSession
	users []byte
	out   []byte
)

// emitFinal emits and removes every final session that is not expired.
func emitFinal(ctx pluginsdk.PunctuationContext) error {
	sessions := ctx.SessionStore(Store)
	if err := sessions.Err(); err != nil {
		return err
	}
	now := ctx.StreamTime()
	if now == abi.NoTime {
		return nil
	}
	info := sessions.Info()
	// Final: end + inactivity_gap + grace < now. Not expired: end > now - retention.
	from, to := now-info.Retention+1, now-info.InactivityGap-info.Grace-1
	if from > to {
		return nil
	}
	// Collect first: whether an open iterator sees the removals is not specified.
	final, users = final[:0], users[:0]
	it := sessions.FindAll(from, to)
	for it.Next() {
		n, err := tally.Parse(it.Value())
		if err != nil {
			it.Close()
			return fmt.Errorf("sessionize: user %q, session [%d,%d]: %w", it.Key(), it.Start(), it.End(), err)
		}
		lo := len(users)
		users = append(users, it.Key()...)
		final = append(final, finalSession{s: it.Session(), count: n, userLo: lo, userHi: len(users)})
	}
	err := it.Err()
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	slices.SortFunc(final, func(a, b finalSession) int {
		return cmp.Or(cmp.Compare(a.s.End, b.s.End), bytes.Compare(users[a.userLo:a.userHi], users[b.userLo:b.userHi]),
			cmp.Compare(a.s.Start, b.s.Start))
	})
	for _, f := range final {
		user := users[f.userLo:f.userHi:f.userHi]
		if user == nil {
			user = []byte{} // an empty user id, not a null key
		}
		out = tally.AppendResult(out[:0], f.s.Start, f.s.End, f.count)
		if err := ctx.Emit(user, out); err != nil {
			return err
		}
		if err := sessions.Remove(user, f.s); err != nil {
			return err
		}
	}
	return nil
}

func main() {}
