package config_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/statehost/statehost/config"
	"github.com/statehost/statehost/internal/testcerts"
)

// writeKafkaConfig writes a configuration whose kafka block is block, with an empty module
// beside it, and returns its path.
func writeKafkaConfig(t *testing.T, block string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "count.wasm"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "statehost.hcl")
	src := "application_id = \"secured\"\n\nkafka {\n" + block + "\n}\n\nprocessor \"count\" {\n  module = \"count.wasm\"\n  inputs = [\"words\"]\n}\n"
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestKafkaSettings decodes every setting of the kafka block, TLS with a client certificate
// and SCRAM with a password file.
func TestKafkaSettings(t *testing.T) {
	certs := testcerts.New(t)
	pwFile := filepath.Join(t.TempDir(), "password")
	const password = "s3cret-Pa55word"
	if err := os.WriteFile(pwFile, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := writeKafkaConfig(t, fmt.Sprintf(`
  brokers            = ["kafka-1:9093", "kafka-2:9093"]
  client_id          = "wc-prod"
  rack               = "eu-west-1a"
  compression        = "zstd"
  linger             = "20ms"
  batch_size         = "256KiB"
  fetch_max_bytes    = "8MiB"
  request_timeout    = "30s"
  replication_factor = 3
  tls {
    ca_file     = %q
    cert_file   = %q
    key_file    = %q
    server_name = "kafka.internal"
  }
  sasl {
    mechanism     = "SCRAM-SHA-512"
    username      = "wordcount"
    password_file = %q
  }`, certs.CAFile, certs.ClientCert, certs.ClientKey, pwFile))
	c, diags := config.Load(path, config.Options{})
	if len(diags) > 0 {
		t.Fatalf("Load: %v", diags)
	}
	k := c.Kafka
	if k.ClientID != "wc-prod" || k.Rack != "eu-west-1a" || k.Compression != config.CompressionZstd ||
		k.Linger != 20*time.Millisecond || k.BatchSize != 256<<10 || k.FetchMaxBytes != 8<<20 ||
		k.RequestTimeout != 30*time.Second || k.ReplicationFactor != 3 || k.ReplicationFactorRange.Start.Line != 13 {
		t.Errorf("settings = %+v", k)
	}
	if k.TLS == nil || k.TLS.CAFile != certs.CAFile || k.TLS.Config.RootCAs == nil || len(k.TLS.Config.Certificates) != 1 ||
		k.TLS.Config.ServerName != "kafka.internal" || k.TLS.Config.InsecureSkipVerify {
		t.Errorf("tls = %+v", k.TLS)
	}
	if k.SASL == nil || k.SASL.Mechanism != config.SASLScramSHA512 || k.SASL.Username != "wordcount" || k.SASL.Password.Reveal() != password {
		t.Errorf("sasl = %+v, password %q", k.SASL, k.SASL.Password.Reveal())
	}

	// The password shows nowhere: not in fmt's verbs, JSON, nor in the diagnostics.
	js, err := json.Marshal(c.Kafka)
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{fmt.Sprint(c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c.Kafka), fmt.Sprintf("%+v %s %q", *k.SASL, k.SASL.Password, k.SASL.Password), string(js)} {
		if strings.Contains(out, password) {
			t.Errorf("the password is printed: %s", out)
		}
	}
	if !strings.Contains(string(js), `"Password":"[redacted]"`) {
		t.Errorf("JSON of the kafka block: %s, want the password [redacted]", js)
	}
}

// TestKafkaPasswordEnv reads the password of password_env, and writes no secret into the
// diagnostics of a bad block; linger "0s" stays zero.
func TestKafkaPasswordEnv(t *testing.T) {
	const password = "env-Pa55word"
	t.Setenv("STATEHOST_TEST_KAFKA_PASSWORD", password)
	path := writeKafkaConfig(t, `
  brokers = ["kafka-1:9092"]
  linger  = "0s"
  sasl {
    mechanism    = "PLAIN"
    username     = "wordcount"
    password_env = "STATEHOST_TEST_KAFKA_PASSWORD"
  }`)
	c, diags := config.Load(path, config.Options{})
	if diags.HasErrors() || len(diags) != 1 || diags[0].Summary != "Password sent in plain text" {
		t.Fatalf("Load: %v, want only the warning that PLAIN without TLS sends the password in plain text", diags)
	}
	if c.Kafka.Linger != 0 {
		t.Errorf("linger = %v, want 0 (no wait, not the default)", c.Kafka.Linger)
	}
	if c.Kafka.SASL.Password.Reveal() != password || c.Kafka.SASL.Mechanism != config.SASLPlain {
		t.Errorf("sasl = %+v", c.Kafka.SASL)
	}
	var buf bytes.Buffer
	if err := config.WriteDiagnostics(&buf, c.Files, diags); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), password) {
		t.Errorf("the diagnostics print the password:\n%s", buf.String())
	}
}

// TestKafkaOAuthBearer takes the token file of OAUTHBEARER, read again at each use.
func TestKafkaOAuthBearer(t *testing.T) {
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("  eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := writeKafkaConfig(t, fmt.Sprintf(`
  brokers = ["kafka-1:9093"]
  tls {}
  sasl {
    mechanism  = "OAUTHBEARER"
    token_file = %q
  }`, tok))
	c, diags := config.Load(path, config.Options{})
	if len(diags) > 0 {
		t.Fatalf("Load: %v", diags)
	}
	if c.Kafka.SASL.TokenFile != tok || c.Kafka.TLS == nil || c.Kafka.TLS.Config.RootCAs != nil {
		t.Errorf("kafka = %+v, sasl %+v", c.Kafka, c.Kafka.SASL)
	}
	got, err := config.ReadTokenFile(tok)
	if err != nil || got != "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0." {
		t.Errorf("ReadTokenFile = %q, %v", got, err)
	}
}
