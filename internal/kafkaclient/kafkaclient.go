// Package kafkaclient turns the kafka block of a configuration (config.Kafka) into the
// franz-go options of a client, so that every client the process makes (group consumer,
// producers, admin, restore and standby clients, and the commands that talk to Kafka)
// connects with the same TLS, SASL and client settings; and it checks, before anything
// else runs, that the brokers take those settings, with an error that says why not.
package kafkaclient

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/statehost/statehost/config"
	"github.com/statehost/statehost/internal/kafkalog"
)

// Opts returns the options every client of k takes: the seed brokers, the logger, TLS,
// SASL, the rack, the request timeout, and the client id <k.ClientID>-<role> (k.ClientID
// alone when role is empty). The producers add ProducerOpts.
func Opts(k config.Kafka, seeds []string, role string, log hclog.Logger) []kgo.Opt {
	id := k.ClientID
	if role != "" {
		id += "-" + role
	}
	opts := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ClientID(id)}
	if log != nil {
		opts = append(opts, kgo.WithLogger(kafkalog.New(log)))
	}
	if k.RequestTimeout > 0 {
		opts = append(opts, kgo.RequestTimeoutOverhead(k.RequestTimeout))
	}
	if k.Rack != "" {
		opts = append(opts, kgo.Rack(k.Rack))
	}
	if k.TLS != nil {
		opts = append(opts, kgo.DialTLSConfig(k.TLS.Config))
	}
	if m := Mechanism(k.SASL); m != nil {
		opts = append(opts, kgo.SASL(m))
	}
	return opts
}

// ProducerOpts returns the options of k's producers: compression, linger and batch size.
func ProducerOpts(k config.Kafka) []kgo.Opt {
	opts := []kgo.Opt{kgo.ProducerBatchCompression(Codec(k.Compression)), kgo.ProducerLinger(k.Linger)}
	if k.BatchSize > 0 {
		opts = append(opts, kgo.ProducerBatchMaxBytes(int32(k.BatchSize)))
	}
	return opts
}

// Codec returns the franz-go codec of c; none for "" (the default, as Kafka's producer).
func Codec(c config.Compression) kgo.CompressionCodec {
	switch c {
	case config.CompressionGzip:
		return kgo.GzipCompression()
	case config.CompressionSnappy:
		return kgo.SnappyCompression()
	case config.CompressionLZ4:
		return kgo.Lz4Compression()
	case config.CompressionZstd:
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}

// Mechanism returns the SASL mechanism of s, nil when s is nil. OAUTHBEARER reads its token
// file at each authentication (each new connection), so that a renewed token is used.
func Mechanism(s *config.SASL) sasl.Mechanism {
	if s == nil {
		return nil
	}
	switch s.Mechanism {
	case config.SASLPlain:
		return plain.Auth{User: s.Username, Pass: s.Password.Reveal()}.AsMechanism()
	case config.SASLScramSHA256:
		return scram.Auth{User: s.Username, Pass: s.Password.Reveal()}.AsSha256Mechanism()
	case config.SASLScramSHA512:
		return scram.Auth{User: s.Username, Pass: s.Password.Reveal()}.AsSha512Mechanism()
	case config.SASLOAuthBearer:
		path := s.TokenFile
		return oauth.Oauth(func(context.Context) (oauth.Auth, error) {
			tok, err := config.ReadTokenFile(path)
			return oauth.Auth{Token: tok}, err
		})
	}
	return nil
}

// CheckTimeout bounds Check's wait for each seed broker.
const CheckTimeout = 10 * time.Second

// handshakeTimeout bounds Check's TLS handshake with a seed broker that accepted its TCP
// connection: a TLS listener answers within a few round trips, well under a second even
// across continents, and one that does not is taken for a plain-text listener
// (errTLSNoAnswer). It is the dial timeout (connection and handshake) Check's client already
// had; the clients that run keep franz-go's.
const handshakeTimeout = CheckTimeout / 2

// checkParallel is how many seed brokers Check asks at once: the seed lists of a cluster are
// a few brokers, so that Check takes the time of one seed, not of all of them in turn, while
// a long list does not open a connection to each broker at once.
const checkParallel = 8

// Check asks the seed brokers, up to checkParallel at once, for the cluster's metadata with
// k's TLS and SASL settings; it returns nil as soon as one answers. Otherwise it returns an
// error that names each broker, in the order of seeds, and says why it failed, in the user's
// terms (a wrong password, a CA that did not sign the broker's certificate, plain text sent
// to a TLS port), after at most CheckTimeout for up to checkParallel seeds (handshakeTimeout
// when a TLS handshake gets no answer): the clients themselves would retry such failures
// for minutes, silently. The error is an *UnreachableError when no broker could be reached
// at all, and ctx's error when ctx ends first.
func Check(ctx context.Context, k config.Kafka, seeds []string) error {
	if len(seeds) == 0 {
		return errors.New("kafkaclient: no seed broker to check")
	}
	errs := askSeeds(ctx, k, seeds)
	if errs == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	unreachable := true
	for i, err := range errs {
		why, ok := explain(k, err)
		unreachable = unreachable && ok
		errs[i] = fmt.Errorf("broker %s: %w", seeds[i], why)
	}
	err := errs[0]
	if len(errs) > 1 {
		err = fmt.Errorf("no broker answered: %w", errors.Join(errs...))
	}
	if unreachable {
		return &UnreachableError{err}
	}
	return err
}

// askSeeds runs checkSeed on each seed, up to checkParallel at once, and returns nil as soon
// as one answers (it stops the others and waits for them), otherwise the error of each seed,
// in the order of seeds.
func askSeeds(ctx context.Context, k config.Kafka, seeds []string) []error {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var (
		errs  = make([]error, len(seeds))
		slots = make(chan struct{}, checkParallel)
		wg    sync.WaitGroup
	)
	for i, seed := range seeds {
		wg.Go(func() {
			select {
			case slots <- struct{}{}:
				defer func() { <-slots }()
			case <-ctx.Done():
				errs[i] = ctx.Err()
				return
			}
			if errs[i] = checkSeed(ctx, k, seed); errs[i] == nil {
				stop()
			}
		})
	}
	wg.Wait()
	if slices.Contains(errs, nil) { // a seed answered: the others were stopped
		return nil
	}
	return errs
}

// UnreachableError is Check's error when no broker could be reached at all (nothing listens,
// or no answer in time), as when the brokers are still starting: unlike a refused password
// or certificate, that may pass by itself.
type UnreachableError struct{ Err error }

func (e *UnreachableError) Error() string { return e.Err.Error() }
func (e *UnreachableError) Unwrap() error { return e.Err }

func checkSeed(ctx context.Context, k config.Kafka, seed string) error {
	ctx, cancel := context.WithTimeout(ctx, CheckTimeout)
	defer cancel()
	// A TCP connection first, then the TLS handshake on it: a handshake that gets no answer
	// from a port that accepts connections is TLS spoken to a plain-text listener (Kafka's
	// closes the connection, but others wait for the rest of a request that large), not an
	// unreachable broker.
	d := net.Dialer{Timeout: CheckTimeout / 2}
	conn, err := d.DialContext(ctx, "tcp", seed)
	if err != nil {
		return err
	}
	if k.TLS != nil {
		if !handshakeAnswered(ctx, conn, k.TLS.Config, seed) {
			return errTLSNoAnswer
		}
	} else {
		conn.Close()
	}
	hook := &dialHook{}
	opts := append(Opts(k, []string{seed}, "check", nil),
		kgo.RequestRetries(0),
		kgo.RetryTimeout(CheckTimeout),
		kgo.DialTimeout(CheckTimeout/2),
		kgo.WithHooks(hook),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	req.Topics = []kmsg.MetadataRequestTopic{} // none: the brokers only
	_, err = req.RequestWith(ctx, cl)
	if err == nil || ctx.Err() == nil {
		return err
	}
	if err := hook.last(); err != nil {
		return err
	}
	return fmt.Errorf("no answer within %s: %w", CheckTimeout, errNoAnswer)
}

// handshakeAnswered reports whether a TLS handshake with c on conn, a connection to seed, got
// an answer within handshakeTimeout: any answer, a refused certificate too (the client's
// own dial reports it then, as it does for the clients that run). It closes conn.
func handshakeAnswered(ctx context.Context, conn net.Conn, c *tls.Config, seed string) bool {
	c = c.Clone()
	if c.ServerName == "" { // as franz-go's dial does
		c.ServerName, _, _ = net.SplitHostPort(seed)
	}
	ctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()
	tc := tls.Client(conn, c)
	defer tc.Close()
	return tc.HandshakeContext(ctx) == nil || ctx.Err() == nil
}

var (
	errNoAnswer    = errors.New("no answer")
	errTLSNoAnswer = errors.New("the TLS handshake got no answer")
)

// dialHook keeps the last dial error: a request that timed out after failed dials returns
// only the context's error.
type dialHook struct {
	mu  sync.Mutex
	err error
}

func (h *dialHook) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err != nil {
		h.mu.Lock()
		h.err = err
		h.mu.Unlock()
	}
}

func (h *dialHook) last() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// explain says what err means for a connection with k's settings; unreachable is true when
// nothing answered at all.
func explain(k config.Kafka, err error) (_ error, unreachable bool) {
	var (
		unknownCA x509.UnknownAuthorityError
		hostErr   x509.HostnameError
		verifyErr *tls.CertificateVerificationError
		headerErr tls.RecordHeaderError
		netErr    net.Error
		dnsErr    *net.DNSError
	)
	tlsOn := k.TLS != nil
	ca := "the system's root certificates"
	if tlsOn && k.TLS.CAFile != "" {
		ca = "kafka.tls.ca_file " + k.TLS.CAFile
	}
	switch {
	case !tlsOn && strings.Contains(err.Error(), "appear to be a tls alert record"):
		// franz-go's error (no type) when a TLS listener answers plain text with an alert.
		return fmt.Errorf("the broker's listener speaks TLS, but the client sent plain text: add a kafka.tls block: %w", err), false
	case errors.Is(err, kerr.SaslAuthenticationFailed):
		return fmt.Errorf("SASL %s authentication of user %q failed: the broker refused the credentials (kafka.sasl): %w", k.SASL.Mechanism, k.SASL.Username, err), false
	case errors.Is(err, kerr.UnsupportedSaslMechanism):
		return fmt.Errorf("the broker's listener does not enable SASL mechanism %s (kafka.sasl.mechanism): %w", k.SASL.Mechanism, err), false
	case errors.Is(err, kerr.IllegalSaslState):
		return fmt.Errorf("the broker's listener takes no SASL: remove kafka.sasl, or use its SASL port: %w", err), false
	case tlsOn && clientCertRefused(err):
		if k.TLS.CertFile == "" {
			return fmt.Errorf("TLS: the broker requires a client certificate: set kafka.tls.cert_file and key_file: %w", err), false
		}
		return fmt.Errorf("TLS: the broker refused the client certificate of kafka.tls.cert_file %s: it may not be signed by a CA the broker trusts, or be expired: %w", k.TLS.CertFile, err), false
	case errors.As(err, &unknownCA):
		return fmt.Errorf("TLS: the broker's certificate is not signed by a CA of %s: %w", ca, err), false
	case errors.As(err, &hostErr):
		return fmt.Errorf("TLS: the broker's certificate is not for this address (set kafka.tls.server_name to a name it holds): %w", err), false
	case errors.As(err, &verifyErr):
		return fmt.Errorf("TLS: the broker's certificate is not valid (checked against %s): %w", ca, err), false
	case errors.Is(err, errTLSNoAnswer):
		return fmt.Errorf("TLS: the broker accepts connections, but %w within %s: the listener is likely plain text; remove kafka.tls, or use its TLS port", err, handshakeTimeout), false
	case errors.As(err, &headerErr):
		return fmt.Errorf("TLS: the broker answered in plain text: the listener is not TLS; remove kafka.tls, or use its TLS port: %w", err), false
	case errors.As(err, &netErr) && netErr.Timeout():
		return fmt.Errorf("no answer in time: %w", err), true
	case errors.As(err, &dnsErr):
		return fmt.Errorf("the broker's host name does not resolve: %w", err), true
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("no broker listens there (connection refused): %w", err), true
	case tlsOn && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)) && strings.Contains(err.Error(), "tls"):
		return fmt.Errorf("TLS: the broker closed the connection during the handshake: the listener is likely plain text; remove kafka.tls, or use its TLS port: %w", err), false
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET):
		hint := "the listener may need TLS (kafka.tls) or SASL (kafka.sasl), or the broker is shutting down"
		switch {
		case tlsOn && k.SASL == nil:
			hint = "the listener may need SASL (kafka.sasl)"
		case !tlsOn && k.SASL != nil:
			hint = "the listener may need TLS (kafka.tls), or take no SASL"
		case tlsOn:
			hint = "the credentials of kafka.sasl may be wrong (some brokers close the connection on a refused authentication), or the listener takes other security than TLS with SASL " + string(k.SASL.Mechanism)
		}
		return fmt.Errorf("the broker closed the connection at the first request: %s: %w", hint, err), false
	}
	return err, errors.Is(err, errNoAnswer)
}

// clientCertRefused reports whether err is a TLS alert by which a broker refuses the client's
// certificate, or its absence. crypto/tls reports a peer's alert as a *net.OpError ("remote
// error") around an unexported type, so only its text tells which alert it was.
func clientCertRefused(err error) bool {
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "remote error" {
		return false
	}
	switch op.Err.Error() {
	case "tls: certificate required", "tls: bad certificate", "tls: unknown certificate authority",
		"tls: expired certificate", "tls: unknown certificate", "tls: unsupported certificate",
		"tls: revoked certificate":
		return true
	}
	return false
}
