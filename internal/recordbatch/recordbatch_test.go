package recordbatch

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// encoded returns the size of the record batch that kmsg encodes for one record with these
// key, value and header sizes (a length of -1 is null), as franz-go writes it.
func encoded(keyLen, valueLen int, headers [][2]int) int {
	bytesOf := func(n int) []byte {
		if n < 0 {
			return nil
		}
		return make([]byte, n)
	}
	rec := kmsg.NewRecord()
	rec.Key, rec.Value = bytesOf(keyLen), bytesOf(valueLen)
	for _, h := range headers {
		rec.Headers = append(rec.Headers, kmsg.Header{Key: string(make([]byte, h[0])), Value: bytesOf(h[1])})
	}
	rec.Length = int32(len(rec.AppendTo(nil)) - 1) // what follows the length field (0: one byte)
	body := rec.AppendTo(nil)
	b := kmsg.RecordBatch{Magic: 2, FirstTimestamp: time.Now().UnixMilli(), NumRecords: 1, Records: body}
	b.Length = int32(len(b.AppendTo(nil)) - 12)
	return len(b.AppendTo(nil))
}

func TestSizeMatchesTheEncoding(t *testing.T) {
	lens := []int{-1, 0, 1, 63, 64, 8191, 8192, 1048400, 1048500, 1048576}
	for _, k := range lens {
		for _, v := range lens {
			for _, hs := range [][][2]int{nil, {{4, -1}}, {{15, 20}, {1, 8192}}} {
				hb := 0
				for _, h := range hs {
					hb += Header(h[0], max(h[1], 0))
				}
				got, want := Size(max(k, 0), max(v, 0), len(hs), hb), encoded(k, v, hs)
				if got != want {
					t.Errorf("key %d, value %d, headers %v: Size %d, encoded %d", k, v, hs, got, want)
				}
			}
		}
	}
}
