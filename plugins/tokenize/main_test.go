package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/statehost/statehost/pluginsdk"
	"github.com/statehost/statehost/pluginsdk/sdktest"
)

func TestTokenize(t *testing.T) {
	d, err := sdktest.New(sdktest.Config{Outputs: []string{"words", "other"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Process(sdktest.KV("line1", " the cat\tthe\n"), sdktest.KV("", "-cat - --x"), sdktest.Tombstone("gone"), sdktest.KV("e", "")); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range d.Emitted() {
		v := "<nil>"
		if e.Value != nil {
			v = string(e.Value)
		}
		got = append(got, fmt.Sprintf("%s:%s=%s", e.Topic, e.Key, v))
	}
	want := []string{"words:the=1", "words:cat=1", "words:the=1", "words:cat=<nil>", "words:-=1", "words:-x=<nil>"}
	if !slices.Equal(got, want) {
		t.Fatalf("emitted %q, want %q", got, want)
	}
}

// TestFieldsLikeStringsFields checks nextField against strings.Fields, which the contract
// names, on inputs with every kind of space, multi-byte spaces, invalid UTF-8 and dashes,
// and on random mixes of them.
func TestFieldsLikeStringsFields(t *testing.T) {
	inputs := []string{
		"", " ", "a", " a ", "the cat  the\that", "\t\n\v\f\r a\r\nb\v", "-", "--x", "- -a -", "-\u00a0x",
		"a\u00a0b", "a\u2003b\u3000c", "\u0085x\u0085", "\u2028\u2029", "\u200bzero-width is not a space",
		"\xff", "a\xffb c", "\xc2 \xc2\xa0", "\xe2\x80", "\xe2\x80\x83x", "x\xe2\x80 y", "-\u2003-", "\x00 \x1c\x1d\x1e\x1f",
		"  leading and trailing  ", "ünïcödé wörds", "\U0001F600 \U0001F600x",
	}
	rng := rand.New(rand.NewPCG(3, 4))
	pieces := []string{"a", "-", "--", " ", "\t", "\n", "\u00a0", "\u0085", "\u2003", "\u3000", "\xff", "\xc2", "\xe2\x80", "é", "\u200b"}
	for range 2000 {
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		inputs = append(inputs, b.String())
	}
	for _, in := range inputs {
		var got []string
		b := []byte(in)
		for start, end := nextField(b, 0); start < end; start, end = nextField(b, end) {
			got = append(got, in[start:end])
		}
		if want := strings.Fields(in); !slices.Equal(got, want) {
			t.Fatalf("fields of %q = %q, strings.Fields says %q", in, got, want)
		}
	}
}

// emitCounter is a Context that only counts emits, to measure tokenize's own allocations.
type emitCounter struct {
	pluginsdk.Context
	rec        pluginsdk.Record
	words, del int
}

func (c *emitCounter) Record() pluginsdk.Record { return c.rec }

func (c *emitCounter) Emit(key, value []byte) error {
	if value == nil {
		c.del++
	} else {
		c.words++
	}
	return nil
}

// TestTokenizeAllocs checks that tokenize allocates nothing per record.
func TestTokenizeAllocs(t *testing.T) {
	c := &emitCounter{rec: pluginsdk.Record{Value: []byte("the quick\u00a0brown -fox jumps\tover the lazy dog")}}
	if n := testing.AllocsPerRun(100, func() { _ = tokenize(c) }); n != 0 {
		t.Errorf("tokenize: %v allocations per record, want 0", n)
	}
	if c.words != 8*101 || c.del != 101 {
		t.Errorf("emitted %d words and %d tombstones in 101 runs", c.words, c.del)
	}
}
