package loopcheck

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

const export = "statehost.interrupt"

// instantiate compiles wasm in a fresh runtime and instantiates it without start functions.
func instantiate(t *testing.T, wasm []byte) api.Module {
	t.Helper()
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	t.Cleanup(func() { _ = rt.Close(ctx) })
	cm, err := rt.CompileModule(ctx, wasm)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	m, err := rt.InstantiateModule(ctx, cm, wazero.NewModuleConfig().WithStartFunctions())
	if err != nil {
		t.Fatalf("instantiate: %v", err)
	}
	return m
}

func call(t *testing.T, m api.Module, name string, args ...uint64) []uint64 {
	t.Helper()
	res, err := m.ExportedFunction(name).Call(context.Background(), args...)
	if err != nil {
		t.Fatalf("%s%v: %v", name, args, err)
	}
	return res
}

// TestFeatures instruments a module that uses SIMD, bulk memory, saturating truncation,
// sign extension, br_table and call_indirect (testdata/features.c): wazero must accept the
// result, every function must compute what it computes uninstrumented, and setting the
// global must stop a loop that never ends.
func TestFeatures(t *testing.T) {
	orig, err := os.ReadFile("testdata/features.wasm")
	if err != nil {
		t.Fatal(err)
	}
	res, err := Instrument(orig, export)
	if err != nil {
		t.Fatal(err)
	}
	if res.Loops < 7 || res.Calls == 0 || !res.Exits {
		t.Errorf("Loops = %d, Calls = %d, Exits = %v: want at least the 7 loops of features.c, some calls, exits", res.Loops, res.Calls, res.Exits)
	}
	plain, checked := instantiate(t, orig), instantiate(t, res.Wasm)
	for _, c := range []struct {
		fn   string
		args []uint64
	}{
		{"simd", []uint64{0}}, {"simd", []uint64{37}},
		{"bulk", []uint64{5}}, {"bulk", []uint64{200}},
		{"conv", []uint64{api.EncodeF32(-7.9), api.EncodeF64(1e30), 0x1ff}},
		{"dispatch", []uint64{0o7654321, 11}}, {"dispatch", []uint64{0, 5}},
		{"nested", []uint64{300}},
		{"fib", []uint64{20}},
	} {
		want, got := call(t, plain, c.fn, c.args...), call(t, checked, c.fn, c.args...)
		if want[0] != got[0] {
			t.Errorf("%s%v = %d instrumented, %d plain", c.fn, c.args, got[0], want[0])
		}
	}
	g, ok := checked.ExportedGlobal(export).(api.MutableGlobal)
	if !ok || g.Type() != api.ValueTypeI32 || g.Get() != 0 {
		t.Fatalf("exported global %q: %v (mutable: %v)", export, checked.ExportedGlobal(export), ok)
	}
	g.Set(0)
	stops(t, checked, g, "spin", 1)
	stops(t, checked, g, "fib", 200)
}

// stops calls fn, which does not return for ages, then runs a garbage collection, which
// stops the world and so needs the guest to leave its compiled code, then sets g and expects
// the call to trap soon.
func stops(t *testing.T, m api.Module, g api.MutableGlobal, fn string, arg uint64) {
	t.Helper()
	g.Set(0)
	done := make(chan error, 1)
	go func() {
		_, err := m.ExportedFunction(fn).Call(context.Background(), arg)
		done <- err
	}()
	select {
	case err := <-done:
		t.Fatalf("%s returned before the interrupt: %v", fn, err)
	case <-time.After(50 * time.Millisecond):
	}
	// Without the exits this deadlocks: the collection waits for the guest's goroutine,
	// and every other goroutine waits for the collection.
	runtime.GC()
	g.Set(1)
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "unreachable") {
			t.Fatalf("%s after the interrupt: %v, want the check's unreachable trap", fn, err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s still runs 10s after the interrupt", fn)
	}
}

// module assembles a binary from sections (id, body).
func module(secs ...[]byte) []byte {
	out := []byte("\x00asm\x01\x00\x00\x00")
	for _, s := range secs {
		out = append(out, s[0])
		out = appendU32(out, uint32(len(s)-1))
		out = append(out, s[1:]...)
	}
	return out
}

// TestAddsMissingSections: a module without globals and exports gets both sections, in
// their place (before the code section), with the global's index after the imported
// globals; custom sections stay where they were.
func TestAddsMissingSections(t *testing.T) {
	wasm := module(
		[]byte{1, 1, 0x60, 0, 0}, // type: () -> ()
		// import: one global "env"."g" i32 const, so the added global is index 1
		append([]byte{2, 1, 3}, append([]byte("env\x01g"), 0x03, 0x7f, 0x00)...),
		[]byte{3, 1, 0},                  // function 0 of type 0
		[]byte{0, 4, 'n', 'o', 't', 'e'}, // a custom section "note" (name length 4, no payload)
		// code: loop; br 0; end; end
		[]byte{10, 1, 7, 0, 0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b},
	)
	res, err := Instrument(wasm, export)
	if err != nil {
		t.Fatal(err)
	}
	if res.Stop != 1 || res.Loops != 1 || res.Calls != 0 || res.Exits {
		t.Fatalf("got %+v, want Stop 1, Loops 1, Calls 0 (the code starts with its loop), no exits (no memory)", res)
	}
	budget := appendS32([]byte{0x7f, 0x01, 0x41}, Budget)
	code := append(append([]byte{0, 0x03, 0x40}, appendCheck(nil, 1, false)...), 0x0c, 0x00, 0x0b, 0x0b)
	want := module(
		[]byte{1, 1, 0x60, 0, 0},
		append([]byte{2, 1, 3}, append([]byte("env\x01g"), 0x03, 0x7f, 0x00)...),
		[]byte{3, 1, 0},
		[]byte{0, 4, 'n', 'o', 't', 'e'},
		append(append([]byte{6, 2, 0x7f, 0x01, 0x41, 0x00, 0x0b}, budget...), 0x0b),
		append(append([]byte{7, 1, byte(len(export))}, export...), 0x03, 1),
		append([]byte{10, 1, byte(len(code))}, code...),
	)
	if !bytes.Equal(res.Wasm, want) {
		t.Fatalf("instrumented:\n% x\nwant:\n% x", res.Wasm, want)
	}
}

// TestRefuses: binaries the walker cannot walk, and a module that already exports the name.
func TestRefuses(t *testing.T) {
	good := module([]byte{1, 1, 0x60, 0, 0}, []byte{3, 1, 0}, []byte{10, 1, 4, 0, 0x01, 0x0b, 0x0b})
	if _, err := Instrument(good, export); err != nil {
		t.Fatalf("good module: %v", err)
	}
	for name, c := range map[string]struct {
		wasm []byte
		want string
	}{
		"magic":     {[]byte("\x00asn\x01\x00\x00\x00"), "bad magic"},
		"truncated": {good[:len(good)-2], "unexpected end"},
		"section":   {module([]byte{14, 0}), "unknown section id 14"},
		"opcode": {module([]byte{1, 1, 0x60, 0, 0}, []byte{3, 1, 0}, []byte{10, 1, 3, 0, 0xff, 0x0b}),
			"instruction 0xff at byte 1"},
		"fd": {module([]byte{1, 1, 0x60, 0, 0}, []byte{3, 1, 0}, []byte{10, 1, 5, 0, 0xfd, 0xff, 0x7f, 0x0b}),
			"unknown 0xfd instruction"},
		"trailing": {module([]byte{1, 1, 0x60, 0, 0}, []byte{3, 1, 0}, []byte{10, 1, 2, 0, 0x0b, 0x0b, 0x0b}),
			"bytes after the last function"},
		"reserved": {module(append(append([]byte{7, 1, byte(len(export))}, export...), 0x00, 0x00)), "already exports"},
	} {
		if _, err := Instrument(c.wasm, export); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", name, err, c.want)
		}
	}
}

// TestCheckedInModules instruments every module built in the repository (Go guests, C
// guests) and compiles the result: wazero validates what the walker wrote.
func TestCheckedInModules(t *testing.T) {
	var paths []string
	for _, pattern := range []string{"../../../../plugins/*/*.wasm", "../../testdata/c/*.wasm", "../../../runtime/testdata/*/*.wasm", "../../../../cmd/statehost/testdata/*.wasm"} {
		m, _ := filepath.Glob(pattern)
		paths = append(paths, m...)
	}
	if len(paths) < 5 {
		t.Fatalf("found only %d modules: %v", len(paths), paths)
	}
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	for _, p := range paths {
		wasm, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Instrument(wasm, export)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if res.Loops == 0 && strings.Contains(p, "plugins/") {
			t.Errorf("%s: no loops found", p)
		}
		cm, err := rt.CompileModule(ctx, res.Wasm)
		if err != nil {
			t.Errorf("%s: instrumented module refused: %v", p, err)
			continue
		}
		_ = cm.Close(ctx)
	}
}

// FuzzInstrument: any input either is refused or yields a binary that walks again with the
// same loops, one more global, and the name exported once.
func FuzzInstrument(f *testing.F) {
	for _, p := range []string{"testdata/features.wasm", "../../testdata/c/probe.wasm"} {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add(module([]byte{1, 1, 0x60, 0, 0}, []byte{3, 1, 0}, []byte{10, 1, 7, 0, 0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b}))
	f.Fuzz(func(t *testing.T, wasm []byte) {
		res, err := Instrument(wasm, export)
		if err != nil {
			return
		}
		again, err := Instrument(res.Wasm, "other")
		if err != nil {
			t.Fatalf("the instrumented binary does not walk: %v", err)
		}
		// The second pass checks the first pass's checks too: each adds one if, no loop.
		if again.Loops != res.Loops || again.Calls != res.Calls || again.Stop != res.Stop+2 {
			t.Fatalf("again: %+v; first: %+v", again, res)
		}
		if _, err := Instrument(res.Wasm, export); err == nil || !strings.Contains(err.Error(), "already exports") {
			t.Fatalf("instrumenting twice with the same name: %v", err)
		}
	})
}
