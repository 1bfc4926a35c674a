package runtime

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/statehost/statehost/internal/wordgen"
)

// adminHCL runs count over the 2 partitions of words, its module the file %s.
const adminHCL = `
application_id  = "deploy"
commit_interval = "200ms"
admin { listen = "" }
topic "words" {
  partitions = 2
}
processor "count" {
  module  = "%s"
  inputs  = ["words"]
  outputs = ["word-counts"]
  store "counts" {}
}
`

// TestAdminDeploy deploys modules through the admin API: garbage, an empty body and an
// unknown processor change nothing; the running module is a no-op; another valid module
// becomes the current version, every task switches to it, and it goes on counting.
func TestAdminDeploy(t *testing.T) {
	brokers := cluster(t)
	cfg := loadConfig(t, t.TempDir(), fmt.Sprintf(adminHCL, modules["count"]))
	in := start(t, cfg, brokers, func(o *Options) { o.NoWatch = true })
	srv := httptest.NewServer(in.rt.Handler())
	t.Cleanup(srv.Close)
	cl, _ := client(t, brokers)

	v1 := mustRead(t, modules["count"])
	v1Hash := sha256Hex(v1)
	waitFor(t, 30*time.Second, "the 2 tasks of count", func() bool { return adminProcessors(t, srv)[0].Tasks == 2 })
	ps := adminProcessors(t, srv)
	if len(ps) != 1 || ps[0].Name != "count" || ps[0].Current.Hash != v1Hash || ps[0].Current.Source != modules["count"] ||
		ps[0].Previous != nil || ps[0].Switched != 2 || ps[0].Current.LoadedAt.IsZero() {
		t.Fatalf("GET /v1/processors = %+v, want count on %s (from its file), 2 tasks switched, no previous", ps, v1Hash)
	}

	for _, tc := range []struct {
		what, name string
		body       []byte
		code       int
		err        string
	}{
		{"garbage", "count", []byte("not a wasm module"), http.StatusUnprocessableEntity, "invalid module"},
		{"an empty body", "count", nil, http.StatusBadRequest, "empty body"},
		{"an unknown processor", "nope", v1, http.StatusNotFound, `unknown processor "nope"`},
	} {
		code, body := adminPost(t, srv, tc.name, tc.body)
		var e struct{ Error string }
		if err := json.Unmarshal(body, &e); code != tc.code || err != nil || !strings.Contains(e.Error, tc.err) {
			t.Errorf("POST %s: %d %s, want %d and an error with %q", tc.what, code, body, tc.code, tc.err)
		}
		if ps := adminProcessors(t, srv); ps[0].Current.Hash != v1Hash || ps[0].Previous != nil {
			t.Errorf("after POST %s: %+v, want %s still, no previous", tc.what, ps[0], v1Hash)
		}
	}

	res := adminDeploy(t, srv, "count", v1)
	if !res.Unchanged || res.Version.Hash != v1Hash || res.Previous.Hash != v1Hash || res.Processor != "count" {
		t.Errorf("POST of the running module: %+v, want unchanged %s", res, v1Hash)
	}

	// The same code with a custom section: another module, with the same stores.
	v2 := wasmWithCustomSection(v1, "statehost-test", []byte("v2"))
	v2Hash := sha256Hex(v2)
	res = adminDeploy(t, srv, "count", v2)
	if res.Unchanged || res.Version.Hash != v2Hash || res.Version.Source != "deploy" || res.Previous.Hash != v1Hash || res.Tasks != 2 {
		t.Errorf("POST of another module: %+v, want %s from deploy, previous %s, 2 tasks", res, v2Hash, v1Hash)
	}
	ps = adminProcessors(t, srv)
	if ps[0].Current.Hash != v2Hash || ps[0].Previous == nil || ps[0].Previous.Hash != v1Hash || ps[0].Switched != 2 || ps[0].Tasks != 2 {
		t.Errorf("GET /v1/processors after the deploy: %+v, want %s, previous %s, 2 of 2 tasks switched", ps[0], v2Hash, v1Hash)
	}

	var words []string
	ref := map[string]int{}
	for i := range 200 {
		w := fmt.Sprintf("w%d", i%13)
		words = append(words, w)
		ref[w]++
	}
	produceKeyed(t, cl, "words", words)
	waitCounts(t, brokers, "word-counts", wordgen.Strings(ref))
}

// TestAdminStatusUnchanged checks that GET /v1/status still answers with the tasks, as JSON.
func TestAdminStatusUnchanged(t *testing.T) {
	brokers := cluster(t)
	cfg := loadConfig(t, t.TempDir(), fmt.Sprintf(adminHCL, modules["count"]))
	in := start(t, cfg, brokers, func(o *Options) { o.NoWatch = true })
	srv := httptest.NewServer(in.rt.Handler())
	t.Cleanup(srv.Close)
	waitFor(t, 30*time.Second, "the 2 tasks of count", func() bool {
		var st Status
		adminGet(t, srv, "/v1/status", &st)
		return st.ApplicationID == "deploy" && len(st.Tasks) == 2
	})
}

// adminGet GETs path from srv into v, and checks the status and content type.
func adminGet(t *testing.T, srv *httptest.Server, path string, v any) {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET %s: %s, Content-Type %q", path, resp.Status, resp.Header.Get("Content-Type"))
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// adminProcessors returns GET /v1/processors.
func adminProcessors(t *testing.T, srv *httptest.Server) []ProcessorStatus {
	t.Helper()
	var ps []ProcessorStatus
	adminGet(t, srv, "/v1/processors", &ps)
	return ps
}

// postModule POSTs wasm as the module of the processor name and returns the status code and
// the body; every answer must be JSON.
func adminPost(t *testing.T, srv *httptest.Server, name string, wasm []byte) (int, []byte) {
	t.Helper()
	resp, err := http.Post(srv.URL+"/v1/processors/"+name+"/module", "application/wasm", bytes.NewReader(wasm))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("POST module of %s: Content-Type %q, want application/json", name, ct)
	}
	return resp.StatusCode, body
}

// adminDeploy POSTs wasm as the module of the processor name and returns the DeployResult of a
// 200 answer.
func adminDeploy(t *testing.T, srv *httptest.Server, name string, wasm []byte) DeployResult {
	t.Helper()
	code, body := adminPost(t, srv, name, wasm)
	var res DeployResult
	if err := json.Unmarshal(body, &res); code != http.StatusOK || err != nil {
		t.Fatalf("POST module of %s: %d %s (%v), want 200 and a DeployResult", name, code, body, err)
	}
	return res
}

// mustRead returns the content of the module file path.
func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sha256Hex is the hash ModuleVersion shows for wasm: its SHA-256, hex.
func sha256Hex(wasm []byte) string {
	sum := sha256.Sum256(wasm)
	return hex.EncodeToString(sum[:])
}

// wasmWithCustomSection returns wasm with a custom section appended: the same module, with
// another hash.
func wasmWithCustomSection(wasm []byte, name string, payload []byte) []byte {
	content := append(uleb128(nil, uint64(len(name))), name...)
	content = append(content, payload...)
	out := append([]byte(nil), wasm...)
	out = append(out, 0) // custom section id
	out = uleb128(out, uint64(len(content)))
	return append(out, content...)
}

// uleb128 appends v in unsigned LEB128 to b.
func uleb128(b []byte, v uint64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if v == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// logCapture keeps what a logger writes, and passes it on to the test log.
type logCapture struct {
	t   testing.TB
	mu  sync.Mutex
	buf strings.Builder
}

func (c *logCapture) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.buf.Write(p)
	c.mu.Unlock()
	c.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// count returns how many lines logged so far contain s.
func (c *logCapture) count(s string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Count(c.buf.String(), s)
}

// logger returns an info-level logger that writes to c.
func (c *logCapture) logger() hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: "test", Level: hclog.Info, Output: c})
}
