package kafkaclient_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/statehost/statehost/config"
	"github.com/statehost/statehost/internal/kafkaclient"
)

// kafkaBlock decodes a configuration whose kafka block has the brokers seeds and the
// attributes of block, as Load does, and returns the block.
func kafkaBlock(t *testing.T, seeds []string, block string) config.Kafka {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "count.wasm"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	brokers := ""
	for i, s := range seeds {
		if i > 0 {
			brokers += ", "
		}
		brokers += `"` + s + `"`
	}
	src := "application_id = \"app\"\n\nkafka {\n  brokers = [" + brokers + "]\n" + block + "\n}\n\n" +
		"processor \"count\" {\n  module = \"count.wasm\"\n  inputs = [\"words\"]\n}\n"
	c, diags := config.Parse([]byte(src), filepath.Join(dir, "statehost.hcl"), config.Options{})
	if diags.HasErrors() {
		t.Fatalf("Parse:\n%s\n%v", src, diags)
	}
	return c.Kafka
}

// producerClient builds a client, as the runtime's producers are built, from Opts and
// ProducerOpts of k, without asking the brokers anything.
func producerClient(t *testing.T, k config.Kafka, role string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append(kafkaclient.Opts(k, k.Brokers, role, nil), kafkaclient.ProducerOpts(k)...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestClientSettings reads back from franz-go clients the settings of the kafka block that
// Opts and ProducerOpts apply: client_id, rack, request_timeout, compression, linger and
// batch_size, set and unset. Unset, a client gets the defaults config/doc.go documents, not
// franz-go's own (snappy, a 10ms linger, batches of 1,000,012 bytes). fetch_max_bytes is
// applied by host/runtime, not here.
func TestClientSettings(t *testing.T) {
	seeds := plainCluster(t, 1)
	for _, c := range []struct {
		name, block, role string

		clientID, rack  string
		timeout, linger time.Duration
		batch           int32
		codec           kgo.CompressionCodec
	}{
		{"unset", "", "producer",
			"app-producer", "", 10 * time.Second, 5 * time.Millisecond, 1 << 20, kgo.NoCompression()},
		{"set", `
  client_id       = "wc-prod"
  rack            = "eu-west-1a"
  request_timeout = "45s"
  compression     = "zstd"
  linger          = "20ms"
  batch_size      = "256KiB"`, "consumer",
			"wc-prod-consumer", "eu-west-1a", 45 * time.Second, 20 * time.Millisecond, 256 << 10, kgo.ZstdCompression()},
		// No role: the client id alone. A linger of 0 stays 0, not franz-go's 10ms.
		{"no role, no linger", `
  client_id = "wc-prod"
  linger    = "0s"`, "",
			"wc-prod", "", 10 * time.Second, 0, 1 << 20, kgo.NoCompression()},
		{"gzip", `compression = "gzip"`, "producer", "app-producer", "", 10 * time.Second, 5 * time.Millisecond, 1 << 20, kgo.GzipCompression()},
		{"snappy", `compression = "snappy"`, "producer", "app-producer", "", 10 * time.Second, 5 * time.Millisecond, 1 << 20, kgo.SnappyCompression()},
		{"lz4", `compression = "lz4"`, "producer", "app-producer", "", 10 * time.Second, 5 * time.Millisecond, 1 << 20, kgo.Lz4Compression()},
		{"none", `compression = "none"`, "producer", "app-producer", "", 10 * time.Second, 5 * time.Millisecond, 1 << 20, kgo.NoCompression()},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl := producerClient(t, kafkaBlock(t, seeds, c.block), c.role)
			if got := cl.OptValue(kgo.SeedBrokers); !slices.Equal(got.([]string), seeds) {
				t.Errorf("seed brokers %v, want %v", got, seeds)
			}
			if got := cl.OptValue(kgo.ClientID); got != c.clientID {
				t.Errorf("client id %q, want %q", got, c.clientID)
			}
			if got := cl.OptValue(kgo.Rack); got != c.rack {
				t.Errorf("rack %q, want %q", got, c.rack)
			}
			if got := cl.OptValue(kgo.RequestTimeoutOverhead); got != c.timeout {
				t.Errorf("request timeout overhead %v, want %v", got, c.timeout)
			}
			if got := cl.OptValue(kgo.ProducerLinger); got != c.linger {
				t.Errorf("linger %v, want %v", got, c.linger)
			}
			if got := cl.OptValue(kgo.ProducerBatchMaxBytes); got != c.batch {
				t.Errorf("batch max bytes %v, want %d", got, c.batch)
			}
			// One codec, no fallback: franz-go falls back only to codecs it is given.
			if got := cl.OptValue(kgo.ProducerBatchCompression).([]kgo.CompressionCodec); !slices.Equal(got, []kgo.CompressionCodec{c.codec}) {
				t.Errorf("compression %v, want [%v]", got, c.codec)
			}
		})
	}
}
