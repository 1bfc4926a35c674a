package runtime

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net"
	"net/http"
	"strings"
)

// Admin security. Without a token (admin.token, or STATEHOST_ADMIN_TOKEN) the admin listener
// is on a loopback address (config.Load refuses any other, and serveAdmin checks the address
// it got) and every endpoint is open to the local machine. With a token, every request must
// carry "Authorization: Bearer <token>", /metrics excepted when admin.metrics_public is set;
// any other answers 401 with a WWW-Authenticate header (RFC 6750) and {"error": "..."}.

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
