package main

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/statehost/statehost/pluginsdk/sdktest"
)

func TestLeaderboard(t *testing.T) {
	d, err := sdktest.New(sdktest.Config{Stores: []string{"latest", "ranking"}, Outputs: []string{"board"}})
	if err != nil {
		t.Fatal(err)
	}
	err = d.Process(sdktest.KV("ann", "10"), sdktest.KV("bob", "30"), sdktest.KV("cy", "20"), sdktest.KV("dee", "20"),
		sdktest.KV("ann", "40"), sdktest.Tombstone("bob"), sdktest.KV("x", "notanumber"), sdktest.KV("cy", "bad"),
		sdktest.KV("dee", "?"), sdktest.KV("bob", "?"), sdktest.KV("", "?*"), sdktest.KV("c", "?*"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range d.Emitted() {
		v := "<nil>"
		if e.Value != nil {
			v = string(e.Value)
		}
		got = append(got, fmt.Sprintf("%s=%s", e.Key, v))
	}
	want := []string{
		"top3=ann=10", "top3=bob=30,ann=10", "top3=bob=30,cy=20,ann=10", "top3=bob=30,cy=20,dee=20",
		"top3=ann=40,bob=30,cy=20", "top3=ann=40,cy=20,dee=20",
		"dee=3/3", "bob=<nil>", "=ann=40,cy=20,dee=20", "c=cy=20",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("emitted\n%q\nwant\n%q", got, want)
	}
}

func TestRankKeyOrder(t *testing.T) {
	scores := []int64{math.MinInt64, -5, 0, 7, math.MaxInt64}
	for i := 1; i < len(scores); i++ {
		hi, lo := rankKey(scores[i], []byte("u")), rankKey(scores[i-1], []byte("u"))
		if string(hi) >= string(lo) {
			t.Errorf("score %d does not sort before %d", scores[i], scores[i-1])
		}
		if s, u := parseRankKey(hi); s != scores[i] || string(u) != "u" {
			t.Errorf("parseRankKey(rankKey(%d)) = %d, %q", scores[i], s, u)
		}
	}
}
