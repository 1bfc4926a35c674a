package abi

import (
	"bytes"
	"os"
	"regexp"
	"strconv"
	"testing"
)

func TestRecordRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name       string
		key, value []byte
	}{
		{"null key and value", nil, nil},
		{"empty key and value", []byte{}, []byte{}},
		{"both set", []byte("k"), []byte("value")},
		{"null value", []byte("k"), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := RecordHeader{Offset: 1<<40 + 7, Timestamp: -5, Partition: 3, TopicLen: 5,
				KeyLen: LenOrNull(tc.key), ValueLen: LenOrNull(tc.value), HeaderCount: 2, HeadersSize: 30}
			b := make([]byte, h.Size())
			PutRecordHeader(b, h)
			n := RecordHeaderSize + copy(b[RecordHeaderSize:], "words")
			n += copy(b[n:], tc.key)
			copy(b[n:], tc.value)
			got, topic, key, value, ok := ReadRecord(b)
			if !ok || got != h || string(topic) != "words" {
				t.Fatalf("ReadRecord = %+v %q ok=%v, want %+v", got, topic, ok, h)
			}
			if (key == nil) != (tc.key == nil) || !bytes.Equal(key, tc.key) {
				t.Errorf("key = %#v, want %#v", key, tc.key)
			}
			if (value == nil) != (tc.value == nil) || !bytes.Equal(value, tc.value) {
				t.Errorf("value = %#v, want %#v", value, tc.value)
			}
			if _, _, _, _, ok := ReadRecord(b[:len(b)-1]); ok && h.Size() > RecordHeaderSize+5 {
				t.Errorf("ReadRecord accepted a truncated record")
			}
		})
	}
}

func TestEntries(t *testing.T) {
	var seq []byte
	seq = AppendEntry(seq, []byte("a"), []byte("1"))
	seq = AppendEntry(seq, []byte{}, nil)
	seq = AppendEntry(seq, []byte("c"), []byte{})
	if len(seq) != EntrySize(1, 1)+EntrySize(0, -1)+EntrySize(1, 0) {
		t.Fatalf("len = %d", len(seq))
	}
	type kv struct {
		k, v string
		null bool
	}
	var got []kv
	for rest := seq; len(rest) > 0; {
		k, v, r, ok := NextEntry(rest)
		if !ok {
			t.Fatalf("NextEntry failed at %d", len(seq)-len(rest))
		}
		got = append(got, kv{string(k), string(v), v == nil})
		rest = r
	}
	want := []kv{{"a", "1", false}, {"", "", true}, {"c", "", false}}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	// Malformed: truncated, negative key length, value length below null.
	bad := [][]byte{seq[:5], seq[:EntryHeaderSize], {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}, {0, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff}}
	for i, b := range bad {
		if _, _, _, ok := NextEntry(b); ok {
			t.Errorf("bad[%d] accepted", i)
		}
	}
}

// TestHeaderAgrees checks that statehost.h states the same numbers as this package.
func TestHeaderAgrees(t *testing.T) {
	src, err := os.ReadFile("statehost.h")
	if err != nil {
		t.Fatal(err)
	}
	defs := map[string]int64{}
	for _, m := range regexp.MustCompile(`(?m)^#define (SH_\w+|STATEHOST_ABI_VERSION) \(?(-?\d+)\)?`).FindAllSubmatch(src, -1) {
		v, _ := strconv.ParseInt(string(m[2]), 10, 64)
		defs[string(m[1])] = v
	}
	want := map[string]int64{
		"STATEHOST_ABI_VERSION": Version,
		"SH_OK":                 int64(CodeOK), "SH_NOT_FOUND": int64(CodeNotFound),
		"SH_BUFFER_TOO_SMALL": int64(CodeBufferTooSmall), "SH_OUT_OF_BOUNDS": int64(CodeOutOfBounds),
		"SH_BAD_ARGUMENT": int64(CodeBadArgument), "SH_UNKNOWN_STORE": int64(CodeUnknownStore),
		"SH_UNKNOWN_OUTPUT": int64(CodeUnknownOutput), "SH_BAD_HANDLE": int64(CodeBadHandle),
		"SH_NO_RECORD": int64(CodeNoRecord), "SH_STORE_FAILED": int64(CodeStoreFailed),
		"SH_EMIT_FAILED": int64(CodeEmitFailed), "SH_LIMIT": int64(CodeLimit),
		"SH_PROCESSOR_FAILED": int64(CodeProcessorFailed), "SH_NULL_LEN": int64(NullLen),
		"SH_LEVEL_TRACE": int64(LevelTrace), "SH_LEVEL_DEBUG": int64(LevelDebug),
		"SH_LEVEL_INFO": int64(LevelInfo), "SH_LEVEL_WARN": int64(LevelWarn), "SH_LEVEL_ERROR": int64(LevelError),
		"SH_MAX_NAME_LEN": MaxNameLen, "SH_MAX_OPEN_ITERATORS": MaxOpenIterators,
		"SH_MAX_LOG_LEN": MaxLogLen, "SH_MAX_ERROR_LEN": MaxErrorLen,
		"SH_MAX_EMIT_BYTES": MaxEmitBytes, "SH_MAX_EMIT_HEADERS": MaxEmitHeaders,
		"SH_RECORD_OFFSET_AT": RecordOffsetAt, "SH_RECORD_TIMESTAMP_AT": RecordTimestampAt,
		"SH_RECORD_PARTITION_AT": RecordPartitionAt, "SH_RECORD_TOPIC_LEN_AT": RecordTopicLenAt,
		"SH_RECORD_KEY_LEN_AT": RecordKeyLenAt, "SH_RECORD_VALUE_LEN_AT": RecordValueLenAt,
		"SH_RECORD_HEADER_COUNT_AT": RecordHeaderCountAt, "SH_RECORD_HEADERS_SIZE_AT": RecordHeadersSizeAt,
		"SH_RECORD_HEADER_SIZE": RecordHeaderSize, "SH_ENTRY_KEY_LEN_AT": EntryKeyLenAt,
		"SH_ENTRY_VALUE_LEN_AT": EntryValueLenAt, "SH_ENTRY_HEADER_SIZE": EntryHeaderSize,
		"SH_WRONG_STORE_TYPE": int64(CodeWrongStoreType), "SH_DROPPED": int64(CodeDropped),
		"SH_MAX_SCHEDULES": MaxSchedules, "SH_STORE_KEYVALUE": int64(StoreKeyValue),
		"SH_STORE_WINDOW": int64(StoreWindow), "SH_STORE_SESSION": int64(StoreSession),
		"SH_SCHEDULE_STREAM_TIME": int64(ScheduleStreamTime), "SH_SCHEDULE_WALL_CLOCK": int64(ScheduleWallClock),
		"SH_NO_TIME":               NoTime,
		"SH_WINDOW_ENTRY_START_AT": WindowEntryStartAt, "SH_WINDOW_ENTRY_END_AT": WindowEntryEndAt,
		"SH_WINDOW_ENTRY_KEY_LEN_AT": WindowEntryKeyLenAt, "SH_WINDOW_ENTRY_VALUE_LEN_AT": WindowEntryValueLenAt,
		"SH_WINDOW_ENTRY_HEADER_SIZE": WindowEntryHeaderSize,
		"SH_STORE_INFO_TYPE_AT":       StoreInfoTypeAt, "SH_STORE_INFO_WINDOW_SIZE_AT": StoreInfoWindowSizeAt,
		"SH_STORE_INFO_ADVANCE_AT": StoreInfoAdvanceAt, "SH_STORE_INFO_GRACE_AT": StoreInfoGraceAt,
		"SH_STORE_INFO_RETENTION_AT": StoreInfoRetentionAt, "SH_STORE_INFO_INACTIVITY_GAP_AT": StoreInfoInactivityGapAt,
		"SH_STORE_INFO_SIZE": StoreInfoSize,
	}
	for name, v := range want {
		got, ok := defs[name]
		if !ok {
			t.Errorf("statehost.h lacks %s", name)
		} else if got != v {
			t.Errorf("statehost.h: %s = %d, want %d", name, got, v)
		}
	}
	for name := range defs {
		if _, ok := want[name]; !ok {
			t.Errorf("statehost.h defines %s, which this test does not check", name)
		}
	}
	for name := range Signatures {
		if !bytes.Contains(src, []byte(`SH_IMPORT("`+name+`")`)) {
			t.Errorf("statehost.h does not declare %s", name)
		}
	}
	for _, code := range []int32{CodeNotFound, CodeProcessorFailed, CodeWrongStoreType, CodeDropped} {
		if CodeText(code) == "unknown code" {
			t.Errorf("CodeText(%d) unknown", code)
		}
	}
}

func TestWindowEntriesAndStoreInfo(t *testing.T) {
	b := make([]byte, WindowEntrySize(1, 2)+WindowEntrySize(0, 0))
	n := PutWindowEntry(b, -5, 10, []byte("k"), []byte("vv"))
	PutWindowEntry(b[n:], 1<<40, 1<<41, []byte{}, []byte{})
	e, rest, ok := NextWindowEntry(b)
	if !ok || e.Start != -5 || e.End != 10 || string(e.Key) != "k" || string(e.Value) != "vv" {
		t.Fatalf("first entry = %+v ok=%v", e, ok)
	}
	e, rest, ok = NextWindowEntry(rest)
	if !ok || e.Start != 1<<40 || e.End != 1<<41 || len(e.Key) != 0 || len(rest) != 0 {
		t.Fatalf("second entry = %+v ok=%v rest=%d", e, ok, len(rest))
	}
	if _, _, ok := NextWindowEntry(b[:n-1]); ok {
		t.Fatal("a truncated entry decoded")
	}
	in := StoreInfo{Type: StoreWindow, WindowSize: 60000, Advance: 30000, Grace: 5000, Retention: 120000, InactivityGap: 0}
	buf := make([]byte, StoreInfoSize)
	PutStoreInfo(buf, in)
	if got, ok := ReadStoreInfo(buf); !ok || got != in {
		t.Fatalf("ReadStoreInfo = %+v, want %+v", got, in)
	}
	// Closed: start + size + grace <= now; expired: start <= now - retention.
	if in.WindowClosed(0, 64999) || !in.WindowClosed(0, 65000) {
		t.Error("WindowClosed boundary")
	}
	if in.Expired(0, 119999) || !in.Expired(0, 120000) || in.Expired(0, NoTime) {
		t.Error("Expired boundary")
	}
	s := StoreInfo{Type: StoreSession, InactivityGap: 100, Grace: 10}
	if s.SessionClosed(0, 10) || !s.SessionClosed(0, 11) || s.SessionFinal(0, 110) || !s.SessionFinal(0, 111) {
		t.Error("session boundaries")
	}
	for _, name := range []string{"start_ms", "interval_ms"} {
		if !IsI64Param(name) {
			t.Errorf("IsI64Param(%q) = false", name)
		}
	}
	if IsI64Param("buf_cap") || IsI64Param("_ms") {
		t.Error("IsI64Param accepts an i32 name")
	}
}
