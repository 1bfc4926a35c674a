package statehost_test

// The direction of imports is part of the architecture (docs: ../shared/design/architecture.md
// at the time of writing; summarised in README.md). This test enforces it, so a shortcut that
// makes a lower layer reach up, or leaks a third-party type into a package that must not know
// it, fails here rather than in review.

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/statehost/statehost"

// rule forbids the packages under dir (non-test files) to import anything that matches one of
// the prefixes in forbid.
type rule struct {
	dir    string
	forbid []string
	why    string
}

var rules = []rule{
	{dir: "abi", forbid: []string{module + "/", "github.com/", "golang.org/"},
		why: "abi is the guest-host contract: it imports nothing of ours and no third party"},
	{dir: "pluginsdk", forbid: []string{module + "/host", module + "/store", module + "/changelog", module + "/restore", module + "/cmd", "github.com/tetratelabs/"},
		why: "guests reach state only through the ABI"},
	{dir: "plugins", forbid: []string{module + "/host", module + "/store", module + "/changelog", module + "/restore", module + "/cmd", "github.com/tetratelabs/"},
		why: "guests reach state only through the ABI"},
	{dir: "store", forbid: []string{"github.com/twmb/", module + "/host", module + "/changelog", module + "/restore", module + "/abi", module + "/cmd"},
		why: "store knows nothing of Kafka and never reaches up"},
	{dir: "changelog", forbid: []string{module + "/host", module + "/restore", module + "/abi", module + "/pluginsdk", module + "/cmd", "github.com/tetratelabs/"},
		why: "changelog sits below restore and host"},
	{dir: "restore", forbid: []string{module + "/host", module + "/abi", module + "/pluginsdk", module + "/cmd", "github.com/tetratelabs/"},
		why: "restore never imports the host"},
	{dir: "config", forbid: []string{module + "/", "github.com/twmb/", "github.com/cockroachdb/", "github.com/tetratelabs/"},
		why: "config only decodes and checks the HCL file; what needs the broker or the engine is checked by their owners"},
	{dir: "host", forbid: []string{module + "/cmd", module + "/pluginsdk", module + "/plugins"},
		why: "the host serves guests, it does not link them"},
}

// eachImport calls fn with every import of every non-test Go file under dir, skipping
// testdata, hidden folders and the folders named in skip.
func eachImport(t *testing.T, dir string, skip []string, fn func(path, imp string)) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != dir && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") || slices.Contains(skip, d.Name())) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			fn(path, p)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walking %s: %v", dir, err)
	}
}

func TestImportDirections(t *testing.T) {
	for _, r := range rules {
		if _, err := os.Stat(r.dir); os.IsNotExist(err) {
			continue
		}
		eachImport(t, r.dir, nil, func(path, p string) {
			for _, bad := range r.forbid {
				if strings.HasPrefix(p, bad) || p == strings.TrimSuffix(bad, "/") {
					t.Errorf("%s imports %s: %s", path, p, r.why)
				}
			}
		})
	}
}

// TestThirdPartyContainment keeps each engine's types inside the packages that own them: wazero
// in host, Pebble in store, the Kafka client in changelog, restore, host and cmd; and chromedp,
// which drives the console's browser tests, out of every non-test file (out of the binary).
func TestThirdPartyContainment(t *testing.T) {
	owners := map[string][]string{
		"github.com/tetratelabs/wazero":     {"host"},
		"github.com/cockroachdb/pebble":     {"store"},
		"github.com/twmb/franz-go/pkg/kgo":  {"changelog", "restore", "host", "cmd", "internal"},
		"github.com/twmb/franz-go/pkg/kadm": {"changelog", "restore", "host", "cmd", "internal"},
		"github.com/chromedp/":              {}, // tests only
	}
	eachImport(t, ".", []string{"bench"}, func(path, p string) {
		top := strings.SplitN(filepath.ToSlash(path), "/", 2)[0]
		for lib, allowed := range owners {
			if strings.HasPrefix(p, lib) && !slices.Contains(allowed, top) {
				t.Errorf("%s imports %s, which only %v may use", path, p, allowed)
			}
		}
	})
}
