package runtime

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
)

// Admin security. Without a token (admin.token, or STATEHOST_ADMIN_TOKEN) the admin listener
// is on a loopback address (config.Load refuses any other, and serveAdmin checks the address
// it got) and every endpoint is open to the local machine. With a token, every request must
// carry "Authorization: Bearer <token>", /metrics excepted when admin.metrics_public is set;
// any other answers 401 with a WWW-Authenticate header (RFC 6750) and {"error": "..."}.
//
// Browsers are kept from using the API on a user's behalf (guardBrowsers): a web page of
// another origin cannot make a request that changes anything (a deploy, a reload), and
// without a token a request must name the listener by an IP address or "localhost", so that a
// page whose host name an attacker points at 127.0.0.1 (DNS rebinding) reaches nothing.

// adminRealm is the realm of the WWW-Authenticate header of a 401.
const adminRealm = "statehost"

// requireToken wraps next so that a request without the right bearer token is answered 401.
// The comparison is in constant time: both sides are hashed to SHA-256 first, so that neither
// the content nor the length of the token leaks through timing.
func requireToken(next http.Handler, token string, metricsPublic bool) http.Handler {
	want := sha256.Sum256([]byte(token))
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if metricsPublic && req.URL.Path == "/metrics" {
			next.ServeHTTP(w, req)
			return
		}
		got, present := bearerToken(req.Header.Get("Authorization"))
		sum := sha256.Sum256([]byte(got))
		if present && subtle.ConstantTimeCompare(sum[:], want[:]) == 1 {
			next.ServeHTTP(w, req)
			return
		}
		challenge := `Bearer realm="` + adminRealm + `"`
		msg := "this admin API needs a token: send \"Authorization: Bearer <admin.token>\""
		if present {
			challenge += `, error="invalid_token"`
			msg = "wrong admin token"
		}
		w.Header().Set("WWW-Authenticate", challenge)
		writeError(w, http.StatusUnauthorized, errors.New(msg))
	})
}

// guardBrowsers wraps next with the browser protections of the admin API: a request that is
// not GET, HEAD or OPTIONS from another origin (its Sec-Fetch-Site or Origin header says so)
// answers 403 (http.CrossOriginProtection), and, without a token, so does a request whose
// Host is neither an IP address nor localhost. Clients that are not browsers (statehost's
// commands, curl, peers) send neither header and name the listener by its address.
func guardBrowsers(next http.Handler, token string) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusForbidden, errors.New("cross-origin request refused: the admin API changes nothing for a page of another origin"))
	}))
	guarded := cop.Handler(next)
	if token != "" {
		return guarded
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if !literalHost(req.Host) {
			writeError(w, http.StatusForbidden, fmt.Errorf("host %q refused: without admin.token, name the admin listener by its IP address or localhost", req.Host))
			return
		}
		guarded.ServeHTTP(w, req)
	})
}

// literalHost reports whether the Host header host (with or without a port) is an IP address
// or localhost.
func literalHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	return net.ParseIP(host) != nil || strings.EqualFold(host, "localhost")
}

// bearerToken returns the token of an Authorization header "Bearer <token>" (the scheme in
// any case); present is false when the header is not of that form.
func bearerToken(header string) (token string, present bool) {
	scheme, rest, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(rest)
	return token, token != ""
}

// errOpenAdmin: the admin listener is reachable from other machines and has no token.
var errOpenAdmin = errors.New("runtime: the admin listener is not on a loopback address and has no token (admin.token)")

// checkAdminExposure refuses a listener without a token whose address is not loopback. The
// configuration is checked already; this catches a Config built another way, and a host name
// that resolved to another address.
func checkAdminExposure(addr net.Addr, token string) error {
	if token != "" {
		return nil
	}
	if tcp, ok := addr.(*net.TCPAddr); ok && tcp.IP.IsLoopback() {
		return nil
	}
	return errOpenAdmin
}
