package runtime

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestMurmur2 checks the hash against the Java client's own test vectors (UtilsTest.testMurmur2).
func TestMurmur2(t *testing.T) {
	cases := map[string]int32{
		"21":                         -973932308,
		"foobar":                     -790332482,
		"a-little-bit-long-string":   -985981536,
		"a-little-bit-longer-string": -1486304829,
		"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
		"abc": 479470107,
	}
	for in, want := range cases {
		if got := murmur2([]byte(in)); got != want {
			t.Errorf("murmur2(%q) = %d, want %d", in, got, want)
		}
	}
}

// TestKeyPartitionMatchesFranzGo checks that keyed records land where franz-go's default
// partitioner (and so `statehost produce` and the Java client) puts them.
func TestKeyPartitionMatchesFranzGo(t *testing.T) {
	for _, n := range []int32{1, 3, 4, 8, 17} {
		tp := kgo.StickyKeyPartitioner(nil).ForTopic("t")
		for i := range 2000 {
			key := []byte(fmt.Sprintf("key-%d", i))
			want := int32(tp.Partition(&kgo.Record{Key: key}, int(n)))
			if got := KeyPartition(key, n, 0); got != want {
				t.Fatalf("n=%d key %q: got partition %d, franz-go %d", n, key, got, want)
			}
		}
	}
	if got := KeyPartition(nil, 4, 6); got != 2 {
		t.Errorf("null key: got %d, want the fallback 6 mod 4 = 2", got)
	}
}
