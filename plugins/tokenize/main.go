// Command tokenize is the first half of the word-count demo: it splits each input value
// into words and emits one record per word to its first output topic.
//
// For each token w of strings.Fields(value) it emits key w with value "1"; a token "-w"
// (a dash and at least one more character) emits key w with a null value, a tombstone that
// makes count forget w. It keeps no state.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o tokenize.wasm .
// (or go run ./plugins/build from the repository root).
package main

import (
	"strings"

	"github.com/statehost/statehost/pluginsdk"
)

func init() {
	pluginsdk.Register(tokenize)
}

var one = []byte("1")

// word is a reusable buffer for the key of the emitted record (the host copies it).
var word []byte

func tokenize(ctx pluginsdk.Context) error {
	for _, tok := range strings.Fields(string(ctx.Record().Value)) {
		if len(tok) > 1 && tok[0] == '-' {
			word = append(word[:0], tok[1:]...)
			if err := ctx.Emit(word, nil); err != nil {
				return err
			}
			continue
		}
		word = append(word[:0], tok...)
		if err := ctx.Emit(word, one); err != nil {
			return err
		}
	}
	return nil
}

func main() {}
