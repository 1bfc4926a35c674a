package main

import (
	"fmt"
	"slices"
	"testing"

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
