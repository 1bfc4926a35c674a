package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/hashicorp/hcl/v2"
)

// checkLocal checks the configuration against this machine, as run would meet it: the state
// directory, the instance's directory in it and the embedded broker's data directory must be
// directories or creatable as such, and the listeners (admin, embedded broker) must not
// want the same address.
func (d *decoder) checkLocal(raw rawFile, body hcl.Body, c *Config) {
	stateRange, stateSet := attrRange(raw.StateDir, body.MissingItemRange())
	stateOK := !d.hasErrorAt(stateRange)
	if stateOK {
		what := "The state_dir " + c.StateDir
		if !stateSet {
			what = fmt.Sprintf("The state_dir %s (the default %q)", c.StateDir, defaultStateDir)
		}
		stateOK = d.checkDirectory(stateRange, what, c.StateDir)
	}
	if stateOK && c.ApplicationID != "" && checkApplicationID(c.ApplicationID) == "" {
		app := filepath.Join(c.StateDir, c.ApplicationID)
		d.checkDirectory(stateRange, fmt.Sprintf("The instance's state directory %s (<state_dir>/<application_id>)", app), app)
	}

	// The embedded broker runs without brokers; not when the brokers attribute is invalid.
	embedded := len(c.Kafka.Brokers) == 0 && (raw.Kafka == nil || absent(raw.Kafka.Brokers) || !d.hasErrorOverlapping(raw.Kafka.Brokers.Range()))
	if embedded && raw.EmbeddedBroker != nil && !absent(raw.EmbeddedBroker.DataDir) {
		if rng := raw.EmbeddedBroker.DataDir.Range(); !d.hasErrorAt(rng) {
			d.checkDirectory(rng, "The embedded broker's data_dir "+c.EmbeddedBroker.DataDir, c.EmbeddedBroker.DataDir)
		}
	} else if embedded && stateOK {
		d.checkDirectory(stateRange, fmt.Sprintf("The embedded broker's data_dir %s (the default <state_dir>/broker)", c.EmbeddedBroker.DataDir), c.EmbeddedBroker.DataDir)
	}

	d.checkListeners(raw, body, c, embedded)
}

// attrRange returns the range of an attribute's value and true, or def and false when it is
// absent.
func attrRange(expr hcl.Expression, def hcl.Range) (hcl.Range, bool) {
	if absent(expr) {
		return def, false
	}
	return expr.Range(), true
}

// checkDirectory records an error on rng when dir is not a directory, or cannot be created
// as one because the nearest of its parents that exists is not a directory; what names dir
// in the message. It reports whether dir is fine.
func (d *decoder) checkDirectory(rng hcl.Range, what, dir string) bool {
	for p := dir; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		switch {
		case err == nil && fi.IsDir():
			return true
		case err == nil && p == dir:
			d.errorf(rng, "Not a directory", "%s is not a directory (it is a %s).", what, fileKind(fi))
			return false
		case err == nil:
			d.errorf(rng, "Not a directory", "%s cannot be created: %s is not a directory (it is a %s).", what, p, fileKind(fi))
			return false
		case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR):
			d.errorf(rng, "Directory not usable", "%s cannot be used: %v.", what, err)
			return false
		case p == filepath.Dir(p):
			return true // no parent exists: nothing to say
		}
	}
}

// fileKind names what a file that is not a directory is, for messages.
func fileKind(fi fs.FileInfo) string {
	switch m := fi.Mode(); {
	case m.IsRegular():
		return "file"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}

// checkListeners refuses listeners that want the same address: the admin listener and the
// embedded broker's when it runs, or the admin listener and a broker of kafka.brokers on a
// loopback address (a broker on this machine holds that address already). Each listener set
// in the file gets the error.
func (d *decoder) checkListeners(raw rawFile, body hcl.Body, c *Config, embedded bool) {
	if c.Admin.Listen == "" {
		return
	}
	var adminExpr hcl.Expression
	if raw.Admin != nil {
		adminExpr = raw.Admin.Listen
	}
	// An invalid address (already reported) clashes with nothing: listenersClash.
	adminRange, adminSet := attrRange(adminExpr, body.MissingItemRange())
	admin := fmt.Sprintf("admin listener %q", c.Admin.Listen)
	if !adminSet {
		admin += " (the default admin.listen)"
	}
	const fix = "the second to start would fail with \"address already in use\". Give one of them another port."

	if embedded {
		var brokerExpr hcl.Expression
		if raw.EmbeddedBroker != nil {
			brokerExpr = raw.EmbeddedBroker.Listen
		}
		brokerRange, brokerSet := attrRange(brokerExpr, body.MissingItemRange())
		if !listenersClash(c.Admin.Listen, c.EmbeddedBroker.Listen) {
			return
		}
		broker := fmt.Sprintf("embedded broker's listener %q", c.EmbeddedBroker.Listen)
		if !brokerSet {
			broker += " (the default embedded_broker.listen)"
		}
		if adminSet {
			d.errorf(adminRange, "Listen address clash", "The %s wants the address of the %s, which runs in the same process because kafka.brokers is empty: %s", admin, broker, fix)
		}
		if brokerSet {
			d.errorf(brokerRange, "Listen address clash", "The %s wants the address of the %s: %s", broker, admin, fix)
		}
		return
	}
	for _, b := range c.Kafka.Brokers {
		if loopback(b) && listenersClash(c.Admin.Listen, b) {
			rng := adminRange
			if !adminSet {
				rng = c.Kafka.Range
			}
			d.errorf(rng, "Listen address clash", "The %s wants the address of the broker %q of kafka.brokers, which is on this machine (a loopback address) and listens there already: the admin listener would fail with \"address already in use\". Give it another port.", admin, b)
		}
	}
}

// listenersClash reports whether listeners on the valid "host:port" addresses a and b would
// want the same port of the same address: the same port, not 0 (any free port), on hosts
// that overlap.
func listenersClash(a, b string) bool {
	ha, pa, errA := net.SplitHostPort(a)
	hb, pb, errB := net.SplitHostPort(b)
	na, _ := strconv.Atoi(pa)
	nb, _ := strconv.Atoi(pb)
	if errA != nil || errB != nil || na <= 0 || na > 65535 || na != nb {
		return false
	}
	return listenHosts(ha).overlaps(listenHosts(hb))
}

// listenHost is the set of addresses a listener's host means.
type listenHost struct {
	all4, all6 bool     // every IPv4, IPv6 address
	ips        []net.IP // these addresses
	name       string   // a host name other than localhost, not resolved (lower case)
}

// listenHosts returns what host means to a listener: no host and "::" every address (Go
// listens on both families there), "0.0.0.0" every IPv4 address, localhost 127.0.0.1 and
// ::1.
func listenHosts(host string) listenHost {
	switch ip := net.ParseIP(host); {
	case host == "" || ip != nil && ip.Equal(net.IPv6unspecified):
		return listenHost{all4: true, all6: true}
	case ip != nil && ip.Equal(net.IPv4zero):
		return listenHost{all4: true}
	case ip != nil:
		return listenHost{ips: []net.IP{ip}}
	case strings.EqualFold(host, "localhost"):
		return listenHost{ips: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}}
	}
	return listenHost{name: strings.ToLower(host)}
}

// overlaps reports whether h and o share an address. A host name (not resolved) overlaps
// the same name, and every address of a family: it names an address of this machine.
func (h listenHost) overlaps(o listenHost) bool {
	covers := func(h, o listenHost) bool {
		if h.all4 && h.all6 || (h.all4 || h.all6) && o.name != "" {
			return true
		}
		for _, ip := range o.ips {
			if h.all4 && ip.To4() != nil || h.all6 && ip.To4() == nil {
				return true
			}
		}
		return h.all4 && o.all4 || h.all6 && o.all6
	}
	if covers(h, o) || covers(o, h) {
		return true
	}
	for _, a := range h.ips {
		for _, b := range o.ips {
			if a.Equal(b) {
				return true
			}
		}
	}
	return h.name != "" && h.name == o.name
}
