package main

import "testing"

// TestWords checks that the workloads draw from keys distinct words, the same for the same
// seed, and that the reference counts add up to the records.
func TestWords(t *testing.T) {
	const keys = 1000000
	seen := make(map[string]struct{}, keys)
	for i := range keys {
		w := word(i)
		if _, dup := seen[w]; dup {
			t.Fatalf("word(%d) = %q repeats an earlier word", i, w)
		}
		seen[w] = struct{}{}
	}
	for _, zipf := range []bool{true, false} {
		a := &workload{zipf: zipf, keys: keys, n: 200000}
		b := &workload{zipf: zipf, keys: keys, n: 200000}
		x, y := a.draw(7), b.draw(7)
		sum, distinct := 0, 0
		for i, k := range x {
			if y[i] != k {
				t.Fatalf("zipf=%v: draw %d differs between two runs with the same seed", zipf, i)
			}
		}
		for _, c := range a.counts {
			sum += int(c)
			if c > 0 {
				distinct++
			}
		}
		if sum != a.n || distinct != a.distinct {
			t.Fatalf("zipf=%v: counts add up to %d records and %d words, want %d and %d", zipf, sum, distinct, a.n, a.distinct)
		}
		// Zipf(1.1) puts far more weight on the first words than a uniform draw does.
		top := a.counts[0] + a.counts[1] + a.counts[2]
		if zipf && top < int32(a.n/10) || !zipf && top > 10 {
			t.Fatalf("zipf=%v: the 3 first words have %d of %d records", zipf, top, a.n)
		}
	}
}

// TestDecodeQuixChangelog decodes a record of quix-streams' changelog as bench/quix/README.md
// shows one, and refuses a key of another store.
func TestDecodeQuixChangelog(t *testing.T) {
	c := contender{kind: "quix"}
	w, n, err := c.decodeChangelog([]byte("wee4798d|count"), []byte("4"))
	if err != nil || string(w) != "wee4798d" || string(n) != "4" {
		t.Fatalf("decoded %q %q %v, want wee4798d 4", w, n, err)
	}
	if _, _, err := c.decodeChangelog([]byte("wee4798d|other"), []byte("4")); err == nil {
		t.Fatal("a key of another state key decoded")
	}
	w, n, err = contender{kind: "kstreams"}.decodeChangelog([]byte("wee4798d"), []byte("4"))
	if err != nil || string(w) != "wee4798d" || string(n) != "4" {
		t.Fatalf("kstreams: decoded %q %q %v", w, n, err)
	}
}
