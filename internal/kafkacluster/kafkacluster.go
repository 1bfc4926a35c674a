package kafkacluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// EnvVar is the environment variable that asks for the tests on a real Kafka cluster:
// STATEHOST_TEST_KAFKA=1. Without it Start skips its test, so that the default go test ./...
// stays fast and needs no Java; with it a missing java (or, on the first run, mvn) fails the
// test instead, since the run asked for Kafka.
const EnvVar = "STATEHOST_TEST_KAFKA"

// Requested reports whether EnvVar asks for the tests on a real Kafka cluster.
func Requested() bool { return os.Getenv(EnvVar) == "1" }

// NodesVar is the environment variable that sets how many nodes the clusters of tests that
// take the suite's default (Nodes) have: 1 or 3, default 3, as CI runs them.
const NodesVar = "STATEHOST_TEST_KAFKA_NODES"

// Nodes returns the node count NodesVar asks for, 3 when it is unset; it fails t on any other
// value than 1 or 3.
func Nodes(t testing.TB) int {
	t.Helper()
	switch v := os.Getenv(NodesVar); v {
	case "", "3":
		return 3
	case "1":
		return 1
	default:
		t.Fatalf("kafkacluster: %s=%q: want 1 or 3", NodesVar, v)
		return 0
	}
}

// upTimeout bounds scripts/kafka up, whose first run fetches the broker's jars with Maven;
// nodeTimeout bounds kill, start and down.
const (
	upTimeout   = 5 * time.Minute
	nodeTimeout = 3 * time.Minute
)

// Cluster is a running Kafka cluster of combined broker and controller nodes, numbered from
// 1, on loopback ports, in a temporary folder of its test. Its methods are not safe for
// concurrent use.
type Cluster struct {
	script    string
	dir       string
	nodes     int
	bootstrap string
	security  *Security
	stopped   bool
}

// The values of Options.Security: the listeners a cluster has for its clients.
const (
	// Plaintext, the default, gives each node a PLAINTEXT listener only.
	Plaintext = "plaintext"
	// SASLSSL gives each node a SASL_SSL listener besides its PLAINTEXT one, so that tests
	// can connect a client with TLS and SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or
	// OAUTHBEARER) to a real broker; the PLAINTEXT listener stays for the brokers' own
	// traffic and for the tests' setup, which need no credentials.
	SASLSSL = "sasl_ssl"
)

// Options says what cluster StartWith starts.
type Options struct {
	// Nodes is the number of nodes, 1 or 3.
	Nodes int
	// Security is Plaintext (or empty, the same) or SASLSSL.
	Security string
}

// Security is what a client needs to connect to the SASL_SSL listeners of a cluster started
// with SASLSSL: the fields of the credentials file that scripts/kafka up --security sasl_ssl
// writes, DIR/security/credentials, so that a test needs no knowledge of the folder's layout.
// The files are PEM; the passwords are also in files of their own, without a newline, for
// clients that take a password file.
type Security struct {
	// SASLSSLBootstrap is the SASL_SSL listeners' addresses, host:port,host:port,..., node 1's
	// first; PlaintextBootstrap the PLAINTEXT ones, as Cluster.Bootstrap returns them.
	SASLSSLBootstrap   string
	PlaintextBootstrap string
	// CAFile is the CA that signed the brokers' certificate (SAN IP:127.0.0.1 and
	// DNS:localhost) and the client certificate; OtherCAFile an unrelated CA, which a client
	// that should fail to verify the brokers can trust instead.
	CAFile      string
	OtherCAFile string
	// ClientCertFile and ClientKeyFile (PKCS#8, unencrypted) are a client certificate for
	// mutual TLS, which the brokers request but do not require.
	ClientCertFile string
	ClientKeyFile  string
	// The user for SASL PLAIN.
	PlainUsername     string
	PlainPassword     string
	PlainPasswordFile string
	// The user for SCRAM-SHA-256 and SCRAM-SHA-512, the same name and password for both.
	ScramUsername     string
	ScramPassword     string
	ScramPasswordFile string
	// A user with SCRAM-SHA-256 credentials only: a client that asks for SCRAM-SHA-256 but
	// speaks SCRAM-SHA-512 fails with it.
	Scram256Username     string
	Scram256Password     string
	Scram256PasswordFile string
	// OAuthTokenFile holds an unsecured JWT (alg none) for OAUTHBEARER, valid for a year,
	// which the brokers' built-in unsecured validator accepts.
	OAuthTokenFile string
}

// SASLSSLBrokers returns the SASL_SSL listeners' addresses, node 1's first, as kgo.SeedBrokers
// takes them.
func (s *Security) SASLSSLBrokers() []string { return strings.Split(s.SASLSSLBootstrap, ",") }

// Start starts a cluster of nodes (1 or 3) Kafka nodes with scripts/kafka up and returns once
// every broker is in the cluster's metadata and answers; t's cleanup stops it (Stop). It skips
// t unless Requested. With 3 nodes, topics created with the broker's default replication
// factor (-1) have 3 replicas, and the internal topics 3 replicas (the transaction log with 2 in sync); see
// scripts/kafka for the other broker settings.
func Start(t testing.TB, nodes int) *Cluster {
	t.Helper()
	return StartWith(t, Options{Nodes: nodes})
}

// StartWith starts a cluster as Start does, with the listeners opts.Security asks for. With
// SASLSSL it returns once every node's SASL_SSL listener answers a SCRAM-SHA-512 client too, and
// the cluster's Security says how to connect to them.
func StartWith(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if !Requested() {
		t.Skipf("a real Kafka cluster: set %s=1 to run (needs java 17+, and mvn on the first run)", EnvVar)
	}
	nodes := opts.Nodes
	if nodes != 1 && nodes != 3 {
		t.Fatalf("kafkacluster: %d nodes: want 1 or 3", nodes)
	}
	args := []string{"--nodes", strconv.Itoa(nodes)}
	switch opts.Security {
	case "", Plaintext:
		// The script's default; no flag, so that the command is the one Start always ran.
	case SASLSSL:
		args = append(args, "--security", SASLSSL)
	default:
		t.Fatalf("kafkacluster: security %q: want %q or %q", opts.Security, Plaintext, SASLSSL)
	}
	if _, err := exec.LookPath("java"); err != nil {
		t.Fatalf("kafkacluster: %s=1 asks for a real Kafka cluster, but java is not installed: %v", EnvVar, err)
	}
	script, err := findScript()
	if err != nil {
		t.Fatalf("kafkacluster: %v", err)
	}
	c := &Cluster{script: script, dir: t.TempDir(), nodes: nodes}
	t.Cleanup(func() { c.cleanup(t) })
	out, err := c.run(upTimeout, "up", args...)
	if err != nil {
		t.Fatalf("kafkacluster: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	c.bootstrap = strings.TrimSpace(lines[len(lines)-1])
	if opts.Security == SASLSSL {
		// The last line is the SASL_SSL list; the credentials file has both.
		var creds string
		for _, l := range lines {
			if v, ok := strings.CutPrefix(l, "credentials="); ok {
				creds = v
			}
		}
		if creds == "" {
			t.Fatalf("kafkacluster: scripts/kafka up --security sasl_ssl printed no credentials= line:\n%s", out)
		}
		sec, err := readSecurity(creds)
		if err != nil {
			t.Fatalf("kafkacluster: %v", err)
		}
		if sec.SASLSSLBootstrap != c.bootstrap {
			t.Fatalf("kafkacluster: scripts/kafka up printed SASL_SSL bootstrap %q, but %s has %q", c.bootstrap, creds, sec.SASLSSLBootstrap)
		}
		if got := len(sec.SASLSSLBrokers()); got != nodes {
			t.Fatalf("kafkacluster: SASL_SSL bootstrap %q: %d brokers, want %d", sec.SASLSSLBootstrap, got, nodes)
		}
		c.security, c.bootstrap = sec, sec.PlaintextBootstrap
	}
	if got := len(c.Brokers()); got != nodes {
		t.Fatalf("kafkacluster: scripts/kafka up printed bootstrap %q: %d brokers, want %d", c.bootstrap, got, nodes)
	}
	return c
}

// Security returns how to connect to c's SASL_SSL listeners, or nil if c has none (it was not
// started with SASLSSL).
func (c *Cluster) Security() *Security { return c.security }

// Bootstrap returns the brokers' addresses, host:port,host:port,...: their PLAINTEXT listeners,
// also on a cluster with SASL_SSL ones (Security).
func (c *Cluster) Bootstrap() string { return c.bootstrap }

// Brokers returns the brokers' addresses, node 1's first, as kgo.SeedBrokers takes them.
func (c *Cluster) Brokers() []string { return strings.Split(c.bootstrap, ",") }

// Kill sends node n a SIGKILL and returns once its process is gone. The cluster's metadata
// lists it until the controller fences it, within 3 seconds.
func (c *Cluster) Kill(t testing.TB, n int) {
	t.Helper()
	if _, err := c.run(nodeTimeout, "kill", strconv.Itoa(n)); err != nil {
		t.Fatalf("kafkacluster: %v", err)
	}
}

// StartNode starts node n again on its data and ports, and returns once it is back in the
// cluster's metadata and answers.
func (c *Cluster) StartNode(t testing.TB, n int) {
	t.Helper()
	if _, err := c.run(nodeTimeout, "start", strconv.Itoa(n)); err != nil {
		t.Fatalf("kafkacluster: %v", err)
	}
}

// Nodes returns how many nodes c has.
func (c *Cluster) Nodes() int { return c.nodes }

// KillAll sends every node a SIGKILL at once and returns once they are gone: the whole
// cluster dies, as in a power cut of its machines (what the nodes wrote is in the page cache
// of this machine's kernel, so it survives).
func (c *Cluster) KillAll(t testing.TB) {
	t.Helper()
	errs := make(chan error, c.nodes)
	for n := 1; n <= c.nodes; n++ {
		go func() {
			_, err := c.run(nodeTimeout, "kill", strconv.Itoa(n))
			errs <- err
		}()
	}
	var all []error
	for range c.nodes {
		all = append(all, <-errs)
	}
	if err := errors.Join(all...); err != nil {
		t.Fatalf("kafkacluster: %v", err)
	}
}

// StartAll starts every stopped node again on its data and ports, at once (a node of a
// cluster of 3 cannot come up alone: its controller needs a majority), and returns once
// every broker is back in the cluster's metadata and answers (scripts/kafka up on c's folder).
func (c *Cluster) StartAll(t testing.TB) {
	t.Helper()
	if _, err := c.run(upTimeout, "up"); err != nil {
		t.Fatalf("kafkacluster: %v", err)
	}
	c.stopped = false
}

// Stop stops every node with SIGTERM and waits for it to exit (scripts/kafka down). The
// cleanup of the test that started c calls it unless the test did.
func (c *Cluster) Stop(t testing.TB) {
	t.Helper()
	c.stopped = true
	if _, err := c.run(nodeTimeout, "down"); err != nil {
		t.Errorf("kafkacluster: %v", err)
	}
}

// cleanup kills c's nodes (scripts/kafka down --kill) if its test did not stop it: their data
// goes with the test's temporary folder, so a clean shutdown, seconds per node, would buy
// nothing. On a failed test it first logs the end of each node's log.
func (c *Cluster) cleanup(t testing.TB) {
	if t.Failed() {
		for n := 1; n <= c.nodes; n++ {
			log := filepath.Join(c.dir, "node"+strconv.Itoa(n), "kafka.log")
			t.Logf("kafkacluster: the end of node %d's log %s:\n%s", n, log, tail(log, 15))
		}
	}
	if !c.stopped {
		c.stopped = true
		if _, err := c.run(nodeTimeout, "down", "--kill"); err != nil {
			t.Errorf("kafkacluster: %v", err)
		}
	}
}

// run runs scripts/kafka CMD --dir c.dir ARGS... and returns its stdout; an error carries the
// script's stderr, which names what failed.
func (c *Cluster) run(timeout time.Duration, cmd string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	argv := append([]string{cmd, "--dir", c.dir}, args...)
	x := exec.CommandContext(ctx, c.script, argv...)
	if _, set := os.LookupEnv(jvmOptsVar); !set {
		x.Env = append(os.Environ(), jvmOptsVar+"="+testJVMOpts)
	}
	var stdout, stderr bytes.Buffer
	x.Stdout, x.Stderr = &stdout, &stderr
	// The nodes the script starts keep no descriptor of ours (their output goes to their log
	// files), so Wait returns when the script does.
	err := x.Run()
	if ctx.Err() != nil {
		err = fmt.Errorf("timed out after %s", timeout)
	}
	if err != nil {
		return "", fmt.Errorf("scripts/kafka %s: %w\n%s", strings.Join(argv, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// jvmOptsVar names scripts/kafka's extra JVM options of the nodes; testJVMOpts are the tests'
// unless the environment sets them: the client compiler only (C1), which starts a node with
// about a third less CPU (16 s of it for 3 nodes, 10 s with C1) and spares the CPU that the
// server compiler spends in a node's first minutes, most of a test's life; the brokers'
// peak throughput, which no test approaches, is what it costs. The benchmarks start their
// clusters with scripts/kafka itself, without it.
const (
	jvmOptsVar  = "STATEHOST_KAFKA_JVM_OPTS"
	testJVMOpts = "-XX:TieredStopAtLevel=1"
)

// findScript finds scripts/kafka in the module that holds the working directory, which go
// test sets to the package's folder.
func findScript() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		script := filepath.Join(dir, "scripts", "kafka")
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(script); err != nil {
				return "", fmt.Errorf("no scripts/kafka beside %s: %w", filepath.Join(dir, "go.mod"), err)
			}
			return script, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("scripts/kafka not found: the working directory is not in the statehost module")
		}
		dir = parent
	}
}

// readSecurity reads the credentials file at path, KEY=value lines that a shell can source
// (a value in single quotes where the shell needs them), and fails unless it has every key
// of Security, so that a script and a package out of step fail here rather than in a test's
// connection.
func readSecurity(path string) (*Security, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var s Security
	fields := map[string]*string{
		"SASL_SSL_BOOTSTRAP":     &s.SASLSSLBootstrap,
		"PLAINTEXT_BOOTSTRAP":    &s.PlaintextBootstrap,
		"CA_FILE":                &s.CAFile,
		"OTHER_CA_FILE":          &s.OtherCAFile,
		"CLIENT_CERT_FILE":       &s.ClientCertFile,
		"CLIENT_KEY_FILE":        &s.ClientKeyFile,
		"PLAIN_USERNAME":         &s.PlainUsername,
		"PLAIN_PASSWORD":         &s.PlainPassword,
		"PLAIN_PASSWORD_FILE":    &s.PlainPasswordFile,
		"SCRAM_USERNAME":         &s.ScramUsername,
		"SCRAM_PASSWORD":         &s.ScramPassword,
		"SCRAM_PASSWORD_FILE":    &s.ScramPasswordFile,
		"SCRAM256_USERNAME":      &s.Scram256Username,
		"SCRAM256_PASSWORD":      &s.Scram256Password,
		"SCRAM256_PASSWORD_FILE": &s.Scram256PasswordFile,
		"OAUTHBEARER_TOKEN_FILE": &s.OAuthTokenFile,
	}
	seen := make(map[string]bool)
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%s:%d: no KEY=value: %q", path, n, line)
		}
		field, ok := fields[key]
		if !ok {
			continue // a key of a later script, for other clients
		}
		if *field, err = unquote(value); err != nil {
			return nil, fmt.Errorf("%s:%d: %s: %v", path, n, key, err)
		}
		seen[key] = true
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for key := range fields {
		if !seen[key] {
			return nil, fmt.Errorf("%s: no %s", path, key)
		}
	}
	return &s, nil
}

// unquote returns the value that a shell reads from v, a bare word or single-quoted parts
// joined by \' (as the script writes a value with characters the shell would take for its own).
func unquote(v string) (string, error) {
	if !strings.HasPrefix(v, "'") {
		return v, nil
	}
	var b strings.Builder
	for v != "" {
		switch {
		case v[0] == '\'':
			end := strings.IndexByte(v[1:], '\'')
			if end < 0 {
				return "", errors.New("a quote is not closed")
			}
			b.WriteString(v[1 : 1+end])
			v = v[2+end:]
		case strings.HasPrefix(v, `\'`):
			b.WriteByte('\'')
			v = v[2:]
		default:
			return "", fmt.Errorf("unquoted text %q after a quoted part", v)
		}
	}
	return b.String(), nil
}

// tail returns the last n lines of the file at path, or why it cannot.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
