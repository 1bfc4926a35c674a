package runtime

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/statehost/statehost/internal/kafkaclient"
	"github.com/statehost/statehost/internal/testcerts"
	"github.com/statehost/statehost/internal/topictest"
	"github.com/statehost/statehost/internal/wordgen"
)

// securedHCL is the word count under exactly-once on brokers reached with TLS (the CA of
// ca) and SCRAM-SHA-512 (the password in the file pw), its produced batches zstd.
func securedHCL(brokers []string, ca, pw string) string {
	block := fmt.Sprintf(`kafka {
  brokers     = [%q]
  compression = "zstd"
  client_id   = "secured-wc"
  tls {
    ca_file = %q
  }
  sasl {
    mechanism     = "SCRAM-SHA-512"
    username      = "statehost"
    password_file = %q
  }
}
`, brokers[0], ca, pw)
	return block + eosHCL()
}

// securedBroker starts a kfake broker that takes only TLS with the certificates of certs
// and SCRAM-SHA-512 as user statehost, and returns its addresses, a folder for the
// configuration, and the file of the user's password in it.
func securedBroker(t *testing.T, certs testcerts.Set) (brokers []string, dir, pw string) {
	t.Helper()
	brokers = []string{certs.SecureKfake(t, []testcerts.User{{Mechanism: "SCRAM-SHA-512", Name: "statehost", Password: "pw-of-statehost"}})}
	dir = t.TempDir()
	pw = filepath.Join(dir, "password")
	if err := os.WriteFile(pw, []byte("pw-of-statehost"), 0o600); err != nil {
		t.Fatal(err)
	}
	return brokers, dir, pw
}

// TestSecuredWordCount runs the word count under exactly-once on a broker that takes only
// TLS with SCRAM-SHA-512: every client of the runtime (group consumer and producer, admin,
// restore and standby clients) connects with the kafka block's settings, and the changelog's
// batches are compressed with the codec it names.
func TestSecuredWordCount(t *testing.T) {
	certs := testcerts.New(t)
	brokers, dir, pw := securedBroker(t, certs)
	cfg := loadConfig(t, dir, securedHCL(brokers, certs.CAFile, pw))
	opts := kafkaclient.Opts(cfg.Kafka, brokers, "test", nil)
	cl, _ := client(t, brokers, opts...)

	in := start(t, cfg, brokers)
	lines, ref := wordgen.Sentences(1000, 1)
	produce(t, cl, "sentences", lines...)
	want := wordgen.Strings(ref)
	waitFor(t, 60*time.Second, "the committed counts", func() bool {
		got, _ := topictest.LatestCommittedWith(t, opts, "wc-counts-changelog")
		return maps.Equal(got, want)
	})
	if err := in.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	// A restart restores from the secured changelog with the restore client.
	if err := os.RemoveAll(StateDir(cfg)); err != nil {
		t.Fatal(err)
	}
	in = start(t, cfg, brokers)
	feed(t, cl, ref, 200, 2)
	want = wordgen.Strings(ref)
	waitFor(t, 60*time.Second, "the counts after a restart", func() bool {
		got, _ := topictest.LatestCommittedWith(t, opts, "wc-counts-changelog")
		return maps.Equal(got, want)
	})
	if n := in.events.restored()["counts"]; n == 0 {
		t.Errorf("the restart on a wiped state restored nothing")
	}
	if err := in.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}

	codecs := topictest.BatchCodecs(t, opts, "wc-counts-changelog")
	if codecs[4] == 0 || codecs[1]+codecs[2]+codecs[3] > 0 {
		t.Errorf("changelog batches by codec %v, want zstd (4) and no other codec (0 is the transaction markers)", codecs)
	}
}

// TestSecuredRefused has New fail at once, naming the broker and the cause, when the
// broker refuses the kafka block's settings.
func TestSecuredRefused(t *testing.T) {
	certs, other := testcerts.New(t), testcerts.New(t)
	brokers, dir, pw := securedBroker(t, certs)
	cfg := loadConfig(t, dir, securedHCL(brokers, other.CAFile, pw))
	begin := time.Now()
	_, err := New(context.Background(), Options{Config: cfg, Brokers: brokers})
	if err == nil || !strings.Contains(err.Error(), "broker "+brokers[0]+": TLS: the broker's certificate is not signed by a CA of kafka.tls.ca_file "+other.CAFile) {
		t.Fatalf("New = %v, want the broker and its untrusted certificate", err)
	}
	if _, ok := errors.AsType[*kafkaclient.UnreachableError](err); ok {
		t.Errorf("New's error is an UnreachableError: %v", err)
	}
	t.Logf("New failed after %v: %v", time.Since(begin).Round(time.Millisecond), err)
}

// TestReplicationFactorAboveClusterSize refuses a replication_factor larger than the
// cluster, on its attribute, and creates no topic.
func TestReplicationFactorAboveClusterSize(t *testing.T) {
	brokers := cluster(t)
	src := fmt.Sprintf("kafka {\n  brokers = [%q]\n  replication_factor = 3\n}\n", brokers[0]) + fmt.Sprintf(wordcountHCL, "pebble", true)
	cfg := loadConfig(t, t.TempDir(), src)
	diags, out := newDiagnostics(t, cfg, brokers)
	if len(diags) != 1 || diags[0].Subject.Start.Line != 3 || !strings.Contains(out, "The replication_factor 3 needs at least 3 brokers, but the cluster ("+brokers[0]+") has 1") {
		t.Fatalf("diagnostics:\n%s\nwant one, on line 3, about the cluster's size", out)
	}
	_, adm := client(t, brokers)
	topics, err := adm.ListTopics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(topics) != 0 {
		t.Errorf("topics %v created, want none", topics.Names())
	}
}
