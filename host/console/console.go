package console

import (
	"bytes"
	"embed"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed assets
var assets embed.FS

// securityHeaders are set on every answer of the console: only its own scripts, styles and
// API calls, no framing (clickjacking), no sniffing, no referrer.
var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
	"X-Frame-Options":        "DENY",
	"X-Content-Type-Options": "nosniff",
	"Referrer-Policy":        "no-referrer",
	"Cache-Control":          "no-cache",
}

// files are the assets by the path they are served at.
var files = func() map[string][]byte {
	out := map[string][]byte{}
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assets.ReadFile(p)
		name := "/console/" + strings.TrimPrefix(p, "assets/")
		if p == "assets/index.html" {
			name = "/"
		}
		out[name] = b
		return err
	})
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	return out
}()

// Wrap returns a handler that serves the console's page (GET /) and assets (GET /console/...)
// and hands every other request to api, untouched. The console's answers need no token: they
// hold no data. A path under /console/ that is not an asset is 404.
func Wrap(api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		p := req.URL.Path
		if req.Method != http.MethodGet && req.Method != http.MethodHead || p != "/" && !strings.HasPrefix(p, "/console/") {
			api.ServeHTTP(w, req)
			return
		}
		for k, v := range securityHeaders {
			w.Header().Set(k, v)
		}
		b, ok := files[p]
		if !ok || p == "/console/index.html" {
			http.NotFound(w, req)
			return
		}
		ctype := mime.TypeByExtension(path.Ext(p))
		if p == "/" {
			ctype = "text/html; charset=utf-8"
		}
		w.Header().Set("Content-Type", ctype)
		http.ServeContent(w, req, "", time.Time{}, bytes.NewReader(b))
	})
}
