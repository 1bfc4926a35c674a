package wordgen

import (
	"maps"
	"strings"
	"testing"
)

func TestSentences(t *testing.T) {
	a, ref := Sentences(500, 3)
	b, _ := Sentences(500, 3)
	if !slicesEqual(a, b) {
		t.Fatal("the same seed gave other sentences")
	}
	if c, _ := Sentences(500, 4); slicesEqual(a, c) {
		t.Fatal("another seed gave the same sentences")
	}
	counted := map[string]int{}
	for _, s := range a {
		n := len(strings.Fields(s))
		if n < 3 || n > 7 {
			t.Fatalf("sentence %q has %d words", s, n)
		}
		for _, w := range strings.Fields(s) {
			counted[w]++
		}
	}
	if !maps.Equal(counted, ref) {
		t.Error("the reference count differs from the words of the sentences")
	}
}

func slicesEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
