package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/statehost/statehost/config"
)

// authHCL runs count over the 2 partitions of words with a token-protected admin listener on
// a free port; %s is more of the admin block.
const authHCL = `
application_id  = "auth"
commit_interval = "100ms"
admin {
  listen = "127.0.0.1:0"
  token  = "t0p-s3cret"
  %s
}
topic "words" {
  partitions = 2
}
processor "count" {
  module  = "{{count}}"
  inputs  = ["words"]
  outputs = ["word-counts"]
  store "counts" {}
}
`

// adminCall sends method path (with body) to the instance's admin listener, with the
// Authorization header auth when not empty, and returns the response with its body read.
func adminCall(t *testing.T, in *instance, method, path string, body []byte, auth string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, "http://"+in.rt.local.adminAddr()+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// TestAdminToken: with admin.token, every endpoint of the real listener answers 401 (with a
// WWW-Authenticate challenge and a JSON error) to a request without the token or with a
// wrong one, and answers as usual with it; /metrics too, since metrics_public is not set.
// Then the same instance restarts with metrics_public = true (its state directory, so that the
// module is not compiled again): /metrics answers without the token, the rest still wants it.
func TestAdminToken(t *testing.T) {
	brokers := cluster(t)
	dir := t.TempDir()
	in := start(t, loadConfig(t, dir, fmt.Sprintf(authHCL, "")), brokers, func(o *Options) { o.NoWatch = true })
	cl, _ := client(t, brokers)
	produceKeyed(t, cl, "words", []string{"a", "b", "a"})
	const good = "Bearer t0p-s3cret"
	waitFor(t, 30*time.Second, "the count of a to be committed", func() bool {
		resp, body := adminCall(t, in, http.MethodGet, "/v1/stores/counts/keys/a", nil, good)
		return resp.StatusCode == http.StatusOK && body == "2"
	})

	module := mustRead(t, modules["count"])
	endpoints := []struct {
		method, path string
		body         []byte
		code         int // with the token
	}{
		{http.MethodGet, "/v1/status", nil, http.StatusOK},
		{http.MethodGet, "/v1/processors", nil, http.StatusOK},
		{http.MethodGet, "/v1/deploys", nil, http.StatusOK},
		{http.MethodGet, "/v1/stores", nil, http.StatusOK},
		{http.MethodPost, "/v1/processors/count/module", module, http.StatusOK}, // the running module: unchanged
		{http.MethodGet, "/v1/stores/counts/keys/a", nil, http.StatusOK},
		{http.MethodGet, "/v1/stores/counts/range", nil, http.StatusOK},
		{http.MethodGet, "/metrics", nil, http.StatusOK},
		{http.MethodGet, "/no/such/endpoint", nil, http.StatusNotFound},
	}
	for _, ep := range endpoints {
		for _, tc := range []struct {
			auth      string
			challenge string
		}{
			{"", `Bearer realm="statehost"`},
			{"Bearer wrong", `Bearer realm="statehost", error="invalid_token"`},
			{"Bearer t0p-s3cret-and-more", `Bearer realm="statehost", error="invalid_token"`},
			{"Bearer t0p-s3cre", `Bearer realm="statehost", error="invalid_token"`},
			{"Basic dDBwLXMzY3JldA==", `Bearer realm="statehost"`},
			{"t0p-s3cret", `Bearer realm="statehost"`},
			{"Bearer", `Bearer realm="statehost"`},
		} {
			resp, body := adminCall(t, in, ep.method, ep.path, ep.body, tc.auth)
			var e struct{ Error string }
			if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != tc.challenge ||
				resp.Header.Get("Content-Type") != "application/json" || json.Unmarshal([]byte(body), &e) != nil || e.Error == "" {
				t.Errorf("%s %s with Authorization %q: %s, WWW-Authenticate %q, %s; want 401, %q and a JSON error",
					ep.method, ep.path, tc.auth, resp.Status, resp.Header.Get("WWW-Authenticate"), body, tc.challenge)
			}
			if strings.Contains(body, "t0p-s3cret") {
				t.Errorf("%s %s: the answer shows the token: %s", ep.method, ep.path, body)
			}
		}
		for _, auth := range []string{good, "bearer t0p-s3cret", "Bearer   t0p-s3cret "} {
			resp, body := adminCall(t, in, ep.method, ep.path, ep.body, auth)
			if resp.StatusCode != ep.code || resp.Header.Get("WWW-Authenticate") != "" {
				t.Errorf("%s %s with Authorization %q: %s %.200s; want %d", ep.method, ep.path, auth, resp.Status, body, ep.code)
			}
		}
	}
	// The console's page and assets hold no data: they load without the token (the page asks
	// for it); anything else at their paths is the API's.
	for _, path := range []string{"/", "/console/console.js", "/console/console.css"} {
		if resp, body := adminCall(t, in, http.MethodGet, path, nil, ""); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s without a token: %s %.200s; want 200", path, resp.Status, body)
		}
	}
	if resp, _ := adminCall(t, in, http.MethodPost, "/", nil, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST / without a token: %s; want 401", resp.Status)
	}
	if _, body := adminCall(t, in, http.MethodGet, "/metrics", nil, good); !strings.Contains(body, "statehost_records_processed_total") {
		t.Errorf("GET /metrics with the token:\n%.500s", body)
	}
	if err := in.stop(t); err != nil {
		t.Fatal(err)
	}

	in = start(t, loadConfig(t, dir, fmt.Sprintf(authHCL, "metrics_public = true")), brokers, func(o *Options) { o.NoWatch = true })
	waitFor(t, 30*time.Second, "the admin listener", func() bool { return in.rt.local.adminAddr() != "" })
	resp, body := adminCall(t, in, http.MethodGet, "/metrics", nil, "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "statehost_records_processed_total") {
		t.Errorf("metrics_public: GET /metrics without a token: %s %.300s; want 200 and the metrics", resp.Status, body)
	}
	for _, path := range []string{"/v1/status", "/v1/processors", "/v1/stores/counts/range", "/metrics/", "//metrics"} {
		if resp, body := adminCall(t, in, http.MethodGet, path, nil, ""); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("metrics_public: GET %s without a token: %s %s; want 401", path, resp.Status, body)
		}
	}
	if resp, _ := adminCall(t, in, http.MethodGet, "/v1/status", nil, good); resp.StatusCode != http.StatusOK {
		t.Errorf("metrics_public: GET /v1/status with the token: %s", resp.Status)
	}
}

// TestAdminOpenListenerRefused: the admin listener of a configuration built without
// config.Load's checks, on every interface without a token, does not start; with a token it
// does.
func TestAdminOpenListenerRefused(t *testing.T) {
	for _, listen := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		rt := &Runtime{cfg: &config.Config{Admin: config.Admin{Listen: listen}}, log: hclog.NewNullLogger()}
		stop, err := rt.serveAdmin()
		if err == nil {
			stop()
		}
		if !errors.Is(err, errOpenAdmin) || !strings.Contains(err.Error(), listen) {
			t.Errorf("listen %q without a token: %v, want %v naming the address", listen, err, errOpenAdmin)
		}
	}
	for _, tc := range []struct {
		addr  net.Addr
		token string
		ok    bool
	}{
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}, "", true},
		{&net.TCPAddr{IP: net.IPv4(127, 9, 9, 9)}, "", true},
		{&net.TCPAddr{IP: net.IPv6loopback}, "", true},
		{&net.TCPAddr{IP: net.IPv4(10, 0, 0, 1)}, "", false},
		{&net.TCPAddr{IP: net.IPv6unspecified}, "", false},
		{&net.TCPAddr{IP: net.IPv4(10, 0, 0, 1)}, "t", true},
	} {
		if err := checkAdminExposure(tc.addr, tc.token); (err == nil) != tc.ok {
			t.Errorf("checkAdminExposure(%v, %q) = %v, want ok %v", tc.addr, tc.token, err, tc.ok)
		}
	}
}

// TestGuardBrowsers: a page of another origin cannot change anything through the admin API
// (a deploy answers 403 to a request that says it comes from elsewhere), reads stay open to
// the local machine, and without a token a request that names the listener by a host name
// other than localhost (DNS rebinding) answers 403. Clients that are not browsers pass.
func TestGuardBrowsers(t *testing.T) {
	brokers := cluster(t)
	src := strings.Replace(fmt.Sprintf(authHCL, ""), `token  = "t0p-s3cret"`, "", 1)
	in := start(t, loadConfig(t, t.TempDir(), src), brokers)
	waitFor(t, 60*time.Second, "the tasks to run", func() bool { return running(in.rt) == 2 })
	addr := in.rt.local.adminAddr()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	call := func(method, path string, header map[string]string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, "http://"+addr+path, strings.NewReader(""))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range header {
			if k == "Host" {
				req.Host = v
				continue
			}
			req.Header.Set(k, v)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		what, method string
		header       map[string]string
		want         int
	}{
		{"a deploy from another site", "POST", map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusForbidden},
		{"a deploy from another origin, by Origin", "POST", map[string]string{"Origin": "http://evil.example"}, http.StatusForbidden},
		{"a deploy over a rebound host name", "POST", map[string]string{"Host": "evil.example:" + port}, http.StatusForbidden},
		{"a read over a rebound host name", "GET", map[string]string{"Host": "evil.example:" + port}, http.StatusForbidden},
		{"a read from another site", "GET", map[string]string{"Sec-Fetch-Site": "cross-site"}, http.StatusOK},
		{"a read by localhost", "GET", map[string]string{"Host": "localhost:" + port}, http.StatusOK},
		{"the console's own deploy", "POST", map[string]string{"Sec-Fetch-Site": "same-origin"}, http.StatusBadRequest},
		{"a deploy by a command (no browser headers)", "POST", nil, http.StatusBadRequest},
	} {
		path := "/v1/status"
		if tc.method == "POST" {
			path = "/v1/processors/count/module" // an empty body: 400 once past the guard
		}
		if got := call(tc.method, path, tc.header); got != tc.want {
			t.Errorf("%s: %s %s answered %d, want %d", tc.what, tc.method, path, got, tc.want)
		}
	}
}
