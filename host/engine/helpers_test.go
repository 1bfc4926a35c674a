package engine

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/statehost/statehost/abi"
	"github.com/statehost/statehost/pluginsdk/wasmbuild"
	"github.com/statehost/statehost/store"
)

var rewrite = flag.Bool("rewrite", false, "write C guests rebuilt from source back to testdata")

// Guests built for this test run, by name: the Go plugins, the Go probe and the C guests.
var (
	guestPaths = map[string]string{}
	cacheDir   string // compilation cache shared by the engines of this run
	builtC     bool   // the C guests were built from source (else the checked-in builds are used)
)

// goGuests are the Go guests TestMain builds, by name: package directory from the module root.
var goGuests = map[string]string{
	"tokenize":    "plugins/tokenize",
	"count":       "plugins/count",
	"countjson":   "plugins/countjson",
	"leaderboard": "plugins/leaderboard",
	"goprobe":     "host/engine/testdata/goprobe",
	"gopertask":   "host/engine/testdata/gopertask",
	"windowcount": "plugins/windowcount",
	"sessionize":  "plugins/sessionize",
}

// cGuests are the C guests: source and checked-in build, from the module root.
var cGuests = map[string][2]string{
	"count_c":   {"plugins/count_c/count_c.c", "plugins/count_c/testdata/count_c.wasm"},
	"probe":     {"host/engine/testdata/c/probe.c", "host/engine/testdata/c/probe.wasm"},
	"version2":  {"host/engine/testdata/c/version2.c", "host/engine/testdata/c/version2.wasm"},
	"noversion": {"host/engine/testdata/c/noversion.c", "host/engine/testdata/c/noversion.wasm"},
	"noexport":  {"host/engine/testdata/c/noexport.c", "host/engine/testdata/c/noexport.wasm"},
	"badimport": {"host/engine/testdata/c/badimport.c", "host/engine/testdata/c/badimport.wasm"},
	"badsig":    {"host/engine/testdata/c/badsig.c", "host/engine/testdata/c/badsig.wasm"},
	"ctorexit":  {"host/engine/testdata/c/ctorexit.c", "host/engine/testdata/c/ctorexit.wasm"},
	"initexit":  {"host/engine/testdata/c/initexit.c", "host/engine/testdata/c/initexit.wasm"},
	"ctorloop":  {"host/engine/testdata/c/ctorloop.c", "host/engine/testdata/c/ctorloop.wasm"},
	"initstate": {"host/engine/testdata/c/initstate.c", "host/engine/testdata/c/initstate.wasm"},
	"migrate":   {"host/engine/testdata/c/migrate.c", "host/engine/testdata/c/migrate.wasm"},
}

const moduleRoot = "../.."

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "engine-test-")
	if err != nil {
		panic(err)
	}
	code := 1
	if err := buildGuests(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
	} else {
		code = m.Run()
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildGuests builds the Go guests, and the C guests when clang is present, into dir.
func buildGuests(dir string) error {
	cacheDir = filepath.Join(dir, "wasm-cache")
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, len(goGuests))
	for name, pkg := range goGuests {
		out := filepath.Join(dir, name+".wasm")
		guestPaths[name] = out
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- wasmbuild.Go(ctx, filepath.Join(moduleRoot, pkg), out)
		}()
	}
	builtC = wasmbuild.HaveClang()
	for name, c := range cGuests {
		src, prebuilt := filepath.Join(moduleRoot, c[0]), filepath.Join(moduleRoot, c[1])
		if !builtC {
			guestPaths[name] = prebuilt
			continue
		}
		out := filepath.Join(dir, name+".wasm")
		if err := wasmbuild.C(ctx, src, out, filepath.Join(moduleRoot, "abi")); err != nil {
			return err
		}
		guestPaths[name] = out
		if *rewrite {
			b, _ := os.ReadFile(out)
			if err := os.WriteFile(prebuilt, b, 0o644); err != nil {
				return err
			}
		}
	}
	if !builtC {
		fmt.Fprintln(os.Stderr, "engine tests: clang for wasm32-wasi not found: using the checked-in C guest builds")
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return warmCache(ctx)
}

// warmCache compiles the Go guests into the shared compilation cache in parallel (about a
// second each), so that the tests, which run one after the other, find them there.
func warmCache(ctx context.Context) error {
	e, err := New(ctx, Config{CacheDir: cacheDir})
	if err != nil {
		return err
	}
	defer e.Close(ctx)
	var wg sync.WaitGroup
	errs := make(chan error, len(goGuests))
	for name := range goGuests {
		wg.Go(func() {
			_, err := e.CompileFile(ctx, guestPaths[name])
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// testEngine returns an engine with the shared compilation cache; cfg's zero settings get
// the defaults, and its logs go to the returned buffer.
func testEngine(t testing.TB, cfg Config) (*Engine, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	if cfg.CacheDir == "" {
		cfg.CacheDir = cacheDir
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.New(&hclog.LoggerOptions{Output: logs, Level: hclog.Trace})
	}
	e, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) })
	return e, logs
}

// compile compiles the guest built under name.
func compile(t testing.TB, e *Engine, name string) *Module {
	t.Helper()
	m, err := e.CompileFile(context.Background(), guestPaths[name])
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// rig is a task's surroundings: its stores (the real store package's memory backend, in a
// state directory of the test's own) and the records it emitted.
type rig struct {
	st      *store.Task
	stores  map[string]Store
	emitted *collector
}

func newRig(t testing.TB, stores ...string) *rig {
	t.Helper()
	m, err := store.Open(store.Settings{Dir: t.TempDir(), MemoryBytes: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	st, err := m.OpenTask("test", 0)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{st: st, stores: map[string]Store{}, emitted: &collector{}}
	for _, name := range stores {
		if r.stores[name], err = st.Open(name, store.Options{Backend: store.Memory}); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// task returns a Task for processor on partition 0 with the rig's stores and outputs.
func (r *rig) task(processor string, outputs ...string) Task {
	return Task{Processor: processor, Stores: r.stores, Outputs: outputs, Emitter: r.emitted}
}

// instantiate makes an instance of the guest name for task, closed at the end of the test.
func instantiate(t testing.TB, e *Engine, name string, task Task) *Instance {
	t.Helper()
	in, err := compile(t, e, name).Instantiate(context.Background(), task)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = in.Close(context.Background()) })
	return in
}

// recs makes records of topic "in" with the given values, key "k<i>", offsets from 100.
func recs(values ...string) []Record {
	out := make([]Record, len(values))
	for i, v := range values {
		out[i] = Record{Topic: "in", Offset: int64(100 + i), Timestamp: time.UnixMilli(1700000000000 + int64(i)),
			Key: fmt.Appendf(nil, "k%d", i), Value: []byte(v)}
	}
	return out
}

// kv makes a record with a key and a value; nil is null.
func kv(key, value []byte) Record { return Record{Topic: "in", Key: key, Value: value} }

// collector is an Emitter that keeps everything, or fails when err is set.
type collector struct {
	recs []OutputRecord
	err  error
}

func (c *collector) Emit(_ context.Context, r OutputRecord) error {
	if c.err != nil {
		return c.err
	}
	// Key and value are views of guest memory, valid only during Emit.
	r.Key, r.Value = bytes.Clone(r.Key), bytes.Clone(r.Value)
	c.recs = append(c.recs, r)
	return nil
}

// strings returns the emitted records as "topic:key=value", with null shown as <nil>.
func (c *collector) strings() []string {
	out := make([]string, len(c.recs))
	for i, r := range c.recs {
		out[i] = fmt.Sprintf("%s:%s=%s", r.Topic, show(r.Key), show(r.Value))
	}
	return out
}

// values returns the emitted records as key -> value (the last one wins), null as <nil>.
func (c *collector) values() map[string]string {
	m := map[string]string{}
	for _, r := range c.recs {
		m[string(r.Key)] = show(r.Value)
	}
	return m
}

func show(b []byte) string {
	if b == nil {
		return "<nil>"
	}
	return string(b)
}

// dump returns the committed and uncommitted contents of s as key -> value.
func dump(t testing.TB, s Store) map[string]string {
	t.Helper()
	it, err := s.Range(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	m := map[string]string{}
	for it.Next() {
		m[string(it.Key())] = string(it.Value())
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return m
}

// logBuffer is a goroutine-safe log sink.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// guestError asserts that err is a *GuestError of kind and returns it.
func guestError(t *testing.T, err error, kind error) *GuestError {
	t.Helper()
	var ge *GuestError
	if !errors.As(err, &ge) {
		t.Fatalf("error %v (%T) is not a *GuestError", err, err)
	}
	if !errors.Is(err, kind) {
		t.Fatalf("error %v: kind %v, want %v", err, ge.Kind, kind)
	}
	return ge
}

// checkCodes compares the results the probe reported (name -> decimal code) with want.
func checkCodes(t *testing.T, codes map[string]string, want map[string]int32) {
	t.Helper()
	for name, code := range want {
		if got, ok := codes[name]; !ok {
			t.Errorf("%s: not reported", name)
		} else if got != strconv.Itoa(int(code)) {
			t.Errorf("%s = %s, want %d (%s)", name, got, code, abi.CodeText(code))
		}
	}
	if len(codes) != len(want) {
		t.Errorf("probe reported %d results, want %d", len(codes), len(want))
	}
}
