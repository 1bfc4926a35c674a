package pluginsdk

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestAppendWindowStarts(t *testing.T) {
	for _, c := range []struct {
		ts, size, advance int64
		want              []int64
	}{
		{0, 10, 10, []int64{0}},
		{9, 10, 10, []int64{0}},
		{10, 10, 10, []int64{10}},
		{-1, 10, 10, []int64{-10}},
		{-10, 10, 10, []int64{-10}},
		{-11, 10, 10, []int64{-20}},
		{0, 10, 5, []int64{-5, 0}},
		{7, 10, 5, []int64{0, 5}},
		{-5, 10, 5, []int64{-10, -5}},
		{12, 10, 3, []int64{3, 6, 9, 12}},
		{11, 10, 3, []int64{3, 6, 9}},
		{5, 10, 0, nil},
		{5, 0, 5, nil},
	} {
		if got := AppendWindowStarts(nil, c.ts, c.size, c.advance); !slices.Equal(got, c.want) {
			t.Errorf("AppendWindowStarts(%d, size %d, advance %d) = %v, want %v", c.ts, c.size, c.advance, got, c.want)
		}
	}
	// Against the definition: every multiple of advance s with s <= ts < s + size.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		size := 1 + rng.Int64N(50)
		advance := 1 + rng.Int64N(size)
		ts := rng.Int64N(400) - 200
		var want []int64
		for s := -300 * advance; s <= 300*advance; s += advance {
			if s <= ts && ts < s+size {
				want = append(want, s)
			}
		}
		if got := AppendWindowStarts(nil, ts, size, advance); !slices.Equal(got, want) {
			t.Fatalf("AppendWindowStarts(%d, size %d, advance %d) = %v, want %v", ts, size, advance, got, want)
		}
	}
	s := &WindowStore{}
	s.info.WindowSize, s.info.Advance = 60000, 10000
	s.WindowsFor(0)
	if n := testing.AllocsPerRun(100, func() { s.WindowsFor(123456) }); n != 0 {
		t.Errorf("WindowsFor allocates %v times", n)
	}
}
