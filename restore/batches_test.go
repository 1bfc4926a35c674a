package restore

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/statehost/statehost/store"
)

// fetchRaw fetches partition 0 of topic from offset at, read_uncommitted, and returns the
// partition of the response.
func fetchRaw(t testing.TB, e *env, topic string, at int64) *kmsg.FetchResponseTopicPartition {
	t.Helper()
	md, err := e.adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	d := md.Topics[topic]
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis = 0
	req.MaxBytes = 16 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, d.ID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes = at, 8<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, e.cl.Broker(int(d.Partitions[0].Leader)))
	if err != nil {
		t.Fatal(err)
	}
	if p := findFetched(resp, rt, 0); p != nil && p.ErrorCode == 0 {
		return p
	}
	t.Fatalf("fetch of %s: %+v", topic, resp)
	return nil
}

// TestDecodeBatchesMatchesKgo produces records of every kind a changelog holds (values,
// empty values, tombstones, headers, LogAppendTime's absence, transaction markers) in batches
// of every compression codec, and checks that decodeBatches reads from the fetched bytes the
// same writes as kgo's decoder, from every start offset, up to every end, and that batchSpan
// and decodeBatches end where kgo's decoder does.
func TestDecodeBatchesMatchesKgo(t *testing.T) {
	e := newEnv(t)
	codecs := map[string]kgo.CompressionCodec{"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression()}
	for name, codec := range codecs {
		t.Run(name, func(t *testing.T) {
			topic := "decode-" + name
			if _, err := e.adm.CreateTopic(ctx, 1, -1, nil, topic); err != nil {
				t.Fatal(err)
			}
			pcl := e.client(t, kgo.ProducerBatchCompression(codec), kgo.ProducerLinger(0))
			txn := e.client(t, kgo.ProducerBatchCompression(codec), kgo.TransactionalID("decode-"+topic), kgo.DefaultProduceTopic(topic))
			n := 0
			produce := func(cl *kgo.Client, count int) {
				for range count {
					r := &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "key%04d", n%37)}
					switch n % 5 {
					case 0:
						r.Value = nil // a tombstone
					case 1:
						r.Value = []byte{} // empty, not a delete
					case 2:
						r.Headers = []kgo.RecordHeader{{Key: "h", Value: []byte("v")}}
						r.Value = fmt.Appendf(nil, "value-%d", n)
					default:
						r.Value = []byte(strings.Repeat("x", n%300))
					}
					n++
					cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
						if err != nil {
							t.Error(err)
						}
					})
				}
				if err := cl.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
			for range 3 {
				produce(pcl, 40)
				if err := txn.BeginTransaction(); err != nil {
					t.Fatal(err)
				}
				produce(txn, 25)
				if err := txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
					t.Fatal(err)
				}
			}
			// Kafka writes a transaction's markers after EndTransaction returns.
			want := int64(n) + 3 // the records and three commit markers
			for c := timeout(t); ; {
				ends, err := e.adm.ListEndOffsets(c, topic)
				if err != nil {
					t.Fatal(err)
				}
				if o, _ := ends.Lookup(topic, 0); o.Offset >= want {
					break
				}
				select {
				case <-c.Done():
					t.Fatalf("the end offset of %s did not reach %d", topic, want)
				case <-time.After(20 * time.Millisecond):
				}
			}
			rp := fetchRaw(t, e, topic, 0)
			total, _ := batchSpan(rp.RecordBatches, 0)
			if total != want {
				t.Fatalf("batchSpan = %d, want %d", total, want)
			}
			for from := int64(0); from <= total; from += 7 {
				for _, end := range []int64{from + 1, from + 30, total} {
					fp, kgoNext := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{KeepControlRecords: true, Offset: from, Topic: topic}, rp, kgo.DefaultDecompressor(), nil)
					if fp.Err != nil {
						t.Fatal(fp.Err)
					}
					want, wantLast := appendRecords(nil, fp.Records, from, end)
					got, last, next, err := decodeBatches(nil, rp.RecordBatches, from, end, kgo.DefaultDecompressor())
					if err != nil {
						t.Fatalf("from %d to %d: %v", from, end, err)
					}
					if (len(got) > 0 || len(want) > 0) && !reflect.DeepEqual(got, want) || last != wantLast {
						t.Fatalf("from %d to %d: decoded %d writes (last %d), kgo %d (last %d)", from, end, len(got), last, len(want), wantLast)
					}
					if wantNext := min(max(kgoNext, from), end); next != wantNext {
						t.Fatalf("from %d to %d: next %d, kgo's %d", from, end, next, wantNext)
					}
				}
			}
			checkKinds(t, mustDecode(t, rp.RecordBatches))
		})
	}
}

func mustDecode(t *testing.T, data []byte) []store.Write {
	t.Helper()
	ws, _, _, err := decodeBatches(nil, data, 0, 1<<62, kgo.DefaultDecompressor())
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

// checkKinds checks that ws holds deletes, empty values and values, and no write of a
// transaction marker.
func checkKinds(t *testing.T, ws []store.Write) {
	t.Helper()
	var deletes, empty int
	for _, w := range ws {
		switch {
		case w.Delete && w.Value == nil:
			deletes++
		case w.Delete || w.Value == nil:
			t.Fatalf("write %+v: Delete and a nil value disagree", w)
		case len(w.Value) == 0:
			empty++
		}
		if w.Timestamp <= 0 {
			t.Fatalf("write at offset %d has timestamp %d", w.Offset, w.Timestamp)
		}
	}
	if deletes == 0 || empty == 0 || len(ws) != 195 {
		t.Fatalf("%d writes, %d deletes, %d empty values", len(ws), deletes, empty)
	}
}

// TestDecodeBatchesBadInput checks that a batch cut short by the response's size limit is
// left for the next fetch, and that a corrupt batch is an error that names its offset.
func TestDecodeBatchesBadInput(t *testing.T) {
	e := newEnv(t)
	topic := changelog0(t, e)
	rp := fetchRaw(t, e, topic, 0)
	data := rp.RecordBatches
	first := 12 + int(binary.BigEndian.Uint32(data[batchLengthAt:]))
	if first >= len(data) {
		t.Fatalf("one batch only (%d bytes)", len(data))
	}
	firstEnd, _ := batchSpan(data[:first], 0)

	// Cut inside the second batch: the first is read, the position stops after it.
	cut := data[:first+20]
	if got, _ := batchSpan(cut, 0); got != firstEnd {
		t.Fatalf("batchSpan of a cut response = %d, want %d", got, firstEnd)
	}
	ws, last, next, err := decodeBatches(nil, cut, 0, 1<<62, kgo.DefaultDecompressor())
	if err != nil || next != firstEnd || last != firstEnd-1 || int64(len(ws)) != firstEnd {
		t.Fatalf("cut response: %d writes, last %d, next %d, %v; want %d writes up to %d", len(ws), last, next, err, firstEnd, firstEnd)
	}

	// A flipped byte in the second batch's records.
	bad := append([]byte(nil), data...)
	bad[first+batchHeaderLength+3] ^= 0x40
	_, _, next, err = decodeBatches(nil, bad, 0, 1<<62, kgo.DefaultDecompressor())
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("offset %d", firstEnd)) || next != firstEnd {
		t.Fatalf("corrupt batch: next %d, err %v; want an error at offset %d", next, err, firstEnd)
	}

	// A corrupt record count, read before the CRC is checked to size the writes: it costs
	// no more room than a record for each 7 bytes it came with.
	bad = append(bad[:0], data...)
	binary.BigEndian.PutUint32(bad[first+batchCountAt:], math.MaxInt32)
	ws, _, _, err = decodeBatches(nil, bad, 0, 1<<62, kgo.DefaultDecompressor())
	if err == nil || cap(ws) > len(data)/minRecordBytes {
		t.Fatalf("corrupt record count: room for %d writes, err %v; want an error and room for at most %d", cap(ws), err, len(data)/minRecordBytes)
	}
}

// changelog0 writes 500 records in batches of 50 to partition 0 of the kv changelog and
// returns its name.
func changelog0(t *testing.T, e *env) string {
	t.Helper()
	topic := "changelog-raw"
	if _, err := e.adm.CreateTopic(ctx, 1, -1, nil, topic); err != nil {
		t.Fatal(err)
	}
	e.produce(t, topic, 0, 0, 500, 50)
	return topic
}

// TestLoadRequestsAfterLargeBatch checks that once one partition of a changelog fetched a
// batch larger than a load asks of a partition, the next fetch asks every partition of that
// changelog for as much, so that they are read beside each other: Kafka returns nothing of
// such a batch to a partition that is not the first of its fetch, which would otherwise be
// read only after the ones before it (TestColdRestoreOfLargeBatches has such batches).
func TestLoadRequestsAfterLargeBatch(t *testing.T) {
	r := &Restorer{loadPartBytes: loadPartitionBytes, loadMaxBytes: loadFetchBytes}
	var loading []*target
	for _, tp := range []struct {
		topic string
		part  int32
	}{{"a-changelog", 0}, {"a-changelog", 1}, {"a-changelog", 2}, {"b-changelog", 0}} {
		tg := &target{loadEnd: 100, loading: true}
		tg.ls.Topic, tg.ls.Partition = tp.topic, tp.part
		loading = append(loading, tg)
	}
	raiseBatchBytes(loading, "a-changelog", 900<<10)
	limits := map[string]int32{}
	for _, req := range r.loadRequests(loading) {
		for _, rt := range req.Topics {
			for _, rp := range rt.Partitions {
				limits[fmt.Sprintf("%s/%d", rt.Topic, rp.Partition)] = rp.PartitionMaxBytes
			}
		}
	}
	want := map[string]int32{"a-changelog/0": 900 << 10, "a-changelog/1": 900 << 10, "a-changelog/2": 900 << 10, "b-changelog/0": loadPartitionBytes}
	if !reflect.DeepEqual(limits, want) {
		t.Fatalf("the fetch asks %v, want %v", limits, want)
	}
}

// BenchmarkDecodeBatches decodes a fetch of 20,000 records (keys and values of 9 bytes, in
// uncompressed batches of 500) into writes, as a load's appliers do, reusing the slice job
// after job.
//
//	go test -run '^$' -bench DecodeBatches ./restore/
func BenchmarkDecodeBatches(b *testing.B) {
	e := newEnv(b)
	topic := "decode-bench"
	if _, err := e.adm.CreateTopic(ctx, 1, -1, nil, topic); err != nil {
		b.Fatal(err)
	}
	const records = 20_000
	e.cl = e.client(b, kgo.ProducerBatchCompression(kgo.NoCompression())) // as statehost's changelogs by default
	e.produce(b, topic, 0, 0, records, 500)
	rp := fetchRaw(b, e, topic, 0)
	var ws []store.Write
	b.ResetTimer()
	for range b.N {
		var err error
		if ws, _, _, err = decodeBatches(ws[:0], rp.RecordBatches, 0, records, kgo.DefaultDecompressor()); err != nil || len(ws) != records {
			b.Fatalf("%d writes, %v", len(ws), err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*records), "ns/record")
}
