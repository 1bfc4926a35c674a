package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/config"
	"github.com/statehost/statehost/internal/kafkaclient"
	"github.com/statehost/statehost/internal/testcerts"
)

// securedChangelog is the changelog of the store of securedConfig.
const securedChangelog = "secured-counts-changelog"

// securedConfig writes a configuration whose kafka block reaches brokers with TLS (the CA
// file ca, and the further attributes tlsAttrs of the tls block, keys and values) and
// SCRAM-SHA-512 as user statehost with password, and returns its path. Its processor count
// has a logged store, counts, whose changelog is securedChangelog.
func securedConfig(t *testing.T, brokers []string, ca, password string, tlsAttrs ...string) string {
	t.Helper()
	dir := t.TempDir()
	pw := filepath.Join(dir, "password")
	if err := os.WriteFile(pw, []byte(password), 0o600); err != nil {
		t.Fatal(err)
	}
	module := filepath.Join(dir, "count.wasm")
	if err := os.WriteFile(module, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	kafka := hclBlock("tls", append([]string{"ca_file", ca}, tlsAttrs...)...) +
		hclBlock("sasl", "mechanism", "SCRAM-SHA-512", "username", "statehost", "password_file", pw)
	rest := fmt.Sprintf(`state_dir = %q
processor "count" {
  module = %q
  inputs = ["lines"]
  store "counts" {}
}
`, filepath.Join(dir, "state"), module)
	return writeKafkaConfig(t, "secured", brokers, kafka, rest)
}

// TestProduceConsumeSecured produces and consumes through a broker that takes only TLS with
// SCRAM-SHA-512, with the settings of --config, and inspects the changelog offsets through
// it; a wrong password fails at once, naming the broker, and is never printed.
func TestProduceConsumeSecured(t *testing.T) {
	const password, wrongPassword = "pw-of-statehost", "not-the-pw-of-statehost"
	certs := testcerts.New(t)
	brokers := []string{certs.SecureKfake(t, []testcerts.User{{Mechanism: "SCRAM-SHA-512", Name: "statehost", Password: password}})}
	path := securedConfig(t, brokers, certs.CAFile, password)
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
	for topic, parts := range map[string]int32{"lines": 2, securedChangelog: 2} {
		if _, err := kadm.NewClient(cl).CreateTopic(ctx, parts, -1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	noSecret := func(what string, r result, secret string) {
		t.Helper()
		if strings.Contains(r.stdout+r.stderr, secret) {
			t.Errorf("%s printed the password %q:\n%v", what, secret, r)
		}
	}

	r := runCLI(ctx, "a\nb\n", "produce", "--config", path, "lines")
	if r.code != 0 || !strings.Contains(r.stderr, "produced 2 records to lines") {
		t.Fatalf("produce --config: %v", r)
	}
	noSecret("produce --config", r, password)
	r = runCLI(ctx, "", "consume", "--config", path, "lines")
	if r.code != 0 || strings.Join(sortedLines(r.stdout), ",") != "\ta,\tb" {
		t.Fatalf("consume --config: %v", r)
	}
	noSecret("consume --config", r, password)
	// Without the settings, the TLS port refuses plain text.
	r = runCLI(ctx, "", "consume", "--brokers", brokers[0], "lines")
	if r.code != exitFailure || !strings.Contains(r.stderr, "broker "+brokers[0]+": the broker closed the connection at the first request") {
		t.Fatalf("consume without --config: %v", r)
	}

	// inspect reads the changelog's offsets through the same settings: 3 records, none
	// restored locally (the application never ran), so a restore would read all 3.
	r = runCLI(ctx, "k1=1\nk2=2\nk3=3\n", "produce", "--config", path, "--key-separator", "=", securedChangelog)
	if r.code != 0 {
		t.Fatalf("produce --config to the changelog: %v", r)
	}
	rep, r := inspectJSON(t, path)
	noSecret("inspect --config", r, password)
	if r.code != exitOK || rep.BrokerError != "" || len(rep.Problems) > 0 || strings.Join(rep.Brokers, ",") != brokers[0] {
		t.Fatalf("inspect --config: brokers %q, broker error %q, problems %q:\n%v", rep.Brokers, rep.BrokerError, rep.Problems, r)
	}
	var records int64
	for _, c := range rep.Changelogs {
		if c.Topic != securedChangelog || c.Processor != "count" || c.Store != "counts" || deref(c.StartOffset) != "0" ||
			c.EndOffset == nil || c.Checkpoint != nil || deref(c.Lag) != deref(c.EndOffset) {
			t.Errorf("inspect --config: changelog partition %+v (start %s, end %s, lag %s), want %s of count/counts from offset 0, no checkpoint, its end the lag",
				c, deref(c.StartOffset), deref(c.EndOffset), deref(c.Lag), securedChangelog)
			continue
		}
		records += *c.EndOffset
	}
	if len(rep.Changelogs) != 2 || records != 3 {
		t.Errorf("inspect --config: %d changelog partitions holding %d records, want 2 holding 3", len(rep.Changelogs), records)
	}

	bad := securedConfig(t, brokers, certs.CAFile, wrongPassword)
	r = runCLI(context.Background(), "a\n", "produce", "--config", bad, "lines")
	if r.code != exitFailure || !strings.Contains(r.stderr, "broker "+brokers[0]+":") {
		t.Fatalf("produce with a wrong password: %v", r)
	}
	noSecret("produce with a wrong password", r, wrongPassword)
	rep, r = inspectJSON(t, bad)
	if r.code != exitOK || !strings.Contains(rep.BrokerError, "broker "+brokers[0]+":") || len(rep.Changelogs) != 0 {
		t.Errorf("inspect with a wrong password: broker error %q, %d changelog partitions; want the broker's refusal, none:\n%v",
			rep.BrokerError, len(rep.Changelogs), r)
	}
	noSecret("inspect with a wrong password", r, wrongPassword)
}

// TestMutualTLS produces and consumes through a broker that requires a client certificate
// signed by its CA, with the kafka.tls cert_file and key_file of --config; without them the
// broker ends the handshake, and the command fails at once, naming the broker and the cause.
func TestMutualTLS(t *testing.T) {
	const password = "pw-of-statehost"
	certs := testcerts.New(t)
	brokers := []string{certs.SecureKfake(t, []testcerts.User{{Mechanism: "SCRAM-SHA-512", Name: "statehost", Password: password}},
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{certs.Server}, MinVersion: tls.VersionTLS12,
			ClientCAs: certs.ClientCAs, ClientAuth: tls.RequireAndVerifyClientCert}),
		kfake.SeedTopics(2, "lines"))}
	ctx := testContext(t)

	path := securedConfig(t, brokers, certs.CAFile, password, "cert_file", certs.ClientCert, "key_file", certs.ClientKey)
	if r := runCLI(ctx, "a\nb\n", "produce", "--config", path, "lines"); r.code != exitOK {
		t.Fatalf("produce --config with a client certificate: %v", r)
	}
	r := runCLI(ctx, "", "consume", "--config", path, "lines")
	if r.code != exitOK || strings.Join(sortedLines(r.stdout), ",") != "\ta,\tb" {
		t.Fatalf("consume --config with a client certificate: %v", r)
	}

	r = runCLI(ctx, "", "consume", "--config", securedConfig(t, brokers, certs.CAFile, password), "lines")
	if r.code != exitFailure || !strings.Contains(r.stderr, "broker "+brokers[0]+":") || !strings.Contains(r.stderr, "certificate required") {
		t.Fatalf("consume --config without a client certificate: %v", r)
	}
}
