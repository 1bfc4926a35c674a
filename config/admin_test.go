package config_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/statehost/statehost/config"
)

// adminConfig is a configuration whose admin block's body is %s, on line 3 onwards.
const adminConfig = `application_id = "app"
admin {
%s
}
`

// loadAdmin loads adminConfig with body and returns its admin settings and diagnostics.
func loadAdmin(t *testing.T, body string) (config.Admin, hcl.Diagnostics, string) {
	t.Helper()
	_, path := writeConfig(t, fmt.Sprintf(adminConfig, body))
	c, diags := config.Load(path, config.Options{})
	if c == nil {
		t.Fatalf("nil config: %v", diags)
	}
	return c.Admin, diags, path
}

// TestAdminLoopback: a listener on a loopback address needs no token; any other needs one,
// and the error is on the listen attribute's value.
func TestAdminLoopback(t *testing.T) {
	t.Setenv(config.AdminTokenEnv, "")
	for _, listen := range []string{"127.0.0.1:9464", "127.3.4.5:0", "[::1]:9464", "localhost:9464", "LocalHost:1", ""} {
		a, diags, _ := loadAdmin(t, fmt.Sprintf("  listen = %q", listen))
		if len(diags) != 0 || a.Listen != listen || a.Token != "" || a.MetricsPublic {
			t.Errorf("listen %q: %+v, %v; want no diagnostics and no token", listen, a, diags)
		}
	}
	for _, listen := range []string{"0.0.0.0:9464", ":9464", "[::]:9464", "10.1.2.3:9464", "admin.lan:9464", "[::ffff:10.0.0.1]:80", "localhost.evil.example:9464"} {
		line := fmt.Sprintf("  listen = %q", listen)
		_, diags, path := loadAdmin(t, line)
		if len(diags) != 1 || diags[0].Severity != hcl.DiagError || diags[0].Summary != "Admin listener without a token" {
			t.Errorf("listen %q: %v, want one error", listen, diags)
			continue
		}
		// The value of the attribute: "0.0.0.0:9464" on line 3, quotes included.
		sameRange(t, listen, *diags[0].Subject, rng(path, 3, 12, 3, 12+len(listen)+2))
		if !strings.Contains(diags[0].Detail, fmt.Sprintf("%q", listen)) {
			t.Errorf("listen %q: detail %q does not name the address", listen, diags[0].Detail)
		}
	}
}

// TestAdminToken: with a token, any address may listen; the token and metrics_public are
// decoded; the environment variable gives or overrides the token; a bad token is an error
// that never shows it.
func TestAdminToken(t *testing.T) {
	t.Setenv(config.AdminTokenEnv, "")
	a, diags, _ := loadAdmin(t, `  listen = "0.0.0.0:9464"
  token  = "s3cr3t-t0ken"
  metrics_public = true`)
	if len(diags) != 0 || a != (config.Admin{Listen: "0.0.0.0:9464", Token: "s3cr3t-t0ken", MetricsPublic: true}) {
		t.Errorf("a token: %+v, %v", a, diags)
	}
	a, diags, _ = loadAdmin(t, `  token = "loop"`)
	if len(diags) != 0 || a != (config.Admin{Listen: "127.0.0.1:9464", Token: "loop"}) {
		t.Errorf("a token on the default listener: %+v, %v", a, diags)
	}

	t.Setenv(config.AdminTokenEnv, "from-the-env")
	a, diags, _ = loadAdmin(t, `  listen = ":9464"`)
	if len(diags) != 0 || a.Token != "from-the-env" {
		t.Errorf("%s set, no admin.token: %+v, %v; want the environment's token", config.AdminTokenEnv, a, diags)
	}
	a, diags, _ = loadAdmin(t, `  listen = ":9464"
  token  = "from-the-file"`)
	if len(diags) != 0 || a.Token != "from-the-env" {
		t.Errorf("%s set and admin.token: %+v, %v; want the environment's token", config.AdminTokenEnv, a, diags)
	}

	t.Setenv(config.AdminTokenEnv, "bad token\n")
	_, diags, path := loadAdmin(t, `  listen = ":9464"
  token  = "from-the-file"`)
	if len(diags) != 1 || diags[0].Summary != "Invalid admin token" || !strings.Contains(diags[0].Detail, config.AdminTokenEnv) {
		t.Fatalf("a bad token in %s: %v, want one error naming it (and no other: the listener has a token)", config.AdminTokenEnv, diags)
	}
	// On the admin block, not on the file's token, which the printed snippet would show.
	sameRange(t, "env token error", *diags[0].Subject, rng(path, 2, 1, 2, 6))
	_, diags, path = loadAdmin(t, `  listen = ":9464"`)
	if len(diags) != 1 || diags[0].Summary != "Invalid admin token" {
		t.Fatalf("a bad token in %s, no admin.token: %v", config.AdminTokenEnv, diags)
	}
	sameRange(t, "env token error without token attribute", *diags[0].Subject, rng(path, 2, 1, 2, 6))
	if strings.Contains(diags[0].Detail, "bad token") {
		t.Errorf("the diagnostic shows the token: %q", diags[0].Detail)
	}
}
