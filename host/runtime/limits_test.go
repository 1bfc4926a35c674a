package runtime

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/statehost/statehost/changelog"
	"github.com/statehost/statehost/host/engine"
	"github.com/statehost/statehost/internal/recordbatch"
)

// limitsHCL is count over words with two outputs, a logged and an unlogged store and a
// dead-letter topic.
const limitsHCL = `
application_id = "limits"
admin { listen = "" }
topic "words" {
  partitions = 1
}
processor "count" {
  module   = "{{count}}"
  inputs   = ["words"]
  outputs  = ["small", "plain"]
  on_error = "dead_letter"
  store "counts" {}
  store "scratch" {
    logging {
      enabled = false
    }
  }
}
`

// TestLearnLimits checks the limits the runtime learns from the broker: a topic's
// max.message.bytes when it is below the producer's batch bound (an output created with
// 5000), else the producer's 1 MiB bound less its 4 bytes (the default 1,048,588 is above it),
// for outputs, the changelog of the logged store (the unlogged one has none) and the
// dead-letter topic; and what each processor's tasks are given.
func TestLearnLimits(t *testing.T) {
	brokers := cluster(t)
	_, adm := client(t, brokers)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"max.message.bytes": kadm.StringPtr("5000")}, "small"); err != nil {
		t.Fatal(err)
	}
	cfg := loadConfig(t, t.TempDir(), limitsHCL)
	rt, err := New(ctx, Options{Config: cfg, Brokers: brokers, Logger: hclog.NewNullLogger(), NoWatch: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	batch := 1<<20 - batchLengthPrefix
	want := map[string]int{"small": 5000, "plain": batch, "limits-counts-changelog": batch, "limits-count-dlq": batch}
	for topic, n := range want {
		if got := rt.limits[topic]; got != n {
			t.Errorf("limit of %s: %d, want %d", topic, got, n)
		}
	}
	if len(rt.limits) != len(want) {
		t.Errorf("limits %v, want only %v", rt.limits, want)
	}
	p := rt.procs[0]
	if len(p.outputLimits) != 2 || p.outputLimits[0] != 5000 || p.outputLimits[1] != batch ||
		len(p.storeLimits) != 1 || p.storeLimits["counts"] != batch {
		t.Errorf("the processor's output limits %v and store limits %v", p.outputLimits, p.storeLimits)
	}
}

// TestLearnLimitsOfNewTopic: the broker asked does not know a topic yet (answered here, for the
// first three DescribeConfigs naming it, as a Kafka broker answers before the controller told
// it of a topic created a moment ago; kfake knows at once): learnLimits asks again and takes
// the topic's own max.message.bytes, not the broker's default. Before, it took the default,
// and a topic with a smaller limit refused records at the commit that the call had let in.
func TestLearnLimitsOfNewTopic(t *testing.T) {
	c, brokers := kfakeCluster(t)
	_, adm := client(t, brokers)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"max.message.bytes": kadm.StringPtr("5000")}, "small"); err != nil {
		t.Fatal(err)
	}
	var hidden atomic.Int32
	c.ControlKey(int16(kmsg.DescribeConfigs), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kreq.(*kmsg.DescribeConfigsRequest)
		names := false
		for _, rr := range req.Resources {
			names = names || (rr.ResourceType == kmsg.ConfigResourceTypeTopic && rr.ResourceName == "small")
		}
		if !names || hidden.Load() >= 3 {
			return nil, nil, false
		}
		hidden.Add(1)
		resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
		resp.Version = req.Version
		for _, rr := range req.Resources {
			res := kmsg.NewDescribeConfigsResponseResource()
			res.ResourceType, res.ResourceName = rr.ResourceType, rr.ResourceName
			res.ErrorCode = kerr.UnknownTopicOrPartition.Code
			resp.Resources = append(resp.Resources, res)
		}
		return resp, nil, true
	})
	cfg := loadConfig(t, t.TempDir(), limitsHCL)
	rt, err := New(ctx, Options{Config: cfg, Brokers: brokers, Logger: hclog.NewNullLogger(), NoWatch: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	if got := rt.limits["small"]; got != 5000 {
		t.Errorf("limit of small: %d, want its max.message.bytes 5000", got)
	}
	if n := hidden.Load(); n != 3 {
		t.Errorf("DescribeConfigs of small answered unknown %d times, want 3", n)
	}
}

// deadLetterBytes returns the record batch size of a dead letter.
func deadLetterBytes(out changelog.OutputRecord) int {
	hb := 0
	for _, h := range out.Headers {
		hb += recordbatch.Header(len(h.Key), len(h.Value))
	}
	return recordbatch.Size(len(out.Key), len(out.Value), len(out.Headers), hb)
}

// TestFitDeadLetter checks how a dead letter that would not fit its topic is cut: its value
// as far as needed (statehost.truncated: its length), then its own headers
// (statehost.dropped_headers: their number), then its key (statehost.truncated_key), then the
// error text; one whose value or key was cut fits its limit within the 2 bytes a shorter
// length can save, and one that fits is left alone.
func TestFitDeadLetter(t *testing.T) {
	letter := func(key, value, own int) changelog.OutputRecord {
		out := changelog.OutputRecord{Key: bytes.Repeat([]byte("k"), key), Value: bytes.Repeat([]byte("v"), value)}
		for range own {
			out.Headers = append(out.Headers, changelog.Header{Key: "own", Value: make([]byte, 100)})
		}
		out.Headers = append(out.Headers, changelog.Header{Key: HeaderError, Value: bytes.Repeat([]byte("e"), 500)},
			changelog.Header{Key: HeaderOffset, Value: []byte("7")})
		return out
	}
	header := func(out changelog.OutputRecord, key string) string {
		for _, h := range out.Headers {
			if h.Key == key {
				return string(h.Value)
			}
		}
		return "-"
	}
	const limit = 10000
	for _, c := range []struct {
		name                          string
		key, value, own               int
		truncated, dropped, keyCut    string
		wantKey, wantValue, errorText int // lengths after the cut; -1: not checked
	}{
		{name: "fits", key: 10, value: 5000, own: 2, truncated: "-", dropped: "-", keyCut: "-", wantKey: 10, wantValue: 5000, errorText: 500},
		{name: "value", key: 10, value: 50000, own: 2, truncated: "50000", dropped: "-", keyCut: "-", wantKey: 10, wantValue: -1, errorText: 500},
		{name: "headers", key: 9300, value: 50000, own: 5, truncated: "50000", dropped: "5", keyCut: "-", wantKey: 9300, wantValue: 0, errorText: 500},
		{name: "key", key: 50000, value: 50000, own: 1, truncated: "50000", dropped: "1", keyCut: "50000", wantKey: -1, wantValue: 0, errorText: 500},
	} {
		out := letter(c.key, c.value, c.own)
		fitDeadLetter(&out, c.own, limit)
		size := deadLetterBytes(out)
		if tight := c.name == "value" || c.name == "key"; size > limit || (tight && size < limit-2) {
			t.Errorf("%s: %d bytes, want at most %d (and at least %d when cut)", c.name, size, limit, limit-2)
		}
		if got := [3]string{header(out, HeaderTruncated), header(out, HeaderDroppedHeaders), header(out, HeaderKeyTruncated)}; got != [3]string{c.truncated, c.dropped, c.keyCut} {
			t.Errorf("%s: truncated, dropped, key headers %q, want %q", c.name, got, [3]string{c.truncated, c.dropped, c.keyCut})
		}
		if (c.wantKey >= 0 && len(out.Key) != c.wantKey) || (c.wantValue >= 0 && len(out.Value) != c.wantValue) ||
			len(header(out, HeaderError)) != c.errorText || header(out, HeaderOffset) != "7" {
			t.Errorf("%s: key %d, value %d, error %d bytes; want %d, %d, %d and the offset", c.name, len(out.Key), len(out.Value),
				len(header(out, HeaderError)), c.wantKey, c.wantValue, c.errorText)
		}
	}
	// A limit smaller than the headers: the error text goes too.
	out := letter(10, 10, 0)
	fitDeadLetter(&out, 0, 300)
	if size := deadLetterBytes(out); size > 300 || len(header(out, HeaderError)) >= 500 || header(out, HeaderTruncated) != strconv.Itoa(10) {
		t.Errorf("a limit below the headers: %d bytes, error text %d bytes", size, len(header(out, HeaderError)))
	}
}

// oversizedHCL runs testdata/poison (module %s) with on_error = "skip" over a topic that takes
// records of 4 MiB, with a coalescing key-value store.
const oversizedHCL = `
application_id  = "big"
commit_interval = "100ms"
admin { listen = "" }
topic "words" {
  partitions = 1
  config     = { "max.message.bytes" = "4194304" }
}
processor "p" {
  module   = "%s"
  inputs   = ["words"]
  outputs  = ["out"]
  on_error = "skip"
  store "counts-words" {
    coalesce = true
  }
  store "windows-words" {
    type        = "window"
    window_size = "1h"
  }
  store "sessions-words" {
    type           = "session"
    inactivity_gap = "1h"
  }
}
`

// TestOversizedWritesOfEveryStoreType runs the poison guest, which counts a record's key in a
// coalescing key-value store, then a window store, then a session store, on records whose
// keys fit the changelog (1,048,572 bytes a batch) of the first but not the second, of the
// first two but not the third (a window's changelog key has 8 bytes more, a session's 16),
// and not even the first: each write that would not fit is refused at the call, the record
// is skipped, and the commits go on. Before, the writes returned 0 and the commit failed.
func TestOversizedWritesOfEveryStoreType(t *testing.T) {
	base := t.TempDir()
	mod := buildPoison(t, base)
	brokers := cluster(t)
	cfg := loadConfig(t, base, fmt.Sprintf(oversizedHCL, mod))
	in := start(t, cfg, brokers, func(o *Options) { o.NoWatch = true })
	cl, _ := client(t, brokers, kgo.ProducerBatchMaxBytes(4<<20))
	key := func(n int) string { return strings.Repeat("k", n) }
	limit := 1<<20 - batchLengthPrefix
	// A key-value record of a key of n bytes and a one-byte count takes n+73 bytes.
	if recordbatch.Size(1048499, 1, 0, 0) != limit {
		t.Fatalf("the key sizes below assume a key-value record of a 1,048,499-byte key to take %d bytes", limit)
	}
	produceAt(t, cl, "words", time.Now().Truncate(time.Millisecond),
		poisonInput{"a", "x"},
		poisonInput{key(1048495), "x"}, // the window's changelog record does not fit
		poisonInput{"a", "x"},
		poisonInput{key(1048487), "x"}, // the session's does not
		poisonInput{"b", "x"},
		poisonInput{key(1048500), "x"}, // the key-value store's does not
		poisonInput{"b", "x"})
	waitHistories(t, brokers, "out", map[string][]string{"a": {"1 1 1", "2 2 2"}, "b": {"1 1 1", "2 2 2"}})
	waitFor(t, 30*time.Second, "the offsets committed to the end", func() bool { return committed(t, brokers, "big", "words")[0] == 7 })
	if got := counterValue(t, in.rt.metrics.skips.WithLabelValues("p", "error")); got != 3 {
		t.Errorf("statehost_records_skipped_total{processor=p,reason=error} = %v, want 3", got)
	}
	select {
	case err := <-in.done:
		in.done <- err
		t.Fatalf("the runtime stopped: %v", err)
	default:
	}
}

// TestPoisonReasonEmitBudget: a record whose emits passed its budget is a poison record,
// counted as emit_budget.
func TestPoisonReasonEmitBudget(t *testing.T) {
	ge := &engine.GuestError{Processor: "p", Topic: "in", Offset: 3, Kind: engine.ErrEmitBudget}
	if _, reason, ok := PoisonReason(ge); !ok || reason != "emit_budget" {
		t.Fatalf("PoisonReason = %q, %v; want emit_budget, true", reason, ok)
	}
}
