package config

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// Kafka is the kafka block: the brokers, and the settings of every Kafka client the process
// makes (group consumer, producers, admin, restore and standby clients, and the commands
// that talk to Kafka). No brokers means an embedded broker runs in-process.
type Kafka struct {
	Brokers []string
	Range   hcl.Range // the brokers attribute or the block, zero if absent

	// ClientID prefixes the client id of each client (client.id): <ClientID>-consumer,
	// -producer, -restore, -standby. Default: the application id.
	ClientID string
	// Rack is the client's rack (client.rack): with a broker's replica.selector.class set
	// to the rack-aware selector, fetches read from a replica in the same rack. Default "".
	Rack string
	// Compression is the codec of produced batches (compression.type): changelogs,
	// outputs, repartitions and dead letters. Default CompressionNone.
	Compression Compression
	// Linger is how long a producer waits to fill a batch (linger.ms). Default 5ms.
	Linger time.Duration
	// BatchSize bounds a produced batch (batch.size). Default 1 MiB.
	BatchSize int64
	// FetchMaxBytes bounds what one fetch response brings (fetch.max.bytes). Default 50 MiB;
	// the restore and standby clients take at most 4 MiB whatever it is.
	FetchMaxBytes int64
	// RequestTimeout is how long a request waits for its response beyond the time the
	// request itself gives the broker, as a fetch's wait (request.timeout.ms). Default 10s.
	RequestTimeout time.Duration
	// ReplicationFactor is the replication factor of the topics statehost creates
	// (changelogs, repartitions, dead letters, outputs); 0 means the broker's
	// default.replication.factor. ReplicationFactorRange is the attribute's range, where a
	// check against the cluster's size points; zero when absent.
	ReplicationFactor      int16
	ReplicationFactorRange hcl.Range

	// TLS, when not nil, encrypts every connection to the brokers.
	TLS *TLS
	// SASL, when not nil, authenticates every connection to the brokers.
	SASL *SASL
}

// Compression is a codec of produced batches.
type Compression string

// The codecs of compression.
const (
	CompressionNone   Compression = "none"
	CompressionGzip   Compression = "gzip"
	CompressionSnappy Compression = "snappy"
	CompressionLZ4    Compression = "lz4"
	CompressionZstd   Compression = "zstd"
)

var compressions = []Compression{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd}

// Defaults of the kafka block.
const (
	DefaultLinger         = 5 * time.Millisecond
	DefaultBatchSize      = 1 << 20
	DefaultFetchMaxBytes  = 50 << 20
	DefaultRequestTimeout = 10 * time.Second
)

// TLS is the kafka.tls block.
type TLS struct {
	// CAFile is the PEM file of the certificates that sign the brokers' ("": the system's
	// roots).
	CAFile string
	// CertFile and KeyFile are the client's certificate and key (mutual TLS), both or none.
	CertFile, KeyFile string
	// ServerName is the name the brokers' certificates must hold ("": each broker's host).
	ServerName string
	// InsecureSkipVerify accepts any certificate: for tests only (Load warns).
	InsecureSkipVerify bool
	// Config is the tls.Config of the above, with the CA and the key pair loaded.
	Config *tls.Config `json:"-"`
}

// SASL is the kafka.sasl block.
type SASL struct {
	Mechanism SASLMechanism
	// Username and Password of PLAIN and SCRAM. The password comes from password_file or
	// password_env, never from the file itself.
	Username string
	Password Secret
	// TokenFile holds the OAUTHBEARER token; it is read again at each authentication, so
	// that a token a sidecar renews is picked up by the next connection.
	TokenFile string
}

// SASLMechanism is a SASL mechanism of kafka.sasl.
type SASLMechanism string

// The mechanisms of kafka.sasl.mechanism.
const (
	SASLPlain       SASLMechanism = "PLAIN"
	SASLScramSHA256 SASLMechanism = "SCRAM-SHA-256"
	SASLScramSHA512 SASLMechanism = "SCRAM-SHA-512"
	SASLOAuthBearer SASLMechanism = "OAUTHBEARER"
)

var mechanisms = []SASLMechanism{SASLPlain, SASLScramSHA256, SASLScramSHA512, SASLOAuthBearer}

// Secret is a password. It prints as "[redacted]" through fmt (%v, %+v, %#v, %s) and
// encoding/json, so that a Config logged or served whole shows no secret; Reveal gives the
// value to the client that sends it.
type Secret struct{ value string }

// NewSecret wraps s.
func NewSecret(s string) Secret { return Secret{value: s} }

// Reveal returns the secret.
func (s Secret) Reveal() string { return s.value }

const redacted = "[redacted]"

func (s Secret) String() string                { return redacted }
func (s Secret) GoString() string              { return redacted }
func (s Secret) MarshalText() ([]byte, error)  { return []byte(redacted), nil }
func (s Secret) Format(f fmt.State, verb rune) { fmt.Fprint(f, redacted) }

// ReadTokenFile reads an OAUTHBEARER token: the file's content without surrounding white
// space, which must not be empty.
func ReadTokenFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read the OAUTHBEARER token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("the OAUTHBEARER token file %s is empty", path)
	}
	return tok, nil
}

type rawKafka struct {
	Brokers           hcl.Expression `hcl:"brokers,optional"`
	BrokersRange      hcl.Range      `hcl:"brokers,attr_range"`
	ClientID          hcl.Expression `hcl:"client_id,optional"`
	Rack              hcl.Expression `hcl:"rack,optional"`
	Compression       hcl.Expression `hcl:"compression,optional"`
	Linger            hcl.Expression `hcl:"linger,optional"`
	BatchSize         hcl.Expression `hcl:"batch_size,optional"`
	FetchMaxBytes     hcl.Expression `hcl:"fetch_max_bytes,optional"`
	RequestTimeout    hcl.Expression `hcl:"request_timeout,optional"`
	ReplicationFactor hcl.Expression `hcl:"replication_factor,optional"`
	TLS               *rawTLS        `hcl:"tls,block"`
	SASL              *rawSASL       `hcl:"sasl,block"`
	DefRange          hcl.Range      `hcl:",def_range"`
}

type rawTLS struct {
	CAFile             hcl.Expression `hcl:"ca_file,optional"`
	CertFile           hcl.Expression `hcl:"cert_file,optional"`
	KeyFile            hcl.Expression `hcl:"key_file,optional"`
	ServerName         hcl.Expression `hcl:"server_name,optional"`
	InsecureSkipVerify hcl.Expression `hcl:"insecure_skip_verify,optional"`
	DefRange           hcl.Range      `hcl:",def_range"`
}

type rawSASL struct {
	Mechanism    hcl.Expression `hcl:"mechanism,optional"`
	Username     hcl.Expression `hcl:"username,optional"`
	PasswordFile hcl.Expression `hcl:"password_file,optional"`
	PasswordEnv  hcl.Expression `hcl:"password_env,optional"`
	TokenFile    hcl.Expression `hcl:"token_file,optional"`
	DefRange     hcl.Range      `hcl:",def_range"`

	// password and token are not settings: they are declared so that a secret written in
	// the file gets a message of its own, rather than hcl's "Unsupported argument". Their
	// values are never read.
	Password      hcl.Expression `hcl:"password,optional"`
	PasswordRange hcl.Range      `hcl:"password,attr_range"`
	Token         hcl.Expression `hcl:"token,optional"`
	TokenRange    hcl.Range      `hcl:"token,attr_range"`
}

// decodeKafka decodes the kafka block (nil when absent) into c.Kafka, with its defaults.
// The TLS files and the password are read here, so that a missing or bad one is reported
// on its attribute before anything connects.
func (d *decoder) decodeKafka(rk *rawKafka, c *Config) {
	k := &c.Kafka
	*k = DefaultKafka(c.ApplicationID)
	if rk == nil {
		return
	}
	k.Range = rk.DefRange
	if brokers, ranges, present := d.stringList(rk.Brokers, "brokers"); present {
		k.Range = rk.BrokersRange
		for i, b := range brokers {
			d.hostPort(ranges[i], "broker address", b, "kafka-1:9092", false, false)
		}
		k.Brokers = brokers
	}
	if s, ok := d.str(rk.ClientID, "client_id"); ok {
		if s == "" || strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r > 0x7e }) {
			d.errorf(rk.ClientID.Range(), "Invalid client_id", "The client_id must be printable ASCII and not empty; leave it out for the application id (%q).", c.ApplicationID)
		} else {
			k.ClientID = s
		}
	}
	if s, ok := d.str(rk.Rack, "rack"); ok {
		k.Rack = s
	}
	if s, ok := d.str(rk.Compression, "compression"); ok {
		if i := slices.Index(compressions, Compression(s)); i >= 0 {
			k.Compression = compressions[i]
		} else {
			d.errorf(rk.Compression.Range(), "Invalid compression", "The compression must be one of %s, not %q.", quoteList(compressions), s)
		}
	}
	if !absent(rk.Linger) {
		if dur, text, ok := d.durationValue(rk.Linger, "linger", true); ok {
			if dur%time.Millisecond != 0 {
				d.errorf(rk.Linger.Range(), "Invalid duration", "The argument \"linger\" must be a whole number of milliseconds, not %q.", text)
			} else {
				k.Linger = dur
			}
		}
	}
	k.BatchSize = d.byteSizeWithin(rk.BatchSize, "batch_size", DefaultBatchSize, 1<<10, 1<<30)
	k.FetchMaxBytes = d.byteSizeWithin(rk.FetchMaxBytes, "fetch_max_bytes", DefaultFetchMaxBytes, 64<<10, 1<<30)
	k.RequestTimeout = d.millisDuration(rk.RequestTimeout, "request_timeout", DefaultRequestTimeout)
	if !absent(rk.ReplicationFactor) {
		k.ReplicationFactorRange = rk.ReplicationFactor.Range()
		if n := d.wholeNumber(rk.ReplicationFactor, "replication_factor", math.MaxInt16, 0); n == 0 && !d.hasErrorAt(rk.ReplicationFactor.Range()) {
			d.errorf(rk.ReplicationFactor.Range(), "Invalid replication_factor", "The replication_factor must be at least 1; leave it out for the broker's default.replication.factor.")
		} else {
			k.ReplicationFactor = int16(n)
		}
	}
	if rk.TLS != nil {
		k.TLS = d.decodeTLS(rk.TLS)
	}
	if rk.SASL != nil {
		k.SASL = d.decodeSASL(rk.SASL, k.TLS != nil)
	}
}

// checkKafka checks what the kafka block needs of the rest of the file: the embedded broker
// is one broker without TLS or SASL.
func (d *decoder) checkKafka(rk *rawKafka, c *Config) {
	if rk == nil || len(c.Kafka.Brokers) > 0 {
		return
	}
	if c.Kafka.ReplicationFactor > 1 {
		d.errorf(c.Kafka.ReplicationFactorRange, "Replication factor above the cluster's size",
			"The replication_factor %d needs that many brokers, but without kafka.brokers the embedded broker runs: one broker. Leave replication_factor out, or set kafka.brokers.", c.Kafka.ReplicationFactor)
	}
	const detail = "The kafka.%s block needs kafka.brokers: the embedded broker (used without brokers) listens in plain text on loopback, without authentication."
	if rk.TLS != nil {
		d.errorf(rk.TLS.DefRange, "Security without brokers", detail, "tls")
	}
	if rk.SASL != nil {
		d.errorf(rk.SASL.DefRange, "Security without brokers", detail, "sasl")
	}
}

func (d *decoder) decodeTLS(rt *rawTLS) *TLS {
	t := &TLS{Config: &tls.Config{MinVersion: tls.VersionTLS12}}
	if s, ok := d.str(rt.CAFile, "ca_file"); ok {
		t.CAFile = d.path(s)
		if pem, err := os.ReadFile(t.CAFile); err != nil {
			d.errorf(rt.CAFile.Range(), "Cannot read the CA file", "The ca_file %s cannot be read: %v.", t.CAFile, unwrapPath(err))
		} else {
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				d.errorf(rt.CAFile.Range(), "Invalid CA file", "The ca_file %s holds no PEM certificate (-----BEGIN CERTIFICATE-----).", t.CAFile)
			}
			t.Config.RootCAs = pool
		}
	}
	cert, certOK := d.str(rt.CertFile, "cert_file")
	key, keyOK := d.str(rt.KeyFile, "key_file")
	if keyOK && (strings.Contains(key, "-----BEGIN") || strings.ContainsAny(key, "\r\n")) {
		// Neither the value nor the path made of it is printed.
		d.errorf(rt.KeyFile.Range(), "Key written in the configuration",
			"The key_file is the path of the file that holds the private key (PEM), not the key itself: a key is never written in the configuration. Put it in a file and give its path. The value is not shown.")
		certOK, keyOK = false, false
	}
	switch {
	case certOK && keyOK:
		t.CertFile, t.KeyFile = d.path(cert), d.path(key)
		if pair, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile); err != nil {
			// Neither the error of a key file nor this message quotes the key file's value: it
			// may be a key pasted on one line.
			d.errorf(rt.CertFile.Range(), "Invalid client certificate", "The cert_file %s and the key_file do not make a certificate and its key: %v.", t.CertFile, unwrapPath(err))
		} else {
			t.Config.Certificates = []tls.Certificate{pair}
		}
	case certOK:
		d.errorf(rt.CertFile.Range(), "Client certificate without a key", "The cert_file needs a key_file (its private key, PEM) for mutual TLS.")
	case keyOK:
		d.errorf(rt.KeyFile.Range(), "Client key without a certificate", "The key_file needs a cert_file (its certificate, PEM) for mutual TLS.")
	}
	if s, ok := d.str(rt.ServerName, "server_name"); ok && s != "" {
		t.ServerName = s
		t.Config.ServerName = s
	}
	t.InsecureSkipVerify = d.boolean(rt.InsecureSkipVerify, "insecure_skip_verify", false)
	if t.InsecureSkipVerify {
		t.Config.InsecureSkipVerify = true
		d.warnf(rt.InsecureSkipVerify.Range(), "TLS certificates not verified",
			"insecure_skip_verify = true accepts any certificate the brokers show: anyone on the network path can read and change the traffic, passwords included. Use it for tests only; set ca_file for brokers whose certificates a private CA signs.")
	}
	return t
}

func (d *decoder) decodeSASL(rs *rawSASL, tlsOn bool) *SASL {
	s := &SASL{}
	// A secret written in the file: on the argument, which WriteDiagnostics prints without
	// its source line; the value is not evaluated, so no other message quotes it.
	inlinePassword, inlineToken := !absent(rs.Password), !absent(rs.Token)
	if inlinePassword {
		d.errorf(rs.PasswordRange, "Password written in the configuration",
			"The sasl block takes no password: it comes from password_file (a file that holds it) or password_env (the name of an environment variable that holds it), so that it is never written in the configuration nor printed. Remove it from this file. The value is not shown.")
	}
	if inlineToken {
		d.errorf(rs.TokenRange, "Token written in the configuration",
			"The sasl block takes no token: OAUTHBEARER reads it from token_file (a file that holds it, read again at each connection), so that it is never written in the configuration nor printed. Remove it from this file. The value is not shown.")
	}
	mech, ok := d.str(rs.Mechanism, "mechanism")
	if !ok {
		if absent(rs.Mechanism) {
			d.errorf(rs.DefRange, "Missing SASL mechanism", "The sasl block needs a mechanism: one of %s.", quoteList(mechanisms))
		}
		return s
	}
	i := slices.Index(mechanisms, SASLMechanism(strings.ToUpper(mech)))
	if i < 0 {
		d.errorf(rs.Mechanism.Range(), "Invalid SASL mechanism", "The SASL mechanism must be one of %s, not %q.", quoteList(mechanisms), mech)
		return s
	}
	s.Mechanism = mechanisms[i]
	if s.Mechanism == SASLOAuthBearer {
		for _, a := range []struct {
			expr hcl.Expression
			name string
		}{{rs.Username, "username"}, {rs.PasswordFile, "password_file"}, {rs.PasswordEnv, "password_env"}} {
			if !absent(a.expr) {
				d.errorf(a.expr.Range(), "Argument not used by OAUTHBEARER", "OAUTHBEARER authenticates with the token of token_file only; remove %s.", a.name)
			}
		}
		if inlineToken && absent(rs.TokenFile) {
			return s // one error says what to do
		}
		if !d.required(rs.TokenFile, "token_file", rs.DefRange) {
			return s
		}
		if p, ok := d.str(rs.TokenFile, "token_file"); ok {
			s.TokenFile = d.path(p)
			// As ReadTokenFile, without naming the file.
			tok, err := d.secretFile(rs.TokenFile.Range(), "token_file", p, "Cannot read the OAUTHBEARER token")
			if err == nil && strings.TrimSpace(tok) == "" {
				d.errorf(rs.TokenFile.Range(), "Empty OAUTHBEARER token", "The token_file is empty.")
			}
		}
		return s
	}
	if !absent(rs.TokenFile) {
		d.errorf(rs.TokenFile.Range(), "Argument not used by "+string(s.Mechanism), "token_file is for OAUTHBEARER; %s authenticates with username and a password (password_file or password_env).", s.Mechanism)
	}
	if d.required(rs.Username, "username", rs.DefRange) {
		if u, ok := d.str(rs.Username, "username"); ok {
			if u == "" {
				d.errorf(rs.Username.Range(), "Invalid SASL username", "The SASL username must not be empty.")
			}
			s.Username = u
		}
	}
	s.Password = d.password(rs, inlinePassword)
	if s.Mechanism == SASLPlain && !tlsOn {
		d.warnf(rs.Mechanism.Range(), "Password sent in plain text",
			"SASL PLAIN without a kafka.tls block sends the password unencrypted to the brokers. Add a tls block (SASL_SSL), or use SCRAM-SHA-512.")
	}
	return s
}

// password reads the password of password_file or password_env: exactly one of them.
// inline tells that the block has a password argument (already reported). Neither the
// password nor the values of password_file and password_env appear in a message: one of
// them may be a password pasted in the wrong place.
func (d *decoder) password(rs *rawSASL, inline bool) Secret {
	file, fileOK := d.str(rs.PasswordFile, "password_file")
	env, envOK := d.str(rs.PasswordEnv, "password_env")
	switch {
	case fileOK && envOK:
		d.errorf(rs.PasswordEnv.Range(), "Two passwords", "Set password_file or password_env, not both.")
	case fileOK:
		b, err := d.secretFile(rs.PasswordFile.Range(), "password_file", file, "Cannot read the password file")
		pw := strings.TrimRight(b, "\r\n")
		switch {
		case err != nil:
		case pw == "":
			d.errorf(rs.PasswordFile.Range(), "Empty password", "The password_file is empty.")
		default:
			return NewSecret(pw)
		}
	case envOK:
		if !envName(env) {
			d.errorf(rs.PasswordEnv.Range(), "Invalid password_env",
				"The password_env must name an environment variable (letters, digits and _, not starting with a digit) that holds the password, not be the password itself. The value is not shown.")
			break
		}
		pw, set := os.LookupEnv(env)
		switch {
		case !set:
			d.errorf(rs.PasswordEnv.Range(), "Password variable not set", "The environment variable that password_env names is not set.")
		case pw == "":
			d.errorf(rs.PasswordEnv.Range(), "Empty password", "The environment variable that password_env names is empty.")
		default:
			return NewSecret(pw)
		}
	case absent(rs.PasswordFile) && absent(rs.PasswordEnv) && !inline:
		d.errorf(rs.DefRange, "Missing SASL password", "The sasl block needs password_file (a file that holds the password) or password_env (an environment variable that holds it); the password itself is never written in the configuration.")
	}
	return Secret{}
}

// secretFile reads the file of the argument name (password_file, token_file) whose value is
// p, at rng. When it cannot, it records the error summary, which names neither p nor the
// path made of it (p may be a secret pasted in place of a path), and returns the error.
func (d *decoder) secretFile(rng hcl.Range, name, p, summary string) (string, error) {
	b, err := os.ReadFile(d.path(p))
	if err != nil {
		where := ""
		if !filepath.IsAbs(p) {
			where = " (a relative path is taken from the configuration file's directory, " + d.dir + ")"
		}
		d.errorf(rng, summary, "The %s cannot be read%s: %v.", name, where, unwrapPath(err))
	}
	return string(b), err
}

// envName reports whether s is a portable environment variable name: letters, digits and
// "_", not starting with a digit.
func envName(s string) bool {
	for i, r := range s {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return s != ""
}

// byteSizeWithin is byteSize with bounds.
func (d *decoder) byteSizeWithin(expr hcl.Expression, name string, def, least, most int64) int64 {
	n := d.byteSize(expr, name, def)
	if n != def && (n < least || n > most) {
		d.errorf(expr.Range(), "Invalid byte size", "The argument %q must be from %s to %s.", name, FormatByteSize(least), FormatByteSize(most))
		return def
	}
	return n
}

// unwrapPath drops the *fs.PathError's "open <path>:" from err, for messages that name the
// path themselves.
func unwrapPath(err error) error {
	if pe, ok := err.(*fs.PathError); ok {
		return pe.Err
	}
	return err
}

func quoteList[T ~string](list []T) string {
	q := make([]string, len(list))
	for i, v := range list {
		q[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// DefaultKafka returns the kafka block's settings when the block sets none: Load starts from
// it, and so do the clients that have no configuration file (the commands without
// --config, whose client id is applicationID).
func DefaultKafka(applicationID string) Kafka {
	return Kafka{ClientID: applicationID, Compression: CompressionNone, Linger: DefaultLinger,
		BatchSize: DefaultBatchSize, FetchMaxBytes: DefaultFetchMaxBytes, RequestTimeout: DefaultRequestTimeout}
}
