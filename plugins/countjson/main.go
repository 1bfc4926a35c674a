// Command countjson counts records per key as plugins/count does, and emits the same
// records, but keeps each count in the store "counts" as JSON, {"n":5}: version 2 of that
// store (pluginsdk.WithStoreVersion). Deployed over count's store, whose version 1 holds each
// count in decimal ASCII, it migrates the store first: each "5" becomes {"n":5}.
//
// For a record with key k and a null value it deletes k from counts and emits a tombstone
// for k. Otherwise it increments the count stored under k (absent means 0), stores it, and
// emits key k with the new count in decimal. Records with a null key are skipped with a
// warning.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o countjson.wasm .
// (or go run ./plugins/build countjson from the repository root).
package main

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/statehost/statehost/plugins/internal/tally"
	"github.com/statehost/statehost/pluginsdk"
)

func init() {
	pluginsdk.Register(count, pluginsdk.WithStores("counts"), pluginsdk.WithStoreVersion("counts", 2, migrate))
}

// The stored form: {"n":<decimal count>}, exactly (the processor writes nothing else).
var (
	jsonOpen  = []byte(`{"n":`)
	jsonClose = []byte(`}`)
)

// appendJSON appends the stored form of n to dst.
func appendJSON(dst []byte, n uint64) []byte {
	dst = append(dst, jsonOpen...)
	dst = strconv.AppendUint(dst, n, 10)
	return append(dst, jsonClose...)
}

// parseJSON parses the stored form.
func parseJSON(b []byte) (uint64, error) {
	digits, ok := bytes.CutPrefix(b, jsonOpen)
	if ok {
		digits, ok = bytes.CutSuffix(digits, jsonClose)
	}
	if !ok {
		return 0, fmt.Errorf("stored count %q is not {\"n\":<count>}", b)
	}
	return tally.Parse(digits)
}

// Reusable buffers (the host copies what it is given).
var num, stored []byte

func count(ctx pluginsdk.Context) error {
	rec := ctx.Record()
	if rec.Key == nil {
		ctx.Log(pluginsdk.Warn, "skipping record with a null key")
		return nil
	}
	counts := ctx.Store("counts")
	if rec.IsNull() {
		if err := counts.Delete(rec.Key); err != nil {
			return err
		}
		return ctx.Emit(rec.Key, nil)
	}
	old, found, err := counts.Get(rec.Key)
	if err != nil {
		return err
	}
	var n uint64
	if found {
		if n, err = parseJSON(old); err != nil {
			return fmt.Errorf("countjson: key %q: %w", rec.Key, err)
		}
	}
	n++
	stored = appendJSON(stored[:0], n)
	if err := counts.Put(rec.Key, stored); err != nil {
		return err
	}
	num = strconv.AppendUint(num[:0], n, 10)
	return ctx.Emit(rec.Key, num)
}

// migrate turns a count of version 1, decimal, into its JSON form. A count already in JSON
// form stays as it is: under at_least_once a crash during a migration's commit may leave some
// counts migrated while the store is still at version 1.
func migrate(m *pluginsdk.Migration, key, value []byte) error {
	n, err := tally.Parse(value)
	if err != nil {
		if _, jerr := parseJSON(value); jerr == nil {
			return m.Store().Put(key, value)
		}
		return fmt.Errorf("version %d: %w", m.From(), err)
	}
	stored = appendJSON(stored[:0], n)
	return m.Store().Put(key, stored)
}

func main() {}
