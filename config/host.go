package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/hashicorp/hcl/v2"
)

// checkLocal checks the configuration against this machine, as run would meet it: the state
// directory, the instance's directory in it and the embedded broker's data directory must be
// directories or creatable as such.
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
