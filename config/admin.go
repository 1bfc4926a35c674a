package config

import (
	"net"
	"os"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// AdminTokenEnv is the environment variable that, when set and not empty, holds the admin
// token in place of admin.token: the token then stays out of the configuration file. It is
// read by Load and Parse, so the statehost commands that read the file (run, query, status,
// deploy) all see it.
const AdminTokenEnv = "STATEHOST_ADMIN_TOKEN"

// decodeAdmin decodes the admin block (nil when absent) into c.Admin, with the token of
// AdminTokenEnv, and refuses a listener that other machines reach without a token.
func (d *decoder) decodeAdmin(ra *rawAdmin, body hcl.Body, c *Config) {
	c.Admin.Listen = defaultAdminListen
	if ra == nil {
		ra = &rawAdmin{DefRange: body.MissingItemRange()}
	}
	listenOK := true // the listen address is valid (the default is)
	if s, ok := d.str(ra.Listen, "listen"); ok {
		c.Admin.Listen = s
		if s != "" {
			listenOK = d.hostPort(ra.Listen.Range(), "admin listen address", s, defaultAdminListen, true, true)
		}
	} else if !absent(ra.Listen) {
		listenOK = false
	}
	if s, ok := d.str(ra.Advertise, "advertise"); ok && s != "" {
		if d.hostPort(ra.Advertise.Range(), "admin advertised address", s, "statehost-1.internal:9464", false, false) {
			c.Admin.Advertise = s
		}
	}

	tokenOK := true // no token, or a valid one
	if s, ok := d.str(ra.Token, "token"); ok {
		if msg := checkToken(s); msg != "" {
			d.errorf(ra.Token.Range(), "Invalid admin token", "The admin token %s.", msg)
			tokenOK = false
		} else {
			c.Admin.Token = s
		}
	} else if !absent(ra.Token) {
		tokenOK = false
	}
	if env := os.Getenv(AdminTokenEnv); env != "" {
		// On the block, not on a token attribute: the snippet printed with the error would
		// show the file's token.
		if msg := checkToken(env); msg != "" {
			d.errorf(ra.DefRange, "Invalid admin token", "The admin token of the environment variable %s %s.", AdminTokenEnv, msg)
			tokenOK = false
		} else {
			c.Admin.Token, tokenOK = env, true
		}
	}
	c.Admin.MetricsPublic = d.boolean(ra.MetricsPublic, "metrics_public", false)

	if c.Admin.Listen != "" && listenOK && tokenOK && c.Admin.Token == "" && !loopback(c.Admin.Listen) {
		d.errorf(ra.Listen.Range(), "Admin listener without a token",
			"The admin listener %q is reachable from other machines (only 127.0.0.0/8, ::1 and localhost are loopback; no host, 0.0.0.0 and :: mean every interface), and its API deploys modules and reads the stores. Set admin.token (or the environment variable %s): every request must then carry it as \"Authorization: Bearer <token>\". Or listen on 127.0.0.1.",
			c.Admin.Listen, AdminTokenEnv)
	}
	if c.Admin.MetricsPublic && c.Admin.Token == "" && tokenOK {
		d.warnf(ra.MetricsPublic.Range(), "metrics_public not used",
			"metrics_public = true has no effect without an admin token: every endpoint of the admin listener, /metrics included, answers without one.")
	}
}

// checkToken returns what is wrong with an admin token ("" when nothing), to follow "The
// admin token ...". The token itself never appears in a message.
func checkToken(tok string) string {
	if tok == "" {
		return "is empty; leave admin.token out for no token (the listener must then be on loopback)"
	}
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; c < 0x21 || c > 0x7e {
			return "may contain only printable ASCII characters, without spaces: it is sent in the HTTP header \"Authorization: Bearer <token>\""
		}
	}
	return ""
}

// loopback reports whether the host of the "host:port" address addr is a loopback address:
// localhost, 127.0.0.0/8 or ::1. No host, 0.0.0.0 and :: (every interface) are not.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
