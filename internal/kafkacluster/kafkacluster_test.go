package kafkacluster_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"flag"
	"math/big"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/statehost/statehost/internal/kafkacluster"
	"github.com/statehost/statehost/internal/topictest"
)

var kafkaFlag = flag.Bool("kafka", false, "run the tests on a real Kafka cluster, as "+kafkacluster.EnvVar+"=1 does")

func TestMain(m *testing.M) {
	flag.Parse()
	if *kafkaFlag {
		os.Setenv(kafkacluster.EnvVar, "1")
	}
	os.Exit(m.Run())
}

// TestThreeNodes runs a 3-node cluster through a node's SIGKILL and restart, then through a
// SIGKILL of every node and a restart of the cluster: a topic with 3 replicas, 2 of them in
// sync, takes acks=all writes while node 2 is down and holds every record afterwards.
func TestThreeNodes(t *testing.T) {
	c := kafkacluster.Start(t, 3)
	adm := admin(t, c)
	const topic = "replicated"
	createTopic(t, adm, topic, 3, map[string]*string{"min.insync.replicas": ptr("2")})
	produce(t, c, topic, "before")
	if got := values(t, c, topic); !slices.Equal(got, []string{"before"}) {
		t.Fatalf("read %q, want [before]", got)
	}
	checkBrokers(t, adm, 1, 2, 3)

	// The internal topics take 3 replicas; a group commit creates __consumer_offsets.
	commitGroup(t, c, topic)
	checkReplicas(t, adm, "__consumer_offsets", 3)
	// A topic created with the broker's default replication factor, as statehost's are.
	createTopic(t, adm, "defaulted", -1, nil)
	checkReplicas(t, adm, "defaulted", 3)

	c.Kill(t, 2)
	produce(t, c, topic, "while-2-down") // acks=all: 2 in sync of 3 suffice
	c.StartNode(t, 2)
	checkBrokers(t, adm, 1, 2, 3)
	produce(t, c, topic, "after")
	if got := values(t, c, topic); !slices.Equal(got, []string{"before", "while-2-down", "after"}) {
		t.Fatalf("read %q, want [before while-2-down after]", got)
	}

	// The whole cluster SIGKILLed at once, then started again on its data.
	c.KillAll(t)
	checkClosed(t, c)
	c.StartAll(t)
	checkBrokers(t, adm, 1, 2, 3)
	produce(t, c, topic, "after-all")
	if got := values(t, c, topic); !slices.Equal(got, []string{"before", "while-2-down", "after", "after-all"}) {
		t.Fatalf("read %q, want [before while-2-down after after-all]", got)
	}

	c.Stop(t)
	checkClosed(t, c)
}

// TestOneNode runs a 1-node cluster through a SIGKILL and a restart on its data.
func TestOneNode(t *testing.T) {
	c := kafkacluster.Start(t, 1)
	adm := admin(t, c)
	const topic = "single"
	createTopic(t, adm, topic, -1, nil)
	checkReplicas(t, adm, topic, 1)
	produce(t, c, topic, "one")
	c.Kill(t, 1)
	c.StartNode(t, 1)
	checkBrokers(t, adm, 1)
	produce(t, c, topic, "two")
	if got := values(t, c, topic); !slices.Equal(got, []string{"one", "two"}) {
		t.Fatalf("read %q, want [one two]", got)
	}
	c.Stop(t)
	checkClosed(t, c)
}

// TestCleanupKills: the cleanup of a test that leaves its cluster running kills its nodes
// (down --kill), and they are gone once the test has ended.
func TestCleanupKills(t *testing.T) {
	if !kafkacluster.Requested() {
		t.Skipf("a real Kafka cluster: set %s=1", kafkacluster.EnvVar)
	}
	var c *kafkacluster.Cluster
	t.Run("leaves it running", func(t *testing.T) { c = kafkacluster.Start(t, 3) })
	if c == nil {
		t.Fatal("the subtest started no cluster")
	}
	checkClosed(t, c)
}

// TestSASLSSL connects franz-go to the SASL_SSL listener of a 1-node cluster started with
// SASLSSL, over TLS that trusts the cluster's CA, with each SASL mechanism, and with mutual
// TLS besides SCRAM; each client reads the metadata (which names the SASL_SSL listener) and
// produces a record, and a secured consumer reads them all back. It also checks that a wrong
// SCRAM password, an unrelated CA and an untrusted client certificate fail, quickly.
func TestSASLSSL(t *testing.T) {
	c := kafkacluster.StartWith(t, kafkacluster.Options{Nodes: 1, Security: kafkacluster.SASLSSL})
	sec := c.Security()
	if sec == nil {
		t.Fatal("Security() is nil on a cluster started with SASLSSL")
	}
	if c.Bootstrap() != sec.PlaintextBootstrap || sec.SASLSSLBootstrap == sec.PlaintextBootstrap {
		t.Fatalf("Bootstrap() %q, PLAINTEXT %q, SASL_SSL %q: want Bootstrap() the PLAINTEXT one, another SASL_SSL one",
			c.Bootstrap(), sec.PlaintextBootstrap, sec.SASLSSLBootstrap)
	}
	checkSecret(t, sec.PlainPasswordFile, sec.PlainPassword)
	checkSecret(t, sec.ScramPasswordFile, sec.ScramPassword)
	token := checkSecret(t, sec.OAuthTokenFile, "")

	// The setup, on the PLAINTEXT listener, which needs no credentials.
	const topic = "secured"
	createTopic(t, admin(t, c), topic, -1, nil)

	scram512 := scram.Auth{User: sec.ScramUsername, Pass: sec.ScramPassword}.AsSha512Mechanism()
	var want []string
	for _, tc := range []struct {
		name string
		mech sasl.Mechanism
		cert bool // present the client certificate (mutual TLS)
	}{
		{"PLAIN", plain.Auth{User: sec.PlainUsername, Pass: sec.PlainPassword}.AsMechanism(), false},
		{"SCRAM-SHA-256", scram.Auth{User: sec.ScramUsername, Pass: sec.ScramPassword}.AsSha256Mechanism(), false},
		{"SCRAM-SHA-512", scram512, false},
		{"OAUTHBEARER", oauth.Auth{Token: token}.AsMechanism(), false},
		{"mTLS+SCRAM-SHA-512", scram512, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tlsConfig(t, sec.CAFile)
			var presented atomic.Bool
			if tc.cert {
				// As Certificates would, but recording that the broker asked for it and
				// that its request names the CA that signed it.
				cert := clientCert(t, sec)
				cfg.GetClientCertificate = func(cri *tls.CertificateRequestInfo) (*tls.Certificate, error) {
					if err := cri.SupportsCertificate(&cert); err != nil {
						return nil, err
					}
					presented.Store(true)
					return &cert, nil
				}
			}
			cl := secureClient(t, sec, cfg, tc.mech)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
			if err != nil {
				t.Fatalf("metadata over SASL_SSL with %s: %v", tc.name, err)
			}
			if len(md.Brokers) != 1 || net.JoinHostPort(md.Brokers[0].Host, strconv.Itoa(int(md.Brokers[0].Port))) != sec.SASLSSLBrokers()[0] {
				t.Fatalf("metadata over SASL_SSL lists brokers %v, want node 1 at %s", md.Brokers, sec.SASLSSLBootstrap)
			}
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(tc.name)}).FirstErr(); err != nil {
				t.Fatalf("producing over SASL_SSL with %s: %v", tc.name, err)
			}
			if tc.cert && !presented.Load() {
				t.Fatal("the broker did not ask for the client certificate")
			}
		})
		want = append(want, tc.name)
	}
	cfg := tlsConfig(t, sec.CAFile)
	cfg.Certificates = []tls.Certificate{clientCert(t, sec)}
	if got := consume(t, secureClient(t, sec, cfg, scram512, kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())), len(want)); !slices.Equal(got, want) {
		t.Fatalf("read %q over SASL_SSL, want %q", got, want)
	}
	if got := values(t, c, topic); !slices.Equal(got, want) {
		t.Fatalf("read %q over PLAINTEXT, want %q", got, want)
	}

	t.Run("wrong SCRAM password", func(t *testing.T) {
		err := metadataErr(t, secureClient(t, sec, tlsConfig(t, sec.CAFile),
			scram.Auth{User: sec.ScramUsername, Pass: sec.ScramPassword + "x"}.AsSha512Mechanism()))
		if !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("metadata with a wrong SCRAM password: %v, want %v", err, kerr.SaslAuthenticationFailed)
		}
	})
	t.Run("other CA", func(t *testing.T) {
		err := metadataErr(t, secureClient(t, sec, tlsConfig(t, sec.OtherCAFile), scram512))
		if _, ok := errors.AsType[x509.UnknownAuthorityError](err); !ok {
			t.Fatalf("metadata trusting %s only: %v, want an x509.UnknownAuthorityError", sec.OtherCAFile, err)
		}
	})
	// The brokers request a client certificate: one that their CA did not sign ends the TLS
	// session, so that a test of mutual TLS knows the certificate is checked, not ignored.
	// GetClientCertificate, not Certificates: crypto/tls would send no certificate at all
	// rather than one whose issuer is not among the CAs that the broker's request names.
	t.Run("untrusted client certificate", func(t *testing.T) {
		cfg := tlsConfig(t, sec.CAFile)
		cert := selfSigned(t)
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
		err := metadataErr(t, secureClient(t, sec, cfg, scram512))
		if err == nil || !strings.Contains(err.Error(), "remote error: tls:") {
			t.Fatalf("metadata with a self-signed client certificate: %v, want the broker's TLS alert", err)
		}
	})
}

// TestScriptUsage checks scripts/kafka's exit codes for --help and bad usage, which need
// neither java nor a cluster, so it runs in the default go test.
func TestScriptUsage(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"--help"}, 0},
		{[]string{}, 2},
		{[]string{"up"}, 2},
		{[]string{"bogus", "--dir", dir}, 2},
		{[]string{"up", "--dir", dir, "--nodes", "2"}, 2},
		{[]string{"kill", "--dir", dir}, 2},
		{[]string{"start", "x", "--dir", dir}, 2},
		{[]string{"up", "--dir", dir, "--bogus"}, 2},
		{[]string{"up", "--dir", dir, "--security", "tls"}, 2},
		{[]string{"start", "1", "--dir", dir, "--security", "sasl_ssl"}, 2},
		{[]string{"up", "--kill", "--dir", dir}, 2},
		{[]string{"down", "--dir", dir}, 1}, // no cluster in dir
	} {
		err := exec.Command("../../scripts/kafka", tc.args...).Run()
		got := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			got = exit.ExitCode()
		} else if err != nil {
			t.Fatalf("scripts/kafka %q: %v", tc.args, err)
		}
		if got != tc.want {
			t.Errorf("scripts/kafka %q: exit %d, want %d", tc.args, got, tc.want)
		}
	}
}

func admin(t *testing.T, c *kafkacluster.Cluster) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

func createTopic(t *testing.T, adm *kadm.Client, topic string, replicas int16, cfg map[string]*string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, 1, replicas, cfg, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("creating topic %s: %v", topic, err)
	}
}

// produce writes one record with acks=all (franz-go's default) within 60 seconds: time for a
// killed node to be fenced and its partitions led elsewhere.
func produce(t *testing.T, c *kafkacluster.Cluster, topic, value string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers()...), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(value)}).FirstErr(); err != nil {
		t.Fatalf("producing %q to %s: %v", value, topic, err)
	}
}

// commitGroup commits offset 0 of topic's partition 0 for a group, which makes the cluster
// create __consumer_offsets.
func commitGroup(t *testing.T, c *kafkacluster.Cluster, topic string) {
	t.Helper()
	adm := admin(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: 0, LeaderEpoch: -1})
	resp, err := adm.CommitOffsets(ctx, "kafkacluster-test", offs)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("committing a group's offset: %v", err)
	}
}

func checkBrokers(t *testing.T, adm *kadm.Client, want ...int32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	md, err := adm.BrokerMetadata(ctx)
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	if got := md.Brokers.NodeIDs(); !slices.Equal(got, want) {
		t.Fatalf("metadata lists brokers %v, want %v", got, want)
	}
}

// checkReplicas checks that every partition of topic has want replicas, waiting up to 30
// seconds for the broker that answers to learn of a topic just created.
func checkReplicas(t *testing.T, adm *kadm.Client, topic string, want int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		tds, err := adm.ListTopicsWithInternal(ctx, topic)
		cancel()
		if err == nil {
			err = tds[topic].Err
		}
		if err == nil {
			for _, p := range tds[topic].Partitions.Sorted() {
				if len(p.Replicas) != want {
					t.Fatalf("%s partition %d has replicas %v, want %d of them", topic, p.Partition, p.Replicas, want)
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("describing %s: %v", topic, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkClosed checks that no broker accepts connections after Stop.
func checkClosed(t *testing.T, c *kafkacluster.Cluster) {
	t.Helper()
	for i, addr := range c.Brokers() {
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conn.Close()
			t.Errorf("node %s at %s still accepts connections after Stop", strconv.Itoa(i+1), addr)
		}
	}
}

// values reads topic to its end and returns the records' values in offset order.
func values(t *testing.T, c *kafkacluster.Cluster, topic string) []string {
	t.Helper()
	var out []string
	for _, r := range topictest.Read(t, c.Brokers(), topic, false) {
		out = append(out, string(r.Value))
	}
	return out
}

func ptr(s string) *string { return &s }

// checkSecret checks that the file at path is readable by its owner only and holds want
// without a trailing newline (anything but empty if want is), and returns what it holds.
func checkSecret(t *testing.T, path, want string) string {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	if want != "" && got != want || got == "" || strings.ContainsAny(got, "\n\r") {
		t.Fatalf("%s holds %q, want %q without a newline", path, got, want)
	}
	return got
}

// tlsConfig trusts the CA in the PEM file caFile only.
func tlsConfig(t *testing.T, caFile string) *tls.Config {
	t.Helper()
	b, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		t.Fatalf("no certificate in %s", caFile)
	}
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

func clientCert(t *testing.T, sec *kafkacluster.Security) tls.Certificate {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(sec.ClientCertFile, sec.ClientKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}

// selfSigned returns a client certificate that no CA of the cluster signed.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "untrusted client"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// secureClient is a client of the SASL_SSL listeners with TLS cfg and SASL mech.
func secureClient(t *testing.T, sec *kafkacluster.Security, cfg *tls.Config, mech sasl.Mechanism, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(sec.SASLSSLBrokers()...),
		kgo.DialTLSConfig(cfg), kgo.SASL(mech)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// metadataErr returns the error of a metadata request that should fail: within 15 seconds,
// so that a failure that the client retries until its context ends (the test would then see a
// deadline, not the cause) shows as a failed test rather than a hung one.
func metadataErr(t *testing.T, cl *kgo.Client) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	start := time.Now()
	_, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	t.Logf("after %v: %v", time.Since(start).Round(time.Millisecond), err)
	return err
}

// consume polls cl, which consumes a topic from its start, until it has n records, and
// returns their values.
func consume(t *testing.T, cl *kgo.Client, n int) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []string
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %q of %d records: %v", out, n, err)
		}
		fs.EachError(func(topic string, p int32, err error) {
			t.Fatalf("reading %s partition %d: %v", topic, p, err)
		})
		fs.EachRecord(func(r *kgo.Record) { out = append(out, string(r.Value)) })
	}
	return out
}
