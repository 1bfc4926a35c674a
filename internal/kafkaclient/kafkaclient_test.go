package kafkaclient_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/statehost/statehost/config"
	"github.com/statehost/statehost/internal/kafkaclient"
	"github.com/statehost/statehost/internal/testcerts"
)

// secureCluster starts a kfake broker that takes TLS (the certificates of certs) and SASL
// with a SCRAM-SHA-512 and a PLAIN user, and returns its address.
func secureCluster(t *testing.T, certs testcerts.Set) string {
	t.Helper()
	return certs.SecureKfake(t, []testcerts.User{{Mechanism: "SCRAM-SHA-512", Name: "scram-user", Password: "scram-pass"}, {Mechanism: "PLAIN", Name: "plain-user", Password: "plain-pass"}},
		kfake.SeedTopics(1, "t"))
}

// plainCluster starts a kfake cluster of n brokers without TLS nor SASL, and returns their
// addresses.
func plainCluster(t *testing.T, n int) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(n), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// silentTLSCluster starts a kfake broker that takes TLS (the certificates of certs) but
// never answers a request, and returns its address.
func silentTLSCluster(t *testing.T, certs testcerts.Set) string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.TLS(&tls.Config{Certificates: []tls.Certificate{certs.Server}, MinVersion: tls.VersionTLS12}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) }) // before Close
	c.ControlKey(kmsg.ApiVersions.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		c.SleepControl(func() { <-stop })
		return nil, nil, false
	})
	return c.ListenAddrs()[0]
}

func tlsOf(certs testcerts.Set) *config.TLS {
	k, diags := loadTLS(certs.CAFile)
	if diags != nil {
		panic(diags)
	}
	return k
}

// loadTLS builds the TLS of a kafka.tls block with ca_file as Load does.
func loadTLS(caFile string) (*config.TLS, error) {
	pem, err := testcertsPool(caFile)
	if err != nil {
		return nil, err
	}
	return &config.TLS{CAFile: caFile, Config: &tls.Config{RootCAs: pem, MinVersion: tls.VersionTLS12}}, nil
}

// withClientCert adds the client certificate of certs to k, as a kafka.tls block with
// cert_file and key_file does.
func withClientCert(t *testing.T, k *config.TLS, certs testcerts.Set) *config.TLS {
	pair, err := tls.LoadX509KeyPair(certs.ClientCert, certs.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	k.CertFile, k.KeyFile = certs.ClientCert, certs.ClientKey
	k.Config.Certificates = []tls.Certificate{pair}
	return k
}

func scram(pass string) *config.SASL {
	return &config.SASL{Mechanism: config.SASLScramSHA512, Username: "scram-user", Password: config.NewSecret(pass)}
}

// TestConnectSecured produces and fetches a record through TLS with SCRAM-SHA-512, and with
// PLAIN, with the options of Opts and ProducerOpts; Check passes.
func TestConnectSecured(t *testing.T) {
	certs := testcerts.New(t)
	addr := secureCluster(t, certs)
	for _, s := range []*config.SASL{
		scram("scram-pass"),
		{Mechanism: config.SASLPlain, Username: "plain-user", Password: config.NewSecret("plain-pass")},
	} {
		t.Run(string(s.Mechanism), func(t *testing.T) {
			k := config.DefaultKafka("app")
			k.TLS, k.SASL, k.Compression = tlsOf(certs), s, config.CompressionZstd
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := kafkaclient.Check(ctx, k, []string{addr}); err != nil {
				t.Fatalf("Check: %v", err)
			}
			cl, err := kgo.NewClient(append(append(kafkaclient.Opts(k, []string{addr}, "test", nil), kafkaclient.ProducerOpts(k)...),
				kgo.DefaultProduceTopic("t"), kgo.ConsumeTopics("t"))...)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(strings.Repeat("word ", 100))}).FirstErr(); err != nil {
				t.Fatalf("produce through TLS and SASL: %v", err)
			}
			if codec := batchCodec(t, ctx, k, addr); codec != 4 {
				t.Errorf("the produced batch's codec is %d, want 4 (zstd)", codec)
			}
		})
	}
}

// batchCodec consumes topic t from the start and returns the compression codec of the
// first record batch it reads (kgo.FetchBatchMetrics.CompressionType: 4 is zstd).
func batchCodec(t *testing.T, ctx context.Context, k config.Kafka, addr string) uint8 {
	t.Helper()
	codec := make(chan uint8, 1)
	cl, err := kgo.NewClient(append(kafkaclient.Opts(k, []string{addr}, "read", nil), kgo.ConsumeTopics("t"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.WithHooks(fetchHook(codec)))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for {
		if fs := cl.PollFetches(ctx); fs.Err0() != nil {
			t.Fatalf("consume: %v", fs.Err0())
		}
		select {
		case c := <-codec:
			return c
		default:
		}
	}
}

type fetchHook chan uint8

func (h fetchHook) OnFetchBatchRead(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	select {
	case h <- m.CompressionType:
	default:
	}
}

// neverAHang bounds each Check of the tests: Check waits at most CheckTimeout (10s) for
// one seed, so 30s for three seeds asked in turn. It checks that Check fails within
// seconds and asks the seeds together, not its speed.
const neverAHang = 20 * time.Second

// TestCheckExplains has Check fail within seconds, naming each broker and the cause, for
// the mistakes a secured setup invites, with one seed and with several.
func TestCheckExplains(t *testing.T) {
	certs, other := testcerts.New(t), testcerts.New(t)
	secure, plain, plains := secureCluster(t, certs), plainCluster(t, 1)[0], plainCluster(t, 3)
	silent := silentTLSCluster(t, certs)
	refused := func() string { // a port nothing listens on
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().String()
	}()
	mutual := certs.SecureKfake(t, []testcerts.User{{Mechanism: "SCRAM-SHA-512", Name: "scram-user", Password: "scram-pass"}},
		kfake.SeedTopics(1, "t"), kfake.TLS(&tls.Config{Certificates: []tls.Certificate{certs.Server}, MinVersion: tls.VersionTLS12,
			ClientCAs: certs.ClientCAs, ClientAuth: tls.RequireAndVerifyClientCert}))
	const tlsToPlain = "TLS: the broker accepts connections, but the TLS handshake got no answer"
	for _, c := range []struct {
		name        string
		addrs       []string
		k           config.Kafka
		want        []string // what the error says of each broker, in order
		unreachable bool
	}{
		// kfake closes the connection on a refused authentication; Kafka answers with
		// SASL_AUTHENTICATION_FAILED (TestSecuredKafka in cmd/statehost).
		{"wrong password", []string{secure}, config.Kafka{TLS: tlsOf(certs), SASL: scram("wrong")}, []string{"the credentials of kafka.sasl may be wrong"}, false},
		{"wrong CA", []string{secure}, config.Kafka{TLS: tlsOf(other), SASL: scram("scram-pass")}, []string{"TLS: the broker's certificate is not signed by a CA of kafka.tls.ca_file " + other.CAFile}, false},
		{"plain text to the TLS port", []string{secure}, config.Kafka{SASL: scram("scram-pass")}, []string{"the broker closed the connection at the first request: the listener may need TLS (kafka.tls)"}, false},
		{"no client certificate", []string{mutual}, config.Kafka{TLS: tlsOf(certs), SASL: scram("scram-pass")},
			[]string{"TLS: the broker requires a client certificate: set kafka.tls.cert_file and key_file"}, false},
		{"a client certificate of another CA", []string{mutual}, config.Kafka{TLS: withClientCert(t, tlsOf(certs), other), SASL: scram("scram-pass")},
			[]string{"TLS: the broker refused the client certificate of kafka.tls.cert_file " + other.ClientCert}, false},
		{"TLS to a plain-text port", []string{plain}, config.Kafka{TLS: tlsOf(certs)}, []string{tlsToPlain}, false},
		// The handshake is answered: the broker is reachable but does not answer yet, as
		// one that is still starting.
		{"TLS broker that does not answer", []string{silent}, config.Kafka{TLS: tlsOf(certs)}, []string{"no answer"}, true},
		{"nothing listens", []string{refused}, config.Kafka{}, []string{"no broker listens there (connection refused)"}, true},
		// Each seed waits for its handshake: asked in turn, they would take 3 times as long.
		{"TLS to three plain-text ports", plains, config.Kafka{TLS: tlsOf(certs)}, []string{tlsToPlain, tlsToPlain, tlsToPlain}, false},
		// One seed that refuses the settings is enough for an error that is not
		// UnreachableError, wherever it is in the list.
		{"nothing listens, TLS to a plain-text port", []string{refused, plain}, config.Kafka{TLS: tlsOf(certs)}, []string{"no broker listens there (connection refused)", tlsToPlain}, false},
		{"nothing listens at two seeds", []string{refused, refused}, config.Kafka{}, []string{"no broker listens there", "no broker listens there"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel() // the cases that wait for a handshake wait together
			start := time.Now()
			k := config.DefaultKafka("app")
			k.TLS, k.SASL = c.k.TLS, c.k.SASL
			err := kafkaclient.Check(context.Background(), k, c.addrs)
			took := time.Since(start)
			if err == nil {
				t.Fatal("Check passed")
			}
			t.Logf("after %v: %v", took.Round(time.Millisecond), err)
			if took > neverAHang {
				t.Errorf("Check failed after %v, want within %v", took.Round(time.Millisecond), neverAHang)
			}
			msg := err.Error()
			if len(c.addrs) > 1 {
				var ok bool
				if msg, ok = strings.CutPrefix(msg, "no broker answered: "); !ok {
					t.Errorf("Check = %q, want it to start with \"no broker answered: \"", err)
				}
			}
			lines := strings.Split(msg, "\n")
			if len(lines) != len(c.addrs) {
				t.Fatalf("Check = %q, want one line for each of the brokers %v", err, c.addrs)
			}
			for i, line := range lines {
				if !strings.HasPrefix(line, "broker "+c.addrs[i]+": ") || !strings.Contains(line, c.want[i]) {
					t.Errorf("Check's line %d = %q, want the broker %s and %q", i+1, line, c.addrs[i], c.want[i])
				}
			}
			if _, ok := errors.AsType[*kafkaclient.UnreachableError](err); ok != c.unreachable {
				t.Errorf("Check's error unreachable = %v, want %v", ok, c.unreachable)
			}
		})
	}
}

// TestCheckAnyAnswers has Check pass as soon as one seed answers, without waiting for the
// seeds before it that do not, and stop at once when its context ends.
func TestCheckAnyAnswers(t *testing.T) {
	certs := testcerts.New(t)
	secure, plains := secureCluster(t, certs), plainCluster(t, 3)
	k := config.DefaultKafka("app")
	k.TLS, k.SASL = tlsOf(certs), scram("scram-pass")
	start := time.Now()
	// The plain-text brokers never answer the TLS handshake.
	if err := kafkaclient.Check(context.Background(), k, append(plains, secure)); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if took := time.Since(start); took > neverAHang {
		t.Errorf("Check passed after %v, want within %v", took.Round(time.Millisecond), neverAHang)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start = time.Now()
	if err := kafkaclient.Check(ctx, k, plains); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Check with a context that ends = %v, want its error", err)
	}
	if took := time.Since(start); took > neverAHang {
		t.Errorf("Check returned after %v when its context ended, want within %v", took.Round(time.Millisecond), neverAHang)
	}
}

func testcertsPool(caFile string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return pool, nil
}
