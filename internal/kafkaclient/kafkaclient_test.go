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

func plainCluster(t *testing.T) string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
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

// TestCheckExplains has Check fail within seconds, naming the broker and the cause, for
// the mistakes a secured setup invites.
func TestCheckExplains(t *testing.T) {
	certs, other := testcerts.New(t), testcerts.New(t)
	secure, plain := secureCluster(t, certs), plainCluster(t)
	refused := func() string { // a port nothing listens on
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().String()
	}()
	for _, c := range []struct {
		name        string
		addr        string
		k           config.Kafka
		want        string
		is          error
		unreachable bool
	}{
		// kfake closes the connection on a refused authentication; Kafka answers with
		// SASL_AUTHENTICATION_FAILED (TestSecuredKafka in cmd/statehost).
		{"wrong password", secure, config.Kafka{TLS: tlsOf(certs), SASL: scram("wrong")}, "the credentials of kafka.sasl may be wrong", nil, false},
		{"wrong CA", secure, config.Kafka{TLS: tlsOf(other), SASL: scram("scram-pass")}, "TLS: the broker's certificate is not signed by a CA of kafka.tls.ca_file " + other.CAFile, nil, false},
		{"plain text to the TLS port", secure, config.Kafka{SASL: scram("scram-pass")}, "the broker closed the connection at the first request: the listener may need TLS (kafka.tls)", nil, false},
		{"TLS to a plain-text port", plain, config.Kafka{TLS: tlsOf(certs)}, "TLS: the broker", nil, false},
		{"nothing listens", refused, config.Kafka{}, "no broker listens there (connection refused)", nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			k := config.DefaultKafka("app")
			k.TLS, k.SASL = c.k.TLS, c.k.SASL
			err := kafkaclient.Check(context.Background(), k, []string{c.addr})
			took := time.Since(start)
			if err == nil {
				t.Fatal("Check passed")
			}
			t.Logf("after %v: %v", took.Round(time.Millisecond), err)
			if !strings.HasPrefix(err.Error(), "broker "+c.addr+": ") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Check = %q, want the broker %s and %q", err, c.addr, c.want)
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("Check = %v, want it to wrap %v", err, c.is)
			}
			if _, ok := errors.AsType[*kafkaclient.UnreachableError](err); ok != c.unreachable {
				t.Errorf("Check's error unreachable = %v, want %v", ok, c.unreachable)
			}
		})
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
