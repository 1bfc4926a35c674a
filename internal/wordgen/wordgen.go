// Package wordgen generates deterministic sentences and their reference word counts, for the
// word-count tests and benchmarks.
package wordgen

import (
	"strconv"
	"strings"
)

var vocabulary = []string{"kafka", "stream", "state", "wasm", "pebble", "go", "store", "log", "topic", "plugin", "count", "word"}

// Sentences returns n sentences of 3 to 7 words (a small vocabulary, one word in seven taken
// from a tail of 600 rarer ones), the same for the same seed, and the count of each word.
func Sentences(n, seed int) ([]string, map[string]int) {
	ref := map[string]int{}
	out := make([]string, n)
	x := uint32(seed*7919 + 1)
	for i := range out {
		var b strings.Builder
		for j := 0; j < 3+i%5; j++ {
			x = x*1664525 + 1013904223
			w := vocabulary[x>>16%uint32(len(vocabulary))]
			if x%7 == 0 {
				w += strconv.Itoa(int(x>>8) % 50)
			}
			if j > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(w)
			ref[w]++
		}
		out[i] = b.String()
	}
	return out, ref
}

// Strings returns counts as decimal strings, as the count plugin emits them.
func Strings(counts map[string]int) map[string]string {
	out := make(map[string]string, len(counts))
	for k, v := range counts {
		out[k] = strconv.Itoa(v)
	}
	return out
}
