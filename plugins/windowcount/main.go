// Command windowcount counts records per key and time window in the window store "windows",
// and emits each window's final count once, when the window closes: an example of a window
// store and a stream-time punctuation.
//
// Input: key = a word; the value is ignored (a tombstone counts as any record). Records
// with a null key are skipped with a warning. A record's timestamp selects its windows: the
// windows [start, start + window_size) that contain it, their starts being the multiples of
// the store's advance (pluginsdk.WindowStore.WindowsFor). That is one window when the store
// is configured for tumbling windows (advance = window_size, the default) and several for
// hopping windows (advance < window_size). For each window the count stored under the word
// (decimal ASCII; absent means 0) is incremented and stored. A put into a closed window is
// dropped, and the host counts the late record.
//
// Output: a stream-time punctuation (every second of stream time) emits every closed window
// (start + window_size + grace <= stream time) to the first output topic, key = the word,
// value = "<start_ms>,<end_ms>,<count>" in decimal ASCII (end = start + window_size,
// exclusive), then deletes the window. Since a closed window takes no more counts and an
// emitted one is deleted, each window is emitted exactly once (across crashes under
// processing_guarantee = "exactly_once", where the emit and the delete commit together;
// under at-least-once a crash may emit a window again). The records of one
// punctuation come by window start, then word, with the punctuation's time as timestamp.
//
// The store, for example:
//
//	store "windows" {
//	  type        = "window"
//	  window_size = "1m"
//	  advance     = "30s"   # leave out for tumbling windows
//	  grace       = "10s"
//	  retention   = "1h"
//	}
//
// Keep retention well above window_size + grace: a window is emitted only if a punctuation
// sees it closed before it expires (start <= stream time - retention), and stream time can
// jump by a whole batch between punctuations. The default retention, the larger of a day and
// window_size + grace, leaves a day for that; with retention exactly window_size + grace a
// window would expire at the very stream time it closes and never be emitted.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o windowcount.wasm .
// (or go run ./plugins/build windowcount from the repository root).
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

// Store is the name of the window store.
const Store = "windows"

func init() {
	pluginsdk.Register(count, pluginsdk.WithWindowStores(Store),
		pluginsdk.WithPunctuation(pluginsdk.StreamTimePunctuation, time.Second, emitClosed))
}

// num is a reusable buffer for decimal numbers (the host copies what it is given).
var num []byte

func count(ctx pluginsdk.Context) error {
	rec := ctx.Record()
	if rec.Key == nil {
		ctx.Log(pluginsdk.Warn, "skipping record with a null key")
		return nil
	}
	windows := ctx.WindowStore(Store)
	if err := windows.Err(); err != nil {
		return err
	}
	for _, start := range windows.WindowsFor(rec.Timestamp.UnixMilli()) {
		old, found, err := windows.Get(rec.Key, start)
		if err != nil {
			return err
		}
		var n uint64
		if found {
			if n, err = tally.Parse(old); err != nil {
				return fmt.Errorf("windowcount: key %q, window %d: %w", rec.Key, start, err)
			}
		}
		num = strconv.AppendUint(num[:0], n+1, 10)
		// A put into a closed window is dropped (stored = false): the host counts it.
		if _, err := windows.Put(rec.Key, start, num); err != nil {
			return err
		}
	}
	return nil
}

// closedWindow is a window emitClosed found; its key is keys[keyLo:keyHi].
type closedWindow struct {
	start, end   int64
	count        uint64
	keyLo, keyHi int
}

// The punctuation's scratch state, reused.
var (
	closed []closedWindow
	keys   []byte
)

// emitClosed emits and deletes every closed window that is not expired.
func emitClosed(ctx pluginsdk.PunctuationContext) error {
	windows := ctx.WindowStore(Store)
	if err := windows.Err(); err != nil {
		return err
	}
	now := ctx.StreamTime()
	if now == abi.NoTime {
		return nil
	}
	info := windows.Info()
	// Closed: start + window_size + grace <= now. Not expired: start > now - retention.
	from, to := now-info.Retention+1, now-info.WindowSize-info.Grace
	if from > to {
		return nil
	}
	// Collect first: whether an open iterator sees the deletes is not specified.
	closed, keys = closed[:0], keys[:0]
	it := windows.FetchAll(from, to)
	for it.Next() {
		n, err := tally.Parse(it.Value())
		if err != nil {
			it.Close()
			return fmt.Errorf("windowcount: key %q, window %d: %w", it.Key(), it.Start(), err)
		}
		lo := len(keys)
		keys = append(keys, it.Key()...)
		closed = append(closed, closedWindow{start: it.Start(), end: it.End(), count: n, keyLo: lo, keyHi: len(keys)})
	}
	err := it.Err()
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	slices.SortFunc(closed, func(a, b closedWindow) int {
		return cmp.Or(cmp.Compare(a.start, b.start), bytes.Compare(keys[a.keyLo:a.keyHi], keys[b.keyLo:b.keyHi]))
	})
	for _, w := range closed {
		key := keys[w.keyLo:w.keyHi:w.keyHi]
		if key == nil {
			key = []byte{} // an empty word, not a null key
		}
		num = tally.AppendResult(num[:0], w.start, w.end, w.count)
		if err := ctx.Emit(key, num); err != nil {
			return err
		}
		if err := windows.Delete(key, w.start); err != nil {
			return err
		}
	}
	return nil
}

func main() {}
