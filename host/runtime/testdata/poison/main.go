// Command poison is a test guest of the runtime's on_error tests: a counter that fails on
// demand, after it has written and emitted, so that a poison record has effects to withdraw.
//
// For a record of topic t with key k it counts k in three stores: the key-value store
// "counts-<t>" (under k, and under "#total" for every record), the window store "windows-<t>"
// (under k, in the window of the record's timestamp) and the session store "sessions-<t>"
// (under k, in the session [timestamp, timestamp]); so that several processors of one
// application can run it, each with stores of its own. Then it emits k with the value "<kv>
// <window> <session>", the three new counts. Records with a null key are ignored. The record's
// value says what else to do:
//
//	fail        count and emit, then return an error
//	panic       count and emit, then panic
//	exit        count and emit, then exit with code 3
//	clear-fail  delete k and "#total" from counts and k's window and session, then fail
//	early-fail  fail before anything else
//	oom         count and emit, then allocate until the instance runs out of memory
//	hoard N     keep N MiB for good (in the instance), then count and emit as usual
//	anything    nothing else
//
// Built by the tests (poison_test.go) with:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o poison.wasm ./host/runtime/testdata/poison
package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/statehost/statehost/pluginsdk"
)

func init() {
	pluginsdk.Register(process)
}

var (
	total = []byte("#total")
	hoard [][]byte
)

func process(ctx pluginsdk.Context) error {
	rec := ctx.Record()
	if rec.Key == nil {
		return nil
	}
	cmd := string(rec.Value)
	if cmd == "early-fail" {
		return errors.New("poison before anything")
	}
	if n, ok := strings.CutPrefix(cmd, "hoard "); ok {
		mib, _ := strconv.Atoi(n)
		for range mib {
			hoard = append(hoard, make([]byte, 1<<20))
		}
	}
	counts := ctx.Store("counts-" + rec.Topic)
	windows := ctx.WindowStore("windows-" + rec.Topic)
	sessions := ctx.SessionStore("sessions-" + rec.Topic)
	ts := rec.Timestamp.UnixMilli()
	start := windows.WindowsFor(ts)[0]
	sess := pluginsdk.Session{Start: ts, End: ts}

	if cmd == "clear-fail" {
		if err := counts.Delete(rec.Key); err != nil {
			return err
		}
		if err := counts.Delete(total); err != nil {
			return err
		}
		if err := windows.Delete(rec.Key, start); err != nil {
			return err
		}
		if err := sessions.Remove(rec.Key, sess); err != nil {
			return err
		}
		return errors.New("poison after clearing")
	}

	kv, err := bump(func() ([]byte, bool, error) { return counts.Get(rec.Key) }, func(v []byte) error { return counts.Put(rec.Key, v) })
	if err != nil {
		return err
	}
	if _, err := bump(func() ([]byte, bool, error) { return counts.Get(total) }, func(v []byte) error { return counts.Put(total, v) }); err != nil {
		return err
	}
	win, err := bump(func() ([]byte, bool, error) { return windows.Get(rec.Key, start) }, func(v []byte) error {
		_, err := windows.Put(rec.Key, start, v)
		return err
	})
	if err != nil {
		return err
	}
	ses, err := bump(func() ([]byte, bool, error) { return sessions.Get(rec.Key, sess) }, func(v []byte) error {
		_, err := sessions.Put(rec.Key, sess, v)
		return err
	})
	if err != nil {
		return err
	}
	if err := ctx.Emit(rec.Key, fmt.Appendf(nil, "%d %d %d", kv, win, ses)); err != nil {
		return err
	}
	switch cmd {
	case "fail":
		return errors.New("poison on purpose")
	case "panic":
		panic("poison panic")
	case "exit":
		os.Exit(3)
	case "oom":
		for {
			hoard = append(hoard, make([]byte, 1<<20))
		}
	}
	return nil
}

// bump reads a decimal count with get (absent is 0), writes it plus one with put, and
// returns the new count.
func bump(get func() ([]byte, bool, error), put func([]byte) error) (uint64, error) {
	old, found, err := get()
	if err != nil {
		return 0, err
	}
	var n uint64
	if found {
		if n, err = strconv.ParseUint(string(old), 10, 64); err != nil {
			return 0, err
		}
	}
	n++
	return n, put(strconv.AppendUint(nil, n, 10))
}

func main() {}
