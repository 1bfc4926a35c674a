//go:build !wasip1

package pluginsdk

import (
	"encoding/binary"
	"strconv"
	"testing"
	"time"

	"github.com/statehost/statehost/abi"
	"github.com/statehost/statehost/pluginsdk/internal/hostcall"
)

// fixedHost is a host without allocations: every store is the one described by info, a
// session search finds one session, a window get finds "41", puts succeed, and the stream
// time is 100.
type fixedHost struct {
	noHost
	info    abi.StoreInfo
	pending bool // the open iterator has its entry left
}

func (h *fixedHost) StoreOpen([]byte) int32 { return 0 }
func (h *fixedHost) StoreInfo(_ int32, buf []byte) int32 {
	abi.PutStoreInfo(buf, h.info)
	return abi.StoreInfoSize
}
func (h *fixedHost) StreamTime(out []byte) int32 {
	binary.LittleEndian.PutUint64(out, 100)
	return 0
}
func (h *fixedHost) WindowGet(_ int32, _ []byte, _ int64, buf []byte) int32 {
	return int32(copy(buf, "41"))
}
func (h *fixedHost) WindowPut(int32, []byte, int64, []byte) int32 { return 0 }
func (h *fixedHost) SessionPut(int32, []byte, int64, int64, []byte) int32 {
	return 0
}
func (h *fixedHost) SessionFind(int32, []byte, int64, int64) int32 {
	h.pending = true
	return 0
}
func (h *fixedHost) IterNext(_ int32, buf []byte) int32 {
	if !h.pending {
		return 0
	}
	h.pending = false
	return int32(abi.PutWindowEntry(buf, 90, 95, []byte("user"), []byte("12")))
}
func (h *fixedHost) IterClose(int32) int32 { return 0 }

// TestNoAllocations checks that the per-record operations of window and session stores
// allocate nothing once their buffers have grown.
func TestNoAllocations(t *testing.T) {
	h := &fixedHost{}
	hostcall.Current = h
	defer func() { hostcall.Current = nil; g = instance{} }()
	g = instance{}
	var ctx stateCtx
	key := []byte("user")

	h.info = abi.StoreInfo{Type: abi.StoreWindow, WindowSize: 60, Advance: 20, Retention: 1000}
	ws := ctx.WindowStore("w")
	if err := ws.Err(); err != nil {
		t.Fatal(err)
	}
	var num []byte
	windows := func() {
		for _, start := range ctx.WindowStore("w").WindowsFor(95) {
			v, _, err := ws.Get(key, start)
			if err != nil {
				t.Fatal(err)
			}
			n, _ := strconv.ParseUint(string(v), 10, 64)
			num = strconv.AppendUint(num[:0], n+1, 10)
			if _, err := ws.Put(key, start, num); err != nil {
				t.Fatal(err)
			}
		}
	}
	windows()
	if n := testing.AllocsPerRun(100, windows); n != 0 {
		t.Errorf("window counting allocates %v times per record", n)
	}

	h.info = abi.StoreInfo{Type: abi.StoreSession, InactivityGap: 10, Retention: 1000}
	ss := ctx.SessionStore("s")
	if err := ss.Err(); err != nil {
		t.Fatal(err)
	}
	one := []byte("1")
	add := func(acc, v []byte) ([]byte, error) {
		a, _ := strconv.ParseUint(string(acc), 10, 64)
		b, _ := strconv.ParseUint(string(v), 10, 64)
		return strconv.AppendUint(acc[:0], a+b, 10), nil
	}
	merge := func() {
		s, v, stored, err := ctx.SessionStore("s").Merge(key, 100, one, add)
		if err != nil || !stored || s != (Session{Start: 90, End: 100}) || string(v) != "13" {
			t.Fatalf("Merge = %v %q %v %v", s, v, stored, err)
		}
	}
	merge()
	if n := testing.AllocsPerRun(100, merge); n != 0 {
		t.Errorf("Merge allocates %v times per record", n)
	}
}

// errHost records set_error.
type errHost struct {
	noHost
	msg string
}

func (h *errHost) SetError(msg string) int32 { h.msg = msg; return 0 }

// TestPunctuateUnknownID checks that a punctuation the guest did not schedule fails the call.
func TestPunctuateUnknownID(t *testing.T) {
	h := &errHost{}
	hostcall.Current = h
	defer func() { hostcall.Current = nil; g = instance{} }()
	g = instance{punctuators: []punctuator{{id: 3, fn: func(PunctuationContext) error { return nil }}}}
	if code := punctuate(3, 10); code != abi.CodeOK {
		t.Errorf("punctuate(3) = %d", code)
	}
	if code := punctuate(4, 10); code != abi.CodeProcessorFailed || h.msg != "pluginsdk: punctuate: no punctuation scheduled with id 4" {
		t.Errorf("punctuate(4) = %d, error %q", code, h.msg)
	}
}

func TestWithPunctuationPanics(t *testing.T) {
	fn := func(PunctuationContext) error { return nil }
	for name, opt := range map[string]Option{
		"interval below 1ms": WithPunctuation(StreamTimePunctuation, time.Microsecond, fn),
		"unknown type":       WithPunctuation(PunctuationType(7), time.Second, fn),
		"nil function":       WithPunctuation(WallClockPunctuation, time.Second, nil),
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			opt(&registration{})
		}()
	}
	r := &registration{}
	WithPunctuation(WallClockPunctuation, 1500*time.Microsecond, fn)(r)
	if len(r.punctuations) != 1 || r.punctuations[0].interval.Milliseconds() != 1 {
		t.Errorf("registration = %+v", r)
	}
}
