// Package jsoncount is the processor of plugins/countjson, shared with its test variants: a
// word count that keeps each count in the store "counts" as JSON, {"n":5} (version 2 of that
// store), emits it in decimal as plugins/count does, and migrates count's decimal counts
// (version 1).
package jsoncount

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/statehost/statehost/plugins/internal/tally"
	"github.com/statehost/statehost/pluginsdk"
)

// Version is the version of the store "counts" that Count reads and writes.
const Version = 2

// The stored form: {"n":<decimal count>}, exactly (the processor writes nothing else).
var (
	jsonOpen  = []byte(`{"n":`)
	jsonClose = []byte(`}`)
)

// AppendJSON appends the stored form of n to dst.
func AppendJSON(dst []byte, n uint64) []byte {
	dst = append(dst, jsonOpen...)
	dst = strconv.AppendUint(dst, n, 10)
	return append(dst, jsonClose...)
}

// ParseJSON parses the stored form.
func ParseJSON(b []byte) (uint64, error) {
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

// Count is the processor: for a record with key k and a null value it deletes k from counts
// and emits a tombstone for k; otherwise it increments the count stored under k (absent means
// 0), stores it, and emits key k with the new count in decimal. Records with a null key are
// skipped with a warning.
func Count(ctx pluginsdk.Context) error {
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
		if n, err = ParseJSON(old); err != nil {
			return fmt.Errorf("countjson: key %q: %w", rec.Key, err)
		}
	}
	n++
	stored = AppendJSON(stored[:0], n)
	if err := counts.Put(rec.Key, stored); err != nil {
		return err
	}
	num = strconv.AppendUint(num[:0], n, 10)
	return ctx.Emit(rec.Key, num)
}

// Migrate turns a count of version 1, decimal, into its JSON form. A count already in JSON
// form stays as it is: under at_least_once a crash during a migration's commit may leave some
// counts migrated while the store is still at version 1.
func Migrate(m *pluginsdk.Migration, key, value []byte) error {
	n, err := tally.Parse(value)
	if err != nil {
		if _, jerr := ParseJSON(value); jerr == nil {
			return m.Store().Put(key, value)
		}
		return fmt.Errorf("version %d: %w", m.From(), err)
	}
	stored = AppendJSON(stored[:0], n)
	return m.Store().Put(key, stored)
}

// MigrateBack turns a count of version 2, JSON, back into count's decimal form (version 1):
// the reverse migration of a rollback to count (pluginsdk.WithReverseMigration). A count
// already in decimal form stays as it is, as in Migrate.
func MigrateBack(m *pluginsdk.Migration, key, value []byte) error {
	n, err := ParseJSON(value)
	if err != nil {
		if _, derr := tally.Parse(value); derr == nil {
			return m.Store().Put(key, value)
		}
		return fmt.Errorf("version %d: %w", m.From(), err)
	}
	num = strconv.AppendUint(num[:0], n, 10)
	return m.Store().Put(key, num)
}
