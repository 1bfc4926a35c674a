package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/config"
	"github.com/statehost/statehost/internal/kafkaclient"
	"github.com/statehost/statehost/internal/testcerts"
)

// securedConfig writes a configuration whose kafka block reaches brokers with TLS (the CA
// file ca) and SCRAM-SHA-512 as user statehost with password, and returns its path.
func securedConfig(t *testing.T, brokers []string, ca, password string) string {
	t.Helper()
	dir := t.TempDir()
	pw := filepath.Join(dir, "password")
	if err := os.WriteFile(pw, []byte(password), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "count.wasm"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	quoted := make([]string, len(brokers))
	for i, b := range brokers {
		quoted[i] = fmt.Sprintf("%q", b)
	}
	src := fmt.Sprintf(`application_id = "secured"
kafka {
  brokers = [%s]
  tls {
    ca_file = %q
  }
  sasl {
    mechanism     = "SCRAM-SHA-512"
    username      = "statehost"
    password_file = %q
  }
}
processor "count" {
  module = "count.wasm"
  inputs = ["lines"]
}
`, strings.Join(quoted, ", "), ca, pw)
	path := filepath.Join(dir, "statehost.hcl")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestProduceConsumeSecured produces and consumes through a broker that takes only TLS with
// SCRAM-SHA-512, with the settings of --config; a wrong password fails at once, naming the
// broker, and is not printed.
func TestProduceConsumeSecured(t *testing.T) {
	certs := testcerts.New(t)
	brokers := []string{certs.SecureKfake(t, []testcerts.User{{Mechanism: "SCRAM-SHA-512", Name: "statehost", Password: "pw-of-statehost"}})}
	path := securedConfig(t, brokers, certs.CAFile, "pw-of-statehost")
	cfg, diags := config.Load(path, config.Options{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	cl, err := kgo.NewClient(kafkaclient.Opts(cfg.Kafka, brokers, "test", nil)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := testContext(t)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 2, -1, nil, "lines"); err != nil {
		t.Fatal(err)
	}

	r := runCLI(ctx, "a\nb\n", "produce", "--config", path, "lines")
	if r.code != 0 || !strings.Contains(r.stderr, "produced 2 records to lines") {
		t.Fatalf("produce --config: %v", r)
	}
	r = runCLI(ctx, "", "consume", "--config", path, "lines")
	if r.code != 0 || strings.Join(sortedLines(r.stdout), ",") != "\ta,\tb" {
		t.Fatalf("consume --config: %v", r)
	}
	// Without the settings, the TLS port refuses plain text.
	r = runCLI(ctx, "", "consume", "--brokers", brokers[0], "lines")
	if r.code != exitFailure || !strings.Contains(r.stderr, "broker "+brokers[0]+": the broker closed the connection at the first request") {
		t.Fatalf("consume without --config: %v", r)
	}

	const wrongPassword = "not-the-pw-of-statehost"
	bad := securedConfig(t, brokers, certs.CAFile, wrongPassword)
	r = runCLI(context.Background(), "a\n", "produce", "--config", bad, "lines")
	if r.code != exitFailure || !strings.Contains(r.stderr, "broker "+brokers[0]+":") {
		t.Fatalf("produce with a wrong password: %v", r)
	}
	if strings.Contains(r.stdout+r.stderr, wrongPassword) {
		t.Errorf("produce with a wrong password printed it:\n%v", r)
	}
}
