package config_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/statehost/statehost/config"
)

// TestModuleNotReadable: a module file that exists but cannot be read is reported as such,
// with the operating system's error, not as an invalid module.
func TestModuleNotReadable(t *testing.T) {
	// /proc/self/mem is a regular file whose first byte cannot be read (EIO), even by root.
	if _, err := os.Stat("/proc/self/mem"); err != nil {
		t.Skip("no /proc/self/mem:", err)
	}
	dir, path := writeConfig(t, `application_id = "unreadable"
processor "mem" {
  module = "mem.wasm"
  inputs = ["in"]
}
processor "locked" {
  module = "locked.wasm"
  inputs = ["in"]
}
`)
	if err := os.Symlink("/proc/self/mem", filepath.Join(dir, "mem.wasm")); err != nil {
		t.Fatal(err)
	}
	locked := filepath.Join(dir, "locked.wasm")
	if err := os.WriteFile(locked, []byte("\x00asm"), 0o000); err != nil {
		t.Fatal(err)
	}
	checked := 0
	_, diags := config.Load(path, config.Options{CheckModule: func(string) error { checked++; return nil }})
	got := map[string]string{} // line:col -> summary | detail
	for _, d := range diags {
		got[fmt.Sprintf("%d:%d", d.Subject.Start.Line, d.Subject.Start.Column)] = d.Summary + " | " + d.Detail
	}
	want := map[string]string{
		"3:12": "Module file not readable | The module file " + filepath.Join(dir, "mem.wasm") + " cannot be read: read " + filepath.Join(dir, "mem.wasm") + ": input/output error.",
	}
	if os.Geteuid() != 0 { // root reads a file without read permission
		want["7:12"] = "Module file not readable | The module file " + locked + " cannot be read: open " + locked + ": permission denied."
	} else {
		delete(got, "7:12")
		checked--
	}
	for pos, w := range want {
		if got[pos] != w {
			t.Errorf("diagnostic at %s:\n got %q\nwant %q", pos, got[pos], w)
		}
	}
	for pos, g := range got {
		if _, ok := want[pos]; !ok {
			t.Errorf("unexpected diagnostic at %s: %s", pos, g)
		}
	}
	if checked != 0 {
		t.Errorf("CheckModule was called for %d unreadable modules", checked)
	}
}

// TestListenClashes: the admin listener and the embedded broker's clash when they want the
// same port of an address they share, and only then.
func TestListenClashes(t *testing.T) {
	for _, tc := range []struct {
		admin, broker string
		clash         bool
	}{
		{"127.0.0.1:9092", "127.0.0.1:9092", true},
		{"127.0.0.1:9092", "127.0.0.1:09092", true},
		{"localhost:9092", "[::1]:9092", true},
		{":9092", "[::1]:9092", true},
		{"[::]:9092", "0.0.0.0:9092", true},
		{"0.0.0.0:9092", "statehost-1:9092", true},
		{"Statehost-1:9092", "statehost-1:9092", true},
		{"127.0.0.1:9092", "127.0.0.2:9092", false},
		{"0.0.0.0:9092", "[::1]:9092", false},
		{"statehost-1:9092", "statehost-2:9092", false},
		{"127.0.0.1:9093", "127.0.0.1:9092", false},
		{"127.0.0.1:0", "127.0.0.1:0", false},
	} {
		_, path := writeConfig(t, fmt.Sprintf(`application_id = "ports"
embedded_broker {
  listen = %q
}
admin {
  listen = %q
  token  = "s3cret-for-tests"
}
`, tc.broker, tc.admin))
		_, diags := config.Load(path, config.Options{})
		var clashes []string
		for _, d := range diags {
			if d.Summary == "Listen address clash" {
				clashes = append(clashes, fmt.Sprintf("%d:%d", d.Subject.Start.Line, d.Subject.Start.Column))
			} else {
				t.Errorf("admin %q, broker %q: unexpected diagnostic %s: %s", tc.admin, tc.broker, d.Summary, d.Detail)
			}
		}
		want := ""
		if tc.clash {
			want = "3:12 6:12" // both listeners
		}
		if got := strings.Join(clashes, " "); got != want {
			t.Errorf("admin %q, broker %q: clashes at %q, want %q", tc.admin, tc.broker, got, want)
		}
	}
}
