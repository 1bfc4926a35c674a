package testdriver

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/statehost/statehost/config"
	"github.com/statehost/statehost/pluginsdk/wasmbuild"
)

const moduleRoot = "../.."

// goGuests are the Go guests the tests build, by name: package directory from the module
// root.
var goGuests = map[string]string{
	"tokenize": "plugins/tokenize",
	"goprobe":  "host/engine/testdata/goprobe",
	"poison":   "host/runtime/testdata/poison",
}

var (
	guestDir   string
	guestMu    sync.Mutex
	guestBuilt = map[string]error{}
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "testdriver-test-")
	if err != nil {
		panic(err)
	}
	guestDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// guest returns the absolute path of the module of the guest name: a Go guest built once
// for the tests, or count_c, built with clang when it is installed and else its checked-in
// build.
func guest(t *testing.T, name string) string {
	t.Helper()
	if name == "count_c" && !wasmbuild.HaveClang() {
		abs, err := filepath.Abs(filepath.Join(moduleRoot, "plugins/count_c/testdata/count_c.wasm"))
		if err != nil {
			t.Fatal(err)
		}
		return abs
	}
	guestMu.Lock()
	defer guestMu.Unlock()
	out := filepath.Join(guestDir, name+".wasm")
	err, done := guestBuilt[name]
	if !done {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if name == "count_c" {
			err = wasmbuild.C(ctx, filepath.Join(moduleRoot, "plugins/count_c/count_c.c"), out, filepath.Join(moduleRoot, "abi"))
		} else {
			err = wasmbuild.Go(ctx, filepath.Join(moduleRoot, goGuests[name]), out)
		}
		guestBuilt[name] = err
	}
	if err != nil {
		t.Fatalf("building %s: %v", name, err)
	}
	return out
}

// loadConfig writes hcl into a temporary directory and loads it; a module "<name>.wasm" in
// hcl is the guest name's.
func loadConfig(t *testing.T, hcl string) *config.Config {
	t.Helper()
	for _, name := range append(slices.Collect(maps.Keys(goGuests)), "count_c") {
		if q := `"` + name + `.wasm"`; strings.Contains(hcl, q) {
			hcl = strings.ReplaceAll(hcl, q, strconv.Quote(guest(t, name)))
		}
	}
	path := filepath.Join(t.TempDir(), "app.hcl")
	if err := os.WriteFile(path, []byte("admin {\n  listen = \"\"\n}\n"+hcl), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := config.Load(path, config.Options{})
	if diags.HasErrors() {
		t.Fatalf("config: %v", diags)
	}
	return cfg
}

// start starts a driver on opts, closed with the test.
func start(t *testing.T, opts Options) *Driver {
	t.Helper()
	d, err := New(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return d
}

// pipe pipes the JSON lines of input into d, named "input"; it returns the first error.
func pipe(t *testing.T, d *Driver, input string) error {
	t.Helper()
	ins, err := ReadInputs(strings.NewReader(input), "input")
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range ins {
		if err := d.Pipe(t.Context(), in); err != nil {
			return err
		}
	}
	return nil
}

// lines returns the outputs and store entries of d as JSON lines.
func lines(t *testing.T, d *Driver) (outs, stores []string) {
	t.Helper()
	for _, o := range d.Outputs() {
		outs = append(outs, string(o.AppendJSON(nil)))
	}
	entries, err := d.Stores()
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		stores = append(stores, string(e.AppendJSON(nil)))
	}
	return outs, stores
}
