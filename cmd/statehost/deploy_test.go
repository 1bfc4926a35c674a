package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/statehost/statehost/config"
	"github.com/statehost/statehost/host/runtime"
	"github.com/statehost/statehost/internal/wordgen"
)

// writeDeployConfig writes a configuration with the admin listener listen and one processor
// count, whose module is a placeholder file, into a temporary directory; it returns its path.
func writeDeployConfig(t *testing.T, listen string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "count.wasm"), []byte("\x00asm"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := fmt.Sprintf(`application_id = "app"
admin {
  listen = %q
}
processor "count" {
  module = "count.wasm"
  inputs = ["words"]
}
`, listen)
	path := filepath.Join(dir, "app.hcl")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDeployUsage(t *testing.T) {
	ctx := t.Context()
	cfg := writeDeployConfig(t, "")
	for _, tc := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"deploy"}, 2, "--processor is required"},
		{[]string{"deploy", "m.wasm"}, 2, "--processor is required"},
		{[]string{"deploy", "--processor", "count"}, 2, "want one FILE.wasm, got 0 arguments"},
		{[]string{"deploy", "a.wasm", "--processor", "count", "b.wasm"}, 2, "want one FILE.wasm, got 2 arguments"},
		{[]string{"deploy", "--bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"deploy", "-h"}, 0, "Usage: statehost deploy [--config FILE] --processor NAME [--partitions LIST] FILE.wasm | --promote"},
		{[]string{"deploy", "--processor", "count", "--promote", "m.wasm"}, 2, "--promote takes no FILE.wasm and no --partitions"},
		{[]string{"rollback"}, 2, "--processor is required"},
		{[]string{"rollback", "--processor", "count", "x"}, 2, `unexpected argument "x"`},
		{[]string{"rollback", "--config", cfg, "--processor", "count"}, 1,
			"the config has no admin listener (admin { listen = ... }): statehost rollback needs one"},
		{[]string{"deploy", "--config", filepath.Join(t.TempDir(), "none.hcl"), "--processor", "count", "m.wasm"}, 1, "none.hcl"},
		{[]string{"deploy", "--config", cfg, "--processor", "count", "m.wasm"}, 1,
			"the config has no admin listener (admin { listen = ... }): statehost deploy needs one"},
	} {
		r := runCLI(ctx, "", tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.stderr) || r.stdout != "" {
			t.Errorf("statehost %q: got %v\nwant exit %d, no stdout, stderr with %q", tc.args, r, tc.code, tc.stderr)
		}
	}
	if r := runCLI(ctx, "", "help"); !strings.Contains(r.stdout, "statehost deploy [--config FILE] --processor NAME [--partitions LIST] FILE.wasm") {
		t.Errorf("usage lacks deploy:\n%s", r.stdout)
	}
}

func TestDeployAdminAddr(t *testing.T) {
	for listen, want := range map[string]string{
		":9464":          "127.0.0.1:9464",
		"0.0.0.0:9464":   "127.0.0.1:9464",
		"[::]:9464":      "127.0.0.1:9464",
		"127.0.0.1:9464": "127.0.0.1:9464",
		"10.1.2.3:80":    "10.1.2.3:80",
		"admin.lan:9464": "admin.lan:9464",
		"[::1]:9464":     "[::1]:9464",
	} {
		if got, err := adminAddr(listen); got != want || err != nil {
			t.Errorf("adminAddr(%q) = %q, %v; want %q", listen, got, err, want)
		}
	}
}

// TestDeployAgainstServer runs deploy against a fake admin API: the request it sends, and
// what it prints for a switch, an unchanged module and a refusal.
func TestDeployAgainstServer(t *testing.T) {
	// The admin listener is on every interface, which needs a token (the fake server and
	// the app process take it from the environment, as the CLI does).
	t.Setenv(config.AdminTokenEnv, "t")
	const v1, v2 = "9f8e7d6c5b4a3f2e1d0c9b8a7f6e5d4c3b2a1f0e9d8c7b6a5f4e3d2c1b0a9f8e", "1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b"
	var answer struct {
		code int
		body any
	}
	var gotPath, gotBody string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		gotPath, gotBody = req.Method+" "+req.URL.EscapedPath(), string(b)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(answer.code)
		_ = json.NewEncoder(w).Encode(answer.body)
	}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	cfg := writeDeployConfig(t, "0.0.0.0:"+port) // reached on 127.0.0.1
	mod := filepath.Join(t.TempDir(), "count v2.wasm")
	if err := os.WriteFile(mod, []byte("the module"), 0o644); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name   string
		code   int
		body   any
		exit   int
		stdout string
		stderr string
	}{
		{"count", 200, runtime.DeployResult{Processor: "count", Version: runtime.ModuleVersion{Hash: v2}, Previous: runtime.ModuleVersion{Hash: v1}, Tasks: 3},
			0, "processor count: switched 3 tasks to 1a2b3c4d5e6f (was 9f8e7d6c5b4a)\n", ""},
		{"count", 200, runtime.DeployResult{Processor: "count", Version: runtime.ModuleVersion{Hash: v2}, Previous: runtime.ModuleVersion{Hash: v1}, Tasks: 1},
			0, "processor count: switched 1 task to 1a2b3c4d5e6f (was 9f8e7d6c5b4a)\n", ""},
		{"count", 200, runtime.DeployResult{Processor: "count", Version: runtime.ModuleVersion{Hash: v1}, Previous: runtime.ModuleVersion{Hash: v1}, Unchanged: true},
			0, "processor count: already runs 9f8e7d6c5b4a\n", ""},
		{"count", 422, map[string]string{"error": "runtime: invalid module: processor count: bad magic"},
			1, "", "422 Unprocessable Entity: runtime: invalid module: processor count: bad magic"},
		{"a/b", 404, map[string]string{"error": `runtime: unknown processor "a/b"`},
			1, "", `runtime: unknown processor \"a/b\"`},
	} {
		answer.code, answer.body = tc.code, tc.body
		r := runCLI(t.Context(), "", "deploy", "--config", cfg, "--processor", tc.name, mod)
		if r.code != tc.exit || r.stdout != tc.stdout || !strings.Contains(r.stderr, tc.stderr) || (tc.stderr == "" && r.stderr != "") {
			t.Errorf("deploy to %s answering %d: got %v\nwant exit %d, stdout %q, stderr with %q", tc.name, tc.code, r, tc.exit, tc.stdout, tc.stderr)
		}
		if want := "POST /v1/processors/" + strings.ReplaceAll(tc.name, "/", "%2F") + "/module"; gotPath != want || gotBody != "the module" {
			t.Errorf("deploy to %s sent %s with %q, want %s with the module file", tc.name, gotPath, gotBody, want)
		}
	}

	srv.Close()
	if r := runCLI(t.Context(), "", "deploy", "--config", cfg, "--processor", "count", mod); r.code != 1 || !strings.Contains(r.stderr, "127.0.0.1:"+port) {
		t.Errorf("deploy without a server: got %v\nwant exit 1 and an error naming 127.0.0.1:%s", r, port)
	}
}

// TestE2EDeploy runs the word count as a process with an admin listener and deploys modules
// to its count processor with the deploy command: the running module, another valid one, a
// broken one, a WASI command (refused, saying to build a reactor; validate refuses it too) and
// one for an unknown processor; the application counts on.
func TestE2EDeploy(t *testing.T) {
	bin, addr, cfg, dir, withAdmin, app := startAdminApp(t)
	mods := buildModules(t)
	v1, err := os.ReadFile(mods["count"])
	if err != nil {
		t.Fatal(err)
	}
	v2 := appendCustomSection(v1, "statehost-test", []byte("v2"))
	v2File, garbage := filepath.Join(dir, "count-v2.wasm"), filepath.Join(dir, "garbage.wasm")
	if err := os.WriteFile(v2File, v2, 0o644); err != nil {
		t.Fatal(err)
	}
	command := commandModule(t, dir)
	if err := os.WriteFile(garbage, []byte("not a module"), 0o644); err != nil {
		t.Fatal(err)
	}
	h1, h2 := hashOf(v1)[:12], hashOf(v2)[:12]

	for _, tc := range []struct {
		processor, file string
		exit            int
		stdout, stderr  string
	}{
		{"count", mods["count"], 0, "processor count: already runs " + h1 + "\n", ""},
		{"count", v2File, 0, "processor count: switched 3 tasks to " + h2 + " (was " + h1 + ")\n", ""},
		{"count", garbage, 1, "", "422 Unprocessable Entity: runtime: invalid module"},
		{"count", command, 1, "", "exports _start and no _initialize), not a reactor: build it as a reactor"},
		{"nope", v2File, 1, "", "404 Not Found"},
		{"count", v2File, 0, "processor count: already runs " + h2 + "\n", ""},
	} {
		r := runCLI(t.Context(), "", "deploy", "--config", cfg, "--processor", tc.processor, tc.file)
		if r.code != tc.exit || r.stdout != tc.stdout || !strings.Contains(r.stderr, tc.stderr) {
			t.Errorf("deploy %s to %s: got %v\nwant exit %d, stdout %q, stderr with %q", tc.file, tc.processor, r, tc.exit, tc.stdout, tc.stderr)
		}
	}
	switched := 0
	for _, e := range app.events(runtime.EventModuleDeployed) {
		if e.Error == "" && e.Processor == "count" {
			switched++
		}
	}
	if n := len(app.events(runtime.EventModuleDeployed)); n != 1 || switched != 1 {
		t.Errorf("the app wrote %d module_deployed events, %d of count without an error; want 1", n, switched)
	}
	if n := len(app.events(runtime.EventModuleRefused)); n != 3 {
		t.Errorf("the app wrote %d module_refused events, want 3", n)
	}
	// validate refuses the command module too, on its module attribute.
	withCommand := strings.Replace(withAdmin, strconv.Quote(mods["count"]), strconv.Quote(command), 1)
	cmdCfg := writeFile(t, dir, "command.hcl", withCommand)
	if r := runCLI(t.Context(), "", "validate", "--config", cmdCfg); r.code != 1 || !strings.Contains(r.stderr, "Invalid module") ||
		!strings.Contains(strings.Join(strings.Fields(r.stderr), " "), "build it as a reactor") {
		t.Errorf("validate with the command module: %v\nwant exit 1 and an invalid module that says to build a reactor", r)
	}

	lines, ref := wordgen.Sentences(500, 4)
	produceLines(t, bin, addr, "sentences", lines)
	waitCounts(t, addr, "word-counts", wordgen.Strings(ref))
	stopClean(t, app)
}

// startAdminApp starts the word count as a process whose admin listener is on every
// interface, and waits for its tasks; it returns the binary, the broker's address, the
// configuration file, its directory and text, and the app.
func startAdminApp(t *testing.T) (bin, addr, cfg, dir, src string, app *appProcess) {
	t.Helper()
	// The admin listener is on every interface, which needs a token (the fake server and
	// the app process take it from the environment, as the CLI does).
	t.Setenv(config.AdminTokenEnv, "t")
	bin, addr, cfg, dir = e2eSetup(t, true)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	old, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	src = strings.Replace(string(old), "admin {\n  listen = \"\"\n}", "admin {\n  listen = \":"+port+"\"\n}", 1)
	if src == string(old) {
		t.Fatal("the word-count config has no admin block to replace")
	}
	if err := os.WriteFile(cfg, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	app = startApp(t, bin, cfg, "app")
	app.waitTasks(t, 60*time.Second)
	return bin, addr, cfg, dir, src, app
}

// commandModule builds plugins/count as a WASI command (go build without -buildmode=c-shared:
// it exports _start and no _initialize) into dir and returns its path.
func commandModule(t *testing.T, dir string) string {
	t.Helper()
	out := filepath.Join(dir, "count-command.wasm")
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", out, ".")
	cmd.Dir = filepath.Join("..", "..", "plugins", "count")
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, b)
	}
	return out
}

// hashOf is the hash of a module as the admin API shows it: its SHA-256, hex.
func hashOf(wasm []byte) string {
	sum := sha256.Sum256(wasm)
	return hex.EncodeToString(sum[:])
}

// appendCustomSection returns wasm with a custom section appended: the same module, with
// another hash.
func appendCustomSection(wasm []byte, name string, payload []byte) []byte {
	leb := func(b []byte, v int) []byte {
		for ; v >= 0x80; v >>= 7 {
			b = append(b, byte(v)|0x80)
		}
		return append(b, byte(v))
	}
	content := append(leb(nil, len(name)), name...)
	content = append(content, payload...)
	out := append(append([]byte(nil), wasm...), 0) // custom section id
	out = leb(out, len(content))
	return append(out, content...)
}
