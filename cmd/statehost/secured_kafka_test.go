package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/statehost/statehost/config"
	"github.com/statehost/statehost/internal/kafkaclient"
	"github.com/statehost/statehost/internal/kafkacluster"
	"github.com/statehost/statehost/internal/topictest"
	"github.com/statehost/statehost/internal/wordgen"
)

// securedBlock is the part of a kafka block that reaches a cluster of scripts/kafka up
// --security sasl_ssl with TLS (the CA file ca) and SCRAM-SHA-512 (the password in pwFile),
// its produced batches lz4.
func securedBlock(sec *kafkacluster.Security, ca, pwFile string) string {
	return fmt.Sprintf(`  compression = "lz4"
  tls {
    ca_file = %q
  }
  sasl {
    mechanism     = "SCRAM-SHA-512"
    username      = %q
    password_file = %q
  }
`, ca, sec.ScramUsername, pwFile)
}

// TestSecuredKafka runs the word count end to end under exactly-once through the SASL_SSL
// listener of an Apache Kafka cluster (TLS with the cluster's CA, SCRAM-SHA-512), the input
// produced with statehost produce --config; the changelog and the output hold the reference
// counts, read through the same listener, their batches lz4. Then the CLI round-trips records
// with each other SASL mechanism and TLS setting (securedSettings), and statehost run fails
// within seconds, naming the broker and the cause, for a wrong password, a wrong CA and plain
// text sent to the TLS port.
func TestSecuredKafka(t *testing.T) {
	if !kafkacluster.Requested() {
		t.Skipf("a SASL_SSL Apache Kafka cluster: set %s=1", kafkacluster.EnvVar)
	}
	bin := buildBinary(t)
	buildModules(t)
	c := kafkacluster.StartWith(t, kafkacluster.Options{Nodes: 1, Security: kafkacluster.SASLSSL})
	sec := c.Security()
	addr := sec.SASLSSLBrokers()[0]
	dir := t.TempDir()
	cfgPath := writeAppConfigWith(t, filepath.Join(dir, "app"), addr,
		appOptions{guarantee: "exactly_once", kafka: securedBlock(sec, sec.CAFile, sec.ScramPasswordFile)})

	app := startApp(t, bin, cfgPath, "secured")
	app.waitTasks(t, 90*time.Second)
	lines, ref := wordgen.Sentences(3000, 41)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "produce", "--config", cfgPath, "sentences")
	cmd.Stdin = strings.NewReader(strings.Join(lines, "\n") + "\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("statehost produce --config through SASL_SSL: %v\n%s", err, out)
	}

	cfg, diags := config.Load(cfgPath, config.Options{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	opts := kafkaclient.Opts(cfg.Kafka, []string{addr}, "test", nil)
	want := wordgen.Strings(ref)
	deadline := time.Now().Add(90 * time.Second)
	for {
		got, _ := topictest.LatestCommittedWith(t, opts, e2eChangelog)
		if maps.Equal(got, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the committed changelog has %d keys, want the %d of the reference", len(got), len(want))
		}
		time.Sleep(500 * time.Millisecond)
	}
	stopClean(t, app)
	if got, _ := topictest.LatestCommittedWith(t, opts, "word-counts"); !maps.Equal(got, want) {
		t.Errorf("the committed output has %d keys that differ from the reference's %d", len(got), len(want))
	}
	for _, topic := range []string{e2eChangelog, "word-counts"} {
		codecs := topictest.BatchCodecs(t, opts, topic)
		if codecs[3] == 0 || codecs[1]+codecs[2]+codecs[4] > 0 {
			t.Errorf("%s: batches by codec %v, want lz4 (3) and no other (0 are the transaction markers)", topic, codecs)
		}
	}

	// The other mechanisms and TLS settings, each through a configuration of its own.
	t.Run("settings", func(t *testing.T) { securedSettings(t, c) })

	// The mistakes, each a new instance of the application.
	const wrongPassword = "not-the-password"
	wrongPw := filepath.Join(dir, "wrong.password")
	if err := os.WriteFile(wrongPw, []byte(wrongPassword), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct {
		name, block, want string
		secret            string // the password of block, which must not be printed; "": none
	}{
		{"wrong password", securedBlock(sec, sec.CAFile, wrongPw),
			fmt.Sprintf("broker %s: SASL SCRAM-SHA-512 authentication of user", addr), wrongPassword},
		{"wrong CA", securedBlock(sec, sec.OtherCAFile, sec.ScramPasswordFile),
			fmt.Sprintf("broker %s: TLS: the broker's certificate is not signed by a CA of kafka.tls.ca_file %s", addr, sec.OtherCAFile), sec.ScramPassword},
		{"plain text to the TLS port", "",
			fmt.Sprintf("broker %s: the broker's listener speaks TLS, but the client sent plain text: add a kafka.tls block", addr), ""},
	} {
		t.Run(m.name, func(t *testing.T) {
			path := writeAppConfigWith(t, filepath.Join(t.TempDir(), "app"), addr, appOptions{kafka: m.block})
			begin := time.Now()
			p := startApp(t, bin, path, m.name)
			code := p.wait(t, 60*time.Second)
			took := time.Since(begin)
			stderr := p.stderr.String()
			if code != exitFailure || !strings.Contains(stderr, m.want) {
				t.Fatalf("statehost run exited %d after %v, want %d and an error with %q:\n%s", code, took, exitFailure, m.want, stderr)
			}
			if took > 30*time.Second {
				t.Errorf("statehost run took %v to fail, want seconds", took)
			}
			if m.secret != "" && strings.Contains(stderr, m.secret) { // p.stderr holds stdout too
				t.Errorf("statehost run printed the password %q", m.secret)
			}
			t.Logf("failed after %v", took.Round(time.Millisecond))
		})
	}
}

// securedSettings has the CLI connect to the SASL_SSL listener of c with each SASL mechanism
// and TLS setting that the word count of TestSecuredKafka does not use, each through a
// configuration of its own: produce --config writes keyed lines to a topic of its own,
// consume --config reads them back. A server_name that the brokers' certificate does not
// hold fails, naming it.
func securedSettings(t *testing.T, c *kafkacluster.Cluster) {
	sec := c.Security()
	addr := sec.SASLSSLBrokers()[0]
	scram512 := hclBlock("sasl", "mechanism", "SCRAM-SHA-512", "username", sec.ScramUsername, "password_file", sec.ScramPasswordFile)
	for _, m := range []struct{ name, block string }{
		{"PLAIN", hclBlock("tls", "ca_file", sec.CAFile) +
			hclBlock("sasl", "mechanism", "PLAIN", "username", sec.PlainUsername, "password_file", sec.PlainPasswordFile)},
		// A user with SCRAM-SHA-256 credentials only: SCRAM-SHA-512 would fail with it.
		{"SCRAM-SHA-256", hclBlock("tls", "ca_file", sec.CAFile) +
			hclBlock("sasl", "mechanism", "SCRAM-SHA-256", "username", sec.Scram256Username, "password_file", sec.Scram256PasswordFile)},
		{"OAUTHBEARER token file", hclBlock("tls", "ca_file", sec.CAFile) +
			hclBlock("sasl", "mechanism", "OAUTHBEARER", "token_file", sec.OAuthTokenFile)},
		// The brokers request a client certificate but do not require one: this shows that a
		// configuration with one connects; TestMutualTLS, on kfake, that it is presented.
		{"mTLS", hclBlock("tls", "ca_file", sec.CAFile, "cert_file", sec.ClientCertFile, "key_file", sec.ClientKeyFile) + scram512},
		// addr is 127.0.0.1: the brokers' certificate holds localhost too.
		{"server_name", hclBlock("tls", "ca_file", sec.CAFile, "server_name", "localhost") + scram512},
	} {
		t.Run(m.name, func(t *testing.T) {
			topic := strings.NewReplacer(" ", "-", "_", "-").Replace(strings.ToLower(m.name))
			createTopics(t, c.Brokers()[0], map[string]int{topic: 2}) // on the PLAINTEXT listener
			path := writeKafkaConfig(t, "secured", []string{addr}, m.block, "")
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			lines := []string{"k1\t" + m.name, "k2\tb", "k1\tc"}
			r := runCLI(ctx, strings.Join(lines, "\n")+"\n", "produce", "--config", path, "--key-separator", "\t", topic)
			if r.code != exitOK {
				t.Fatalf("produce --config with %s: %v", m.name, r)
			}
			r = runCLI(ctx, "", "consume", "--config", path, topic)
			slices.Sort(lines)
			if got := sortedLines(r.stdout); r.code != exitOK || !slices.Equal(got, lines) {
				t.Fatalf("consume --config with %s printed %q, want %q:\n%v", m.name, got, lines, r)
			}
		})
	}

	// The mechanism is the one asked for: the SCRAM-SHA-256 user has no SCRAM-SHA-512
	// credentials.
	t.Run("SCRAM-SHA-512 of a SCRAM-SHA-256 user", func(t *testing.T) {
		path := writeKafkaConfig(t, "secured", []string{addr}, hclBlock("tls", "ca_file", sec.CAFile)+
			hclBlock("sasl", "mechanism", "SCRAM-SHA-512", "username", sec.Scram256Username, "password_file", sec.Scram256PasswordFile), "")
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		r := runCLI(ctx, "", "consume", "--config", path, "scram-sha-512")
		want := fmt.Sprintf("broker %s: SASL SCRAM-SHA-512 authentication of user", addr)
		if r.code != exitFailure || !strings.Contains(r.stderr, want) {
			t.Fatalf("consume --config with SCRAM-SHA-512 for a SCRAM-SHA-256 user: %v\nwant exit %d and an error with %q", r, exitFailure, want)
		}
	})

	t.Run("wrong server_name", func(t *testing.T) {
		path := writeKafkaConfig(t, "secured", []string{addr},
			hclBlock("tls", "ca_file", sec.CAFile, "server_name", "kafka.invalid")+scram512, "")
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		r := runCLI(ctx, "", "consume", "--config", path, "server-name") // the check of the brokers comes first
		want := fmt.Sprintf("broker %s: TLS: the broker's certificate is not for this address", addr)
		if r.code != exitFailure || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "kafka.invalid") {
			t.Fatalf("consume --config with server_name kafka.invalid: %v\nwant exit %d and an error with %q naming kafka.invalid", r, exitFailure, want)
		}
	})
}
