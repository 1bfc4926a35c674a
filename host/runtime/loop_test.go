package runtime

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestMergeByTimestamp checks the order in which a task with several inputs sees a poll's
// records: by timestamp across partitions, by offset within each.
func TestMergeByTimestamp(t *testing.T) {
	at := func(topic string, off int64, ts int64) *kgo.Record {
		return &kgo.Record{Topic: topic, Offset: off, Timestamp: time.UnixMilli(ts)}
	}
	a := []*kgo.Record{at("a", 0, 10), at("a", 1, 30), at("a", 2, 20)} // out-of-order timestamps stay in offset order
	b := []*kgo.Record{at("b", 0, 15), at("b", 1, 40)}
	var got []string
	for _, r := range mergeByTimestamp([][]*kgo.Record{a, b}) {
		got = append(got, fmt.Sprintf("%s%d", r.Topic, r.Offset))
	}
	if want := "a0 b0 a1 a2 b1"; strings.Join(got, " ") != want {
		t.Errorf("merged order %v, want %s", got, want)
	}
}
