package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/statehost/statehost/config"
	"github.com/statehost/statehost/host/runtime"
)

// tokenApp is a count over the 4 partitions of words with a token-protected admin listener:
// application id, state directory, broker, admin block, module.
const tokenApp = `application_id  = "tokenapp"
state_dir       = %q
commit_interval = "100ms"
kafka {
  brokers = [%q]
}
admin {
%s
}
topic "words" {
  partitions = 4
}
processor "count" {
  module  = %q
  inputs  = ["words"]
  outputs = ["word-counts"]
  store "counts" {}
}
`

const testAdminToken = "cli-t0ken"

// freePort returns a port that was free a moment ago (freeAddr's).
func freePort(t *testing.T) string {
	t.Helper()
	_, port, _ := net.SplitHostPort(freeAddr(t))
	return port
}

// writeTokenApp writes tokenApp with the admin block body into dir/app.hcl and returns its path.
func writeTokenApp(t *testing.T, dir, broker, admin string) string {
	t.Helper()
	src := fmt.Sprintf(tokenApp, filepath.Join(dir, "state"), broker, admin, buildModules(t)["count"])
	path := filepath.Join(dir, "app.hcl")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// tokenStatus reads GET /v1/status of the admin listener at addr with the test's token.
func tokenStatus(t *testing.T, addr string) runtime.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v1/status", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s/v1/status: %v", addr, err)
	}
	defer resp.Body.Close()
	var st runtime.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/v1/status: %s: %v", addr, resp.Status, err)
	}
	return st
}

// runningCounts returns the count partitions that st shows running.
func runningCounts(st runtime.Status) map[int32]bool {
	out := map[int32]bool{}
	for _, ts := range st.Tasks {
		if ts.Processor == "count" && ts.State == "running" {
			out[ts.Partition] = true
		}
	}
	return out
}

// TestAdminTokenCommands: two instances share a count, both with an admin token. Instance a
// listens on every interface (allowed with the token), b on 127.0.0.1 but advertises itself
// as localhost, so that a's redirects to b go to another host name, to which Go's HTTP client
// would not resend the Authorization header. statehost query (every key, half of them
// redirected to b), status and deploy work through a's configuration; without the token or
// with a wrong one they fail with a message that says which token to set.
func TestAdminTokenCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a broker and two instances as processes")
	}
	t.Setenv(config.AdminTokenEnv, "")
	bin := buildBinary(t)
	broker := startBroker(t, brokerOptions{})
	portA, portB := freePort(t), freePort(t)
	dirA, dirB := t.TempDir(), t.TempDir()
	cfgA := writeTokenApp(t, dirA, broker.addr, fmt.Sprintf("  listen = \"0.0.0.0:%s\"\n  token  = %q", portA, testAdminToken))
	cfgB := writeTokenApp(t, dirB, broker.addr, fmt.Sprintf("  listen = \"127.0.0.1:%s\"\n  advertise = \"localhost:%s\"\n  token  = %q", portB, portB, testAdminToken))
	a := startApp(t, bin, cfgA, "a")
	b := startApp(t, bin, cfgB, "b")
	addrA, addrB := "127.0.0.1:"+portA, "127.0.0.1:"+portB

	a.adminAddr(t)
	b.adminAddr(t)
	var onA, onB map[int32]bool
	deadline := time.Now().Add(60 * time.Second)
	for {
		if a.exited() || b.exited() {
			t.Fatalf("an instance exited: a %v (%d), b %v (%d)", a.exited(), a.code, b.exited(), b.code)
		}
		onA, onB = runningCounts(tokenStatus(t, addrA)), runningCounts(tokenStatus(t, addrB))
		if len(onA) > 0 && len(onB) > 0 && len(onA)+len(onB) == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the count tasks are not shared: a runs %v, b runs %v", onA, onB)
		}
		time.Sleep(200 * time.Millisecond)
	}

	var stdin strings.Builder
	ref := map[string]int{}
	for i := range 60 {
		k := fmt.Sprintf("k%d", i%20)
		ref[k]++
		fmt.Fprintf(&stdin, "%s,x\n", k)
	}
	if r := runCLI(t.Context(), stdin.String(), "produce", "--brokers", broker.addr, "--key-separator", ",", "words"); r.code != 0 {
		t.Fatalf("produce: %s", r)
	}

	redirected := 0
	for k, n := range ref {
		var r result
		// A count is read once committed, and once a knows who runs what: retried for a minute.
		for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
			if r = runCLI(t.Context(), "", "query", "--config", cfgA, "counts", k); r.code == 0 && r.stdout == strconv.Itoa(n) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if r.code != 0 || r.stdout != strconv.Itoa(n) {
			t.Fatalf("statehost query counts %s (partition %d, on b: %v): %s; want %d", k, runtime.KeyPartition([]byte(k), 4, 0), onB[runtime.KeyPartition([]byte(k), 4, 0)], r, n)
		}
		if onB[runtime.KeyPartition([]byte(k), 4, 0)] {
			redirected++
		}
	}
	if redirected == 0 {
		t.Errorf("no key was redirected to b (a runs %v, b %v)", onA, onB)
	}

	if r := runCLI(t.Context(), "", "status", "--config", cfgA); r.code != 0 || !strings.Contains(r.stdout, "application tokenapp") || !strings.Contains(r.stdout, "count_") {
		t.Errorf("statehost status: %s", r)
	}
	mod := buildModules(t)["count"]
	if r := runCLI(t.Context(), "", "deploy", "--config", cfgA, "--processor", "count", mod); r.code != 0 || !strings.Contains(r.stdout, "processor count: already runs") {
		t.Errorf("statehost deploy of the running module: %s", r)
	}

	// The token may come from the environment instead.
	noToken := writeTokenApp(t, t.TempDir(), broker.addr, fmt.Sprintf("  listen = \"0.0.0.0:%s\"", portA))
	t.Setenv(config.AdminTokenEnv, testAdminToken)
	if r := runCLI(t.Context(), "", "query", "--config", noToken, "counts", "k1"); r.code != 0 || r.stdout != strconv.Itoa(ref["k1"]) {
		t.Errorf("query with the token in %s: %s", config.AdminTokenEnv, r)
	}

	// Without the token, or with another one: 401, and a message that says what to set.
	t.Setenv(config.AdminTokenEnv, "")
	loopback := writeTokenApp(t, t.TempDir(), broker.addr, fmt.Sprintf("  listen = \"127.0.0.1:%s\"", portA))
	wrong := writeTokenApp(t, t.TempDir(), broker.addr, fmt.Sprintf("  listen = \"127.0.0.1:%s\"\n  token = \"not-it\"", portA))
	for _, tc := range []struct {
		cfg, want string
	}{
		{loopback, "the configuration has no admin token: set admin.token or the environment variable STATEHOST_ADMIN_TOKEN"},
		{wrong, "the configuration's admin token (admin.token or STATEHOST_ADMIN_TOKEN) is not the application's"},
	} {
		for _, args := range [][]string{
			{"query", "--config", tc.cfg, "counts", "k1"},
			{"status", "--config", tc.cfg},
			{"deploy", "--config", tc.cfg, "--processor", "count", mod},
		} {
			r := runCLI(t.Context(), "", args...)
			if r.code != 1 || !strings.Contains(r.stderr, tc.want) || !strings.Contains(r.stderr, addrA) || r.stdout != "" {
				t.Errorf("statehost %s: %s\nwant exit 1 and %q", strings.Join(args, " "), r, tc.want)
			}
		}
	}
}
