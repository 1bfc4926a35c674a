package broker

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/twmb/franz-go/pkg/kfake"
)

// Options configures Start.
type Options struct {
	// Listen is the "host:port" the broker listens on and advertises to clients. Port 0
	// picks a free port (Broker.Addr tells which). A wildcard host ("", "0.0.0.0", "::")
	// listens on every interface and advertises this machine's host name, or 127.0.0.1
	// when that name does not resolve (Kafka's listeners / advertised.listeners).
	// Required.
	Listen string

	// DataDir is the directory that holds the broker's state: topics, logs, group offsets,
	// producer IDs. It is created when missing and reloaded by the next Start on it. Only
	// one broker may use a data directory at a time. Required.
	DataDir string

	// Logger receives the broker's logs: requests at trace and debug, persistence
	// problems at warn and error. Default: no logs.
	Logger hclog.Logger

	// SyncWrites fsyncs every produced batch before it is acknowledged, so that an
	// acknowledged record survives a machine crash, at a cost in throughput. Default
	// false: batches reach the disk through the page cache, and are fsynced when a
	// segment rolls and at Close, like Kafka's default (log.flush.interval.messages).
	SyncWrites bool
}

// groupMinSessionTimeout is the smallest session timeout the broker lets a consumer group
// member ask for (Kafka's group.min.session.timeout.ms, 6 s by default there). It is low so
// that tests and local runs may detect a dead member, and rebalance, within a second.
const groupMinSessionTimeout = 100 * time.Millisecond

// Broker is a running broker. Its methods are safe for concurrent use.
type Broker struct {
	cluster *kfake.Cluster
	addr    string
	dataDir string
	lock    *os.File
	logs    *kfakeLogger

	closeOnce sync.Once
	closeErr  error
}

// Start starts a broker with the options o and returns once it accepts connections. Topics
// are created explicitly (CreateTopics); a client's metadata request never creates one (Kafka's
// auto.create.topics.enable=false). CreateTopics with a partition count of -1 creates 10
// partitions.
func Start(o Options) (*Broker, error) {
	if o.Listen == "" {
		return nil, errors.New("broker: Options.Listen is required")
	}
	if o.DataDir == "" {
		return nil, errors.New("broker: Options.DataDir is required")
	}
	log := o.Logger
	if log == nil {
		log = hclog.NewNullLogger()
	}
	advertisedHost, err := advertisedHost(o.Listen)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("broker: creating data dir %s: %w", o.DataDir, err)
	}
	lock, err := lockDataDir(o.DataDir)
	if err != nil {
		return nil, err
	}

	// kfake listens on 127.0.0.1 only; its ListenFn lets us hand it our own listener, bound
	// to the configured host, whose Addr is what kfake advertises in metadata.
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("broker: listening on %s: %w", o.Listen, err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	addr := net.JoinHostPort(advertisedHost, strconv.Itoa(port))
	handed := false
	listenFn := func(string, string) (net.Listener, error) {
		if handed {
			return nil, errors.New("broker: only one listener")
		}
		handed = true
		return &advertisedListener{Listener: ln, addr: advertisedAddr(addr)}, nil
	}

	logs := &kfakeLogger{log: log}
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.Ports(port),
		kfake.ListenFn(listenFn),
		kfake.DataDir(o.DataDir),
		kfake.WithLogger(logs),
		// As a broker config rather than kfake.groupMinSessionTimeout: DescribeConfigs then
		// tells it (the option leaves the answer at Kafka's 6000), and run checks the
		// session timeout against it.
		kfake.BrokerConfigs(map[string]string{"group.min.session.timeout.ms": strconv.FormatInt(groupMinSessionTimeout.Milliseconds(), 10)}),
	}
	if o.SyncWrites {
		opts = append(opts, kfake.SyncWrites())
	}
	cluster, err := kfake.NewCluster(opts...)
	if err != nil {
		ln.Close() // kfake closes it only if it got it
		lock.Close()
		return nil, fmt.Errorf("broker: starting on %s with data dir %s: %w", o.Listen, o.DataDir, err)
	}
	return &Broker{cluster: cluster, addr: addr, dataDir: o.DataDir, lock: lock, logs: logs}, nil
}

// Addr returns the "host:port" clients dial: the advertised host (see Options.Listen) and
// the port actually listened on.
func (b *Broker) Addr() string { return b.addr }

// Close stops accepting connections, writes the broker's state to the data directory,
// stops the broker and releases the data directory. It returns an error if the state could
// not be written. Calls after the first return the first call's result.
func (b *Broker) Close() error {
	b.closeOnce.Do(func() {
		b.logs.closing.Store(true)
		b.cluster.Close()
		var errs []error
		if msg := b.logs.closeError(); msg != "" {
			errs = append(errs, fmt.Errorf("broker: flushing to data dir %s: %s", b.dataDir, msg))
		}
		if err := b.lock.Close(); err != nil {
			errs = append(errs, fmt.Errorf("broker: unlocking data dir %s: %w", b.dataDir, err))
		}
		b.closeErr = errors.Join(errs...)
	})
	return b.closeErr
}

// advertisedHost returns the host that clients are told to dial for the listen address.
func advertisedHost(listen string) (string, error) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", fmt.Errorf("broker: listen address %q: %w", listen, err)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return "", fmt.Errorf("broker: listen address %q: %w", listen, err)
	}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		return host, nil
	}
	if name, err := os.Hostname(); err == nil {
		if _, err := net.LookupHost(name); err == nil {
			return name, nil
		}
	}
	return "127.0.0.1", nil
}

// advertisedListener is a listener whose Addr is the address advertised to clients: kfake
// puts its listener's Addr in metadata responses.
type advertisedListener struct {
	net.Listener
	addr net.Addr
}

func (l *advertisedListener) Addr() net.Addr { return l.addr }

// advertisedAddr is a "host:port" net.Addr.
type advertisedAddr string

func (a advertisedAddr) Network() string { return "tcp" }
func (a advertisedAddr) String() string  { return string(a) }
