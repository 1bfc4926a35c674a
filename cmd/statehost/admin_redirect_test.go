package main

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// TestAdminRedirects checks which redirects the admin commands follow with the token: an
// interactive query's one 307 to the instance that runs the key, and nothing else (another
// path, another status, a second hop), so that the token goes to no other server.
func TestAdminRedirects(t *testing.T) {
	var (
		mu  sync.Mutex
		got = map[string]string{} // path on the far server -> Authorization it received
	)
	far := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got[r.URL.Path] = r.Header.Get("Authorization")
		mu.Unlock()
		if r.URL.Path == "/v1/stores/s/keys/again" {
			http.Redirect(w, r, "/v1/stores/s/keys/third", http.StatusTemporaryRedirect)
			return
		}
		w.Write([]byte("value"))
	}))
	defer far.Close()
	near := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code := http.StatusTemporaryRedirect
		if r.URL.Path == "/v1/stores/s/keys/found" {
			code = http.StatusFound
		}
		http.Redirect(w, r, far.URL+r.URL.Path, code)
	}))
	defer near.Close()
	do := func(method, path string) int {
		t.Helper()
		req, _ := http.NewRequest(method, near.URL+path, nil)
		_, code, err := adminDo(req, near.Listener.Addr().String(), "s3cret", 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		return code
	}
	if code := do(http.MethodGet, "/v1/stores/s/keys/k"); code != http.StatusOK {
		t.Errorf("a query redirected by 307: status %d, want 200 from the instance that runs the key", code)
	}
	for _, c := range []struct{ method, path string }{
		{http.MethodGet, "/v1/status"},              // not a query
		{http.MethodPost, "/v1/stores/s/keys/p"},    // not a GET
		{http.MethodGet, "/v1/stores/s/keys/found"}, // a 302
	} {
		if code := do(c.method, c.path); code != http.StatusTemporaryRedirect && code != http.StatusFound {
			t.Errorf("%s %s: status %d, want the redirect itself as the answer", c.method, c.path, code)
		}
	}
	if code := do(http.MethodGet, "/v1/stores/s/keys/again"); code != http.StatusTemporaryRedirect {
		t.Errorf("a second redirect: status %d, want it as the answer", code)
	}
	mu.Lock()
	defer mu.Unlock()
	if a := got["/v1/stores/s/keys/k"]; a != "Bearer s3cret" {
		t.Errorf("the redirected query carried %q, want the token", a)
	}
	for _, p := range []string{"/v1/status", "/v1/stores/s/keys/p", "/v1/stores/s/keys/found", "/v1/stores/s/keys/third"} {
		if _, ok := got[p]; ok {
			t.Errorf("%s reached the far server", p)
		}
	}
}
