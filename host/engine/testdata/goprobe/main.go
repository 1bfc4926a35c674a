// Command goprobe is a Go guest for the engine's tests: each record's value is a command.
//
// Built by the engine's TestMain with:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o goprobe.wasm ./host/engine/testdata/goprobe
package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/statehost/statehost/pluginsdk"
)

func init() {
	pluginsdk.Register(process, pluginsdk.WithPunctuation(pluginsdk.WallClockPunctuation, 50*time.Millisecond, tick))
}

// tick counts the wall-clock punctuations in the key "n" of the store "ticks", when the
// processor has that store, and emits each count under the key "tick".
func tick(ctx pluginsdk.PunctuationContext) error {
	s := ctx.Store("ticks")
	v, _, err := s.Get([]byte("n"))
	if errors.Is(err, pluginsdk.ErrUnknownStore) {
		return nil
	}
	if err != nil {
		return err
	}
	n, _ := strconv.Atoi(string(v))
	next := []byte(strconv.Itoa(n + 1))
	if err := s.Put([]byte("n"), next); err != nil {
		return err
	}
	return ctx.Emit([]byte("tick"), next)
}

var (
	hoard [][]byte
	sink  int
	key   = []byte("key")
	value = []byte("value")
)

func process(ctx pluginsdk.Context) error {
	cmd := string(ctx.Record().Value)
	verb, arg, _ := strings.Cut(cmd, " ")
	n, _ := strconv.Atoi(arg)
	switch verb {
	case "panic":
		panic("boom on purpose")
	case "noisypanic":
		// n lines on stderr, then a panic: its message is not in the first KiB of stderr.
		for i := range n {
			fmt.Fprintf(os.Stderr, "goprobe noise line %d\n", i)
		}
		panic("boom after the noise")
	case "loop":
		for {
			sink++
		}
	case "hoardpanic":
		// Keeps n MiB, then panics: a panic near the memory limit is still a panic.
		for range n {
			hoard = append(hoard, make([]byte, 1<<20))
		}
		panic("boom near the limit")
	case "oom":
		for {
			hoard = append(hoard, make([]byte, 1<<20))
		}
	case "exit":
		os.Exit(3)
	case "fail":
		return errors.New("failed on purpose")
	case "log":
		ctx.Log(pluginsdk.Info, "hello from goprobe")
	case "get":
		s := ctx.Store("s")
		for i := 0; i < n; i++ {
			v, _, err := s.Get(key)
			if err != nil {
				return err
			}
			sink += len(v)
		}
	case "put":
		s := ctx.Store("s")
		for i := 0; i < n; i++ {
			if err := s.Put(key, value); err != nil {
				return err
			}
		}
	case "big":
		// A value larger than every SDK buffer: exercises grow-and-retry both ways.
		s := ctx.Store("s")
		big := []byte(strings.Repeat("x", n))
		if err := s.Put(key, big); err != nil {
			return err
		}
		v, _, err := s.Get(key)
		if err != nil {
			return err
		}
		return ctx.Emit(key, []byte(strconv.Itoa(len(v))))
	case "headers":
		hs, err := ctx.Headers()
		if err != nil {
			return err
		}
		return ctx.Send(pluginsdk.Message{Key: []byte("headers"), Value: []byte(strconv.Itoa(len(hs))), Headers: hs})
	case "to":
		return ctx.EmitTo(arg, []byte("to"), []byte(arg))
	}
	return nil
}

func main() {}
