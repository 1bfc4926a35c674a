package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/internal/kafkacluster"
)

// On Apache Kafka (STATEHOST_TEST_KAFKA=1) the tests read what statehost wrote twice: with
// franz-go, as everywhere, and with kcat (librdkafka), a client that shares no code with
// statehost's, so that a bug of franz-go's that statehost's writes and the tests' reads share
// (a transaction marker misread, a record skipped under read_committed) cannot hide. On kfake
// the second read is left out: kfake is itself written for franz-go, and the point is Kafka.

// kcatRecord is a record as kcat -J prints it.
type kcatRecord struct {
	Partition int32     `json:"partition"`
	Offset    int64     `json:"offset"`
	Headers   []*string `json:"headers"` // key, value, key, value, ...; a null value is nil
	Key       *string   `json:"key"`
	Payload   *string   `json:"payload"`
}

// kcatCheck reads topic with kcat from its start to its end (read_committed: its last stable
// offset) and reports as test errors where it differs from recs, what franz-go read of each
// partition below upTo: the same data records in the same order, at the same offsets, with
// the same keys, values and headers. It does nothing unless the tests run on Apache Kafka,
// where it needs kcat. The partitions' records must stay (no purge, no compaction) between
// the two reads.
func kcatCheck(t testing.TB, addr, topic string, readCommitted bool, recs map[int32][]*kgo.Record, upTo map[int32]int64) {
	t.Helper()
	if !kafkacluster.Requested() {
		return
	}
	got := kcatRead(t, addr, topic, readCommitted)
	what := fmt.Sprintf("%s (read_committed %v)", topic, readCommitted)
	checked := 0
	for p, end := range upTo {
		var want []*kgo.Record
		for _, r := range recs[p] {
			if r.Offset < end && !r.Attrs.IsControl() {
				want = append(want, r)
			}
		}
		var have []kcatRecord
		for _, r := range got[p] {
			if r.Offset < end {
				have = append(have, r)
			}
		}
		for i := range max(len(want), len(have)) {
			switch {
			case i >= len(have):
				t.Errorf("kcat: %s partition %d: kcat read %d records below offset %d, franz-go %d: the first that kcat lacks is at offset %d",
					what, p, len(have), end, len(want), want[i].Offset)
			case i >= len(want):
				t.Errorf("kcat: %s partition %d: kcat read %d records below offset %d, franz-go %d: the first that franz-go lacks is at offset %d",
					what, p, len(have), end, len(want), have[i].Offset)
			default:
				if d := kcatDiff(want[i], have[i]); d != "" {
					t.Errorf("kcat: %s partition %d, record %d: %s", what, p, i, d)
				} else {
					continue
				}
			}
			break // the first difference of a partition says enough
		}
		checked += len(want)
	}
	t.Logf("kcat: %s: %d records of %d partitions the same as franz-go's", what, checked, len(upTo))
}

// kcatDiff says how a differs from k, "" when they are the same record.
func kcatDiff(a *kgo.Record, k kcatRecord) string {
	if a.Offset != k.Offset {
		return fmt.Sprintf("at offset %d by franz-go, %d by kcat", a.Offset, k.Offset)
	}
	if fa, fk := kcatText(a.Key), k.Key; !kcatSame(fa, fk) {
		return fmt.Sprintf("offset %d: key %s by franz-go, %s by kcat", a.Offset, kcatShow(fa), kcatShow(fk))
	}
	if fa, fk := kcatText(a.Value), k.Payload; !kcatSame(fa, fk) {
		return fmt.Sprintf("offset %d: value %s by franz-go, %s by kcat", a.Offset, kcatShow(fa), kcatShow(fk))
	}
	var ha []*string
	for _, h := range a.Headers {
		k := h.Key
		ha = append(ha, &k, kcatText(h.Value))
	}
	if !slices.EqualFunc(ha, k.Headers, kcatSame) {
		return fmt.Sprintf("offset %d: headers %s by franz-go, %s by kcat", a.Offset, kcatShowAll(ha), kcatShowAll(k.Headers))
	}
	return ""
}

// kcatText is b as kcat -J prints it and encoding/json reads it back: nil for null, and
// invalid UTF-8 replaced.
func kcatText(b []byte) *string {
	if b == nil {
		return nil
	}
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	return &s
}

func kcatSame(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func kcatShow(s *string) string {
	if s == nil {
		return "null"
	}
	return fmt.Sprintf("%q", *s)
}

func kcatShowAll(ss []*string) string {
	var out []string
	for _, s := range ss {
		out = append(out, kcatShow(s))
	}
	return "[" + strings.Join(out, " ") + "]"
}

// kcatRead reads every partition of topic from its start to its end (read_committed: to its
// last stable offset) with kcat and returns its records by partition, in offset order.
func kcatRead(t testing.TB, addr, topic string, readCommitted bool) map[int32][]kcatRecord {
	t.Helper()
	bin, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatalf("kcat: the tests on Apache Kafka check what statehost wrote with kcat, which is not installed (apt-get install kcat): %v", err)
	}
	isolation := "read_uncommitted"
	if readCommitted {
		isolation = "read_committed"
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-C", "-b", addr, "-t", topic, "-o", "beginning", "-e", "-q", "-J",
		"-X", "isolation.level="+isolation)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kcat reading %s (%s): %v\n%s", topic, isolation, err, strings.TrimSpace(stderr.String()))
	}
	out := map[int32][]kcatRecord{}
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var r kcatRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("kcat reading %s: a line that is not a record (%v): %.200s", topic, err, sc.Bytes())
		}
		out[r.Partition] = append(out[r.Partition], r)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("kcat reading %s: %v", topic, err)
	}
	return out
}
