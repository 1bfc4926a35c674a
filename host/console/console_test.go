package console

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// TestWrap: the page and its assets are served with their types and the security headers; a
// path under /console/ that is not an asset is 404; every other request, and any method but
// GET and HEAD, goes to the API untouched (the path not cleaned: the API's auth sees it as
// sent).
func TestWrap(t *testing.T) {
	var apiPaths []string
	h := Wrap(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		apiPaths = append(apiPaths, req.Method+" "+req.URL.Path)
		w.WriteHeader(http.StatusTeapot)
	}))
	for _, tc := range []struct {
		method, path string
		code         int
		ctype        string
	}{
		{"GET", "/", http.StatusOK, "text/html; charset=utf-8"},
		{"HEAD", "/", http.StatusOK, "text/html; charset=utf-8"},
		{"GET", "/console/console.js", http.StatusOK, "text/javascript; charset=utf-8"},
		{"GET", "/console/console.css", http.StatusOK, "text/css; charset=utf-8"},
		{"GET", "/console/", http.StatusNotFound, ""},
		{"GET", "/console/index.html", http.StatusNotFound, ""},
		{"GET", "/console/../v1/status", http.StatusNotFound, ""},
		{"GET", "/console/nope.js", http.StatusNotFound, ""},
		{"GET", "/v1/status", http.StatusTeapot, ""},
		{"GET", "//metrics", http.StatusTeapot, ""},
		{"POST", "/", http.StatusTeapot, ""},
		{"DELETE", "/console/console.js", http.StatusTeapot, ""},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, tc.path, nil))
		if rec.Code != tc.code || tc.ctype != "" && rec.Header().Get("Content-Type") != tc.ctype {
			t.Errorf("%s %s: %d %q, want %d %q", tc.method, tc.path, rec.Code, rec.Header().Get("Content-Type"), tc.code, tc.ctype)
		}
		if rec.Code != http.StatusTeapot && !strings.Contains(rec.Header().Get("Content-Security-Policy"), "frame-ancestors 'none'") {
			t.Errorf("%s %s: no Content-Security-Policy", tc.method, tc.path)
		}
	}
	want := []string{"GET /v1/status", "GET //metrics", "POST /", "DELETE /console/console.js"}
	if strings.Join(apiPaths, ",") != strings.Join(want, ",") {
		t.Errorf("the API got %q, want %q", apiPaths, want)
	}
}

// TestAssetsOffline: the assets name nothing outside the instance (no CDN, no font or script
// from elsewhere), and the page loads exactly the assets that are embedded.
func TestAssetsOffline(t *testing.T) {
	external := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}|@import|url\(`)
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assets.ReadFile(p)
		if m := external.Find(b); m != nil {
			t.Errorf("%s refers to %q: the console must work offline", p, m)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	page := string(files["/"])
	for _, ref := range regexp.MustCompile(`(?:src|href)="(/[^"]*)"`).FindAllStringSubmatch(page, -1) {
		if _, ok := files[ref[1]]; !ok {
			t.Errorf("index.html loads %s, which is not an asset", ref[1])
		}
	}
}
