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
	"unicode"
	"unicode/utf8"

	"github.com/statehost/statehost/pluginsdk"
)

func init() {
	pluginsdk.Register(tokenize)
}

var one = []byte("1")

// tokenize allocates nothing: the words are sub-slices of the record's value, which the
// host copies when they are emitted.
func tokenize(ctx pluginsdk.Context) error {
	value := ctx.Record().Value
	for start, end := nextField(value, 0); start < end; start, end = nextField(value, end) {
		tok := value[start:end]
		if len(tok) > 1 && tok[0] == '-' {
			if err := ctx.Emit(tok[1:], nil); err != nil {
				return err
			}
			continue
		}
		if err := ctx.Emit(tok, one); err != nil {
			return err
		}
	}
	return nil
}

// nextField returns the bounds of the first field of b at or after index i, splitting as
// strings.Fields does: fields are separated by runs of characters for which unicode.IsSpace
// holds, and bytes that are not valid UTF-8 belong to fields (they decode as U+FFFD, which
// is not a space). start == end == len(b) when no field is left.
func nextField(b []byte, i int) (start, end int) {
	for i < len(b) {
		size := spaceAt(b, i)
		if size == 0 {
			break
		}
		i += size
	}
	start = i
	for i < len(b) && spaceAt(b, i) == 0 {
		if b[i] < utf8.RuneSelf {
			i++
		} else {
			_, size := utf8.DecodeRune(b[i:])
			i += size
		}
	}
	return start, i
}

// spaceAt returns the length of the space character at b[i], or 0 if there is none there.
func spaceAt(b []byte, i int) int {
	if c := b[i]; c < utf8.RuneSelf {
		if asciiSpace[c] {
			return 1
		}
		return 0
	}
	r, size := utf8.DecodeRune(b[i:])
	if unicode.IsSpace(r) {
		return size
	}
	return 0
}

// asciiSpace holds the ASCII characters for which unicode.IsSpace holds.
var asciiSpace = [utf8.RuneSelf]bool{'\t': true, '\n': true, '\v': true, '\f': true, '\r': true, ' ': true}

func main() {}
