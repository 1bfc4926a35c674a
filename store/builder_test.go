package store

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// trace is the Metrics hook and the changelog of a store under test: it records, in one
// sequence, what the metered layer observes and what the logging layer logs, so that a test
// sees which layers a store has and in which order they run. The metered layer observes an
// operation when the layers below it return, so a write that reaches the changelog at once
// shows "logged" before "metered".
type trace struct {
	kind    Kind // decodes the changelog keys of window and session stores
	events  []string
	sawTime bool // an observation had a duration
}

func (tr *trace) Observe(store string, op Op, took time.Duration, err error) {
	e := fmt.Sprintf("metered %s %s", store, op)
	if err != nil {
		e += " failed"
	}
	tr.sawTime = tr.sawTime || took != 0
	tr.events = append(tr.events, e)
}

func (tr *trace) LogPut(key, value []byte) error {
	tr.events = append(tr.events, "logged "+tr.key(key)+"="+string(value))
	return nil
}

func (tr *trace) LogDelete(key []byte) error {
	tr.events = append(tr.events, "logged "+tr.key(key)+" deleted")
	return nil
}

// key renders a changelog key: the key, then @start for a window, @start-end for a session.
func (tr *trace) key(ck []byte) string {
	if tr.kind == KeyValue {
		return string(ck)
	}
	k, t1, t2, err := ParseChangelogKey(tr.kind, ck)
	if err != nil {
		return fmt.Sprintf("malformed %x", ck)
	}
	if tr.kind == Session {
		return fmt.Sprintf("%s@%d-%d", k, t2, t1)
	}
	return fmt.Sprintf("%s@%d", k, t1)
}

// expect fails t unless the layers saw want since the last expect.
func (tr *trace) expect(t *testing.T, what string, want ...string) {
	t.Helper()
	got := tr.events
	tr.events = nil
	if !slices.Equal(got, want) {
		t.Fatalf("%s: the layers saw %q, want %q", what, got, want)
	}
}

// untimedTrace is a trace that does not use durations.
type untimedTrace struct{ *trace }

func (untimedTrace) Untimed() {}

// must returns v once t has checked err: must(task.Open(name, o))(t).
func must[T any](v T, err error) func(t *testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func drain(t *testing.T, it interface {
	Next() bool
	Err() error
	Close() error
}) {
	t.Helper()
	for it.Next() {
	}
	if err := errors.Join(it.Err(), it.Close()); err != nil {
		t.Fatal(err)
	}
}

// TestPlanLayers checks the builder's decisions: each layer only when the options ask for
// it, the same for every kind, and coalescing for key-value stores only.
func TestPlanLayers(t *testing.T) {
	tr := &trace{}
	for _, k := range []Kind{KeyValue, Window, Session} {
		for _, o := range []Options{{}, {Metrics: tr}, {Changelog: tr}, {Metrics: tr, Changelog: tr}, {Coalesce: true, Changelog: tr}} {
			plan, err := planLayers(k, o)
			if o.Coalesce && k != KeyValue {
				if err == nil || !strings.Contains(err.Error(), "cannot coalesce") {
					t.Errorf("%s store, coalescing: err = %v, want a refusal", k, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s store %+v: %v", k, o, err)
			}
			if (plan.metrics != nil) != (o.Metrics != nil) || plan.coalesce != o.Coalesce || (plan.log != nil) != (o.Changelog != nil) {
				t.Errorf("%s store %+v: plan %+v", k, o, plan)
			}
		}
	}
}

// TestBuilderKeyValueStack checks the stack of a key-value store: every operation metered,
// every write logged after the inner store took it, and a refused write metered as failed
// and not logged; with coalescing, writes logged only at the flush, once per key.
func TestBuilderKeyValueStack(t *testing.T) {
	eachBackend(t, func(t *testing.T, m *Manager, b Backend) {
		task := must(m.OpenTask("kv", 0))(t)
		defer task.Close()
		tr := &trace{kind: KeyValue}
		s := must(task.Open("s", Options{Backend: b, Metrics: tr, Changelog: tr}))(t)
		mustPut(t, s, "a", "1")
		tr.expect(t, "put", "logged a=1", "metered s put")
		if v, ok := mustGet(t, s, "a"); !ok || v != "1" {
			t.Fatalf("Get(a) = %q %v, want 1 from the inner store", v, ok)
		}
		tr.expect(t, "get", "metered s get")
		if err := s.Delete([]byte("a")); err != nil {
			t.Fatal(err)
		}
		tr.expect(t, "delete", "logged a deleted", "metered s delete")
		drain(t, must(s.Range(nil, nil))(t))
		tr.expect(t, "range", "metered s range")
		drain(t, must(s.Prefix([]byte("a")))(t))
		tr.expect(t, "prefix", "metered s prefix")

		c := must(task.Open("c", Options{Backend: b, Coalesce: true, Metrics: tr, Changelog: tr}))(t)
		mustPut(t, c, "k", "1")
		mustPut(t, c, "k", "2")
		tr.expect(t, "coalesced puts", "metered c put", "metered c put")
		if v, ok := mustGet(t, c, "k"); !ok || v != "2" {
			t.Fatalf("Get(k) = %q %v, want 2 from the coalescing layer", v, ok)
		}
		tr.expect(t, "coalesced get", "metered c get")
		if err := task.Flush(); err != nil {
			t.Fatal(err)
		}
		tr.expect(t, "flush", "logged k=2")

		task.Fail(errors.New("test failure"))
		if err := s.Put([]byte("b"), []byte("1")); !errors.Is(err, ErrTaskFailed) {
			t.Fatalf("Put on a failed task: %v, want ErrTaskFailed", err)
		}
		tr.expect(t, "put on a failed task", "metered s put failed")
	})
}

// testSpecs are the specs of the window and session stores of the builder's tests: windows
// of 10 ms, sessions with a gap of 10 ms, no grace.
var testSpecs = map[Kind]WindowSpec{Window: {Size: 10}, Session: {Gap: 10}}

// windowedFace is a window or session store seen through one shape: start and end are a
// session's (a window's end is ignored), and the fetches are Fetch and FetchAll, or Find and
// FindAll.
type windowedFace struct {
	put      func(key string, start, end int64, value []byte) (bool, error)
	get      func(key string, start, end int64) ([]byte, bool, error)
	fetch    func(key string) (WindowIterator, error)
	fetchAll func() (WindowIterator, error)
}

// openWindowedFace opens the window or session store name of kind k with o.
func openWindowedFace(t *testing.T, task *Task, k Kind, name string, o Options) windowedFace {
	t.Helper()
	o.Kind = k
	if k == Window {
		w := must(task.OpenWindow(name, o))(t)
		if task.WindowStore(name) != w {
			t.Fatal("Task.WindowStore does not return the stack OpenWindow returned")
		}
		return windowedFace{
			put: func(key string, start, _ int64, v []byte) (bool, error) { return w.Put([]byte(key), start, v) },
			get: func(key string, start, _ int64) ([]byte, bool, error) { return w.Get([]byte(key), start) },
			fetch: func(key string) (WindowIterator, error) {
				return w.Fetch([]byte(key), math.MinInt64, math.MaxInt64)
			},
			fetchAll: func() (WindowIterator, error) { return w.FetchAll(math.MinInt64, math.MaxInt64) },
		}
	}
	must(task.OpenSession(name, o))(t)
	s := task.SessionStore(name) // the same stack, through its other entry point
	return windowedFace{
		put: func(key string, start, end int64, v []byte) (bool, error) { return s.Put([]byte(key), start, end, v) },
		get: func(key string, start, end int64) ([]byte, bool, error) { return s.Get([]byte(key), start, end) },
		fetch: func(key string) (WindowIterator, error) {
			return s.Find([]byte(key), math.MinInt64, math.MaxInt64)
		},
		fetchAll: func() (WindowIterator, error) { return s.FindAll(math.MinInt64, math.MaxInt64) },
	}
}

// TestBuilderWindowedStacks checks the stacks of window and session stores: every operation
// metered, every stored write logged under its changelog key after the inner store took it,
// and a dropped (late) or refused write metered and not logged. A session whose start is
// after its end is refused by the SessionStore face, above the layers.
func TestBuilderWindowedStacks(t *testing.T) {
	for _, k := range []Kind{Window, Session} {
		t.Run(k.String(), func(t *testing.T) {
			eachBackend(t, func(t *testing.T, m *Manager, b Backend) {
				task := must(m.OpenTask("w", 0))(t)
				defer task.Close()
				tr := &trace{kind: k}
				s := openWindowedFace(t, task, k, "w", Options{Backend: b, Metrics: tr, Changelog: tr, Window: testSpecs[k]})
				at := func(start, end int64) string {
					if k == Window {
						return fmt.Sprintf("@%d", start)
					}
					return fmt.Sprintf("@%d-%d", start, end)
				}

				if _, err := s.put("a", 10, 15, []byte("v")); err != nil {
					t.Fatal(err)
				}
				tr.expect(t, "put", "logged a"+at(10, 15)+"=v", "metered w put")
				if v, ok, err := s.get("a", 10, 15); err != nil || !ok || string(v) != "v" {
					t.Fatalf("get(a, 10, 15) = %q %v %v, want v from the inner store", v, ok, err)
				}
				tr.expect(t, "get", "metered w get")
				drain(t, must(s.fetch("a"))(t))
				tr.expect(t, "fetch", "metered w range")
				drain(t, must(s.fetchAll())(t))
				tr.expect(t, "fetch all", "metered w range")
				if _, err := s.put("a", 10, 15, nil); err != nil {
					t.Fatal(err)
				}
				tr.expect(t, "delete", "logged a"+at(10, 15)+" deleted", "metered w delete")
				if k == Session {
					if _, err := s.put("a", 9, 5, []byte("v")); !errors.Is(err, ErrBadWindow) {
						t.Fatalf("put of [9, 5]: %v, want ErrBadWindow", err)
					}
					tr.expect(t, "put of a bad session")
				}

				task.ObserveTime(50) // the window [10, 20) and the session [10, 15] are closed
				if stored, err := s.put("a", 10, 15, []byte("late")); err != nil || stored {
					t.Fatalf("late put = %v %v, want dropped", stored, err)
				}
				tr.expect(t, "late put", "metered w put")
				if late, _, _ := task.DroppedWrites(); late != 1 {
					t.Fatalf("%d late writes counted, want 1", late)
				}
				if _, err := s.put("a", 45, 50, []byte("w")); err != nil {
					t.Fatal(err)
				}
				tr.expect(t, "live put", "logged a"+at(45, 50)+"=w", "metered w put")

				task.Fail(errors.New("test failure"))
				if _, err := s.put("a", 45, 50, []byte("x")); !errors.Is(err, ErrTaskFailed) {
					t.Fatalf("put on a failed task: %v, want ErrTaskFailed", err)
				}
				tr.expect(t, "put on a failed task", "metered w put failed")
			})
		})
	}
}

// TestBuilderLayersWhenAsked checks that every kind of store gets each layer only when its
// options ask for it, and that a window or session store asked to coalesce is refused before
// anything is opened.
func TestBuilderLayersWhenAsked(t *testing.T) {
	eachBackend(t, func(t *testing.T, m *Manager, b Backend) {
		task := must(m.OpenTask("p", 0))(t)
		defer task.Close()
		n := 0
		for _, k := range []Kind{KeyValue, Window, Session} {
			for _, metered := range []bool{false, true} {
				for _, logged := range []bool{false, true} {
					tr := &trace{kind: k}
					o := Options{Backend: b, Kind: k, Window: testSpecs[k]}
					if metered {
						o.Metrics = tr
					}
					if logged {
						o.Changelog = tr
					}
					n++
					name := fmt.Sprintf("s%d", n)
					var want []string
					if logged {
						want = append(want, "logged k"+map[Kind]string{KeyValue: "", Window: "@1", Session: "@1-1"}[k]+"=v")
					}
					if metered {
						want = append(want, "metered "+name+" put")
					}
					var err error
					switch k {
					case KeyValue:
						err = must(task.Open(name, o))(t).Put([]byte("k"), []byte("v"))
					case Window:
						_, err = must(task.OpenWindow(name, o))(t).Put([]byte("k"), 1, []byte("v"))
					case Session:
						_, err = must(task.OpenSession(name, o))(t).Put([]byte("k"), 1, 1, []byte("v"))
					}
					if err != nil {
						t.Fatal(err)
					}
					tr.expect(t, fmt.Sprintf("%s store, metered %v, logged %v", k, metered, logged), want...)
				}
			}
		}

		for _, k := range []Kind{Window, Session} {
			o := Options{Backend: b, Kind: k, Coalesce: true, Window: testSpecs[k]}
			var err error
			if k == Window {
				_, err = task.OpenWindow("c", o)
			} else {
				_, err = task.OpenSession("c", o)
			}
			if err == nil || !strings.Contains(err.Error(), "cannot coalesce") {
				t.Fatalf("a coalescing %s store: %v, want a refusal", k, err)
			}
			if task.Partition("c") != nil {
				t.Fatalf("the refused %s store was opened", k)
			}
		}
	})
}

// TestBuilderWindowMeterUntimed checks that the metered layer of window and session stores
// reads no clock for a Metrics hook that does not use durations, as key-value stores'.
func TestBuilderWindowMeterUntimed(t *testing.T) {
	m := openManager(t, t.TempDir())
	defer m.Close()
	task := must(m.OpenTask("p", 0))(t)
	defer task.Close()
	tr := &trace{kind: Window}
	w := must(task.OpenWindow("w", Options{Kind: Window, Metrics: untimedTrace{tr}, Window: testSpecs[Window]}))(t)
	mustWPut(t, w, "a", 1, "v")
	if _, _, err := w.Get([]byte("a"), 1); err != nil {
		t.Fatal(err)
	}
	drain(t, must(w.FetchAll(0, 10))(t))
	tr.expect(t, "untimed", "metered w put", "metered w get", "metered w range")
	if tr.sawTime {
		t.Fatal("an untimed hook was given durations")
	}
}
