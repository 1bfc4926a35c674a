package kafkacluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadSecurity reads a credentials file as scripts/kafka writes it, a value with
// characters the shell would take for its own in single quotes, and checks each value against
// what bash reads when it sources the file; it needs neither java nor a cluster.
func TestReadSecurity(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "it's a dir")
	quoted := `'` + strings.ReplaceAll(dir, `'`, `'\''`) + `'`
	lines := []string{
		"SASL_SSL_BOOTSTRAP=127.0.0.1:1,127.0.0.1:2",
		"PLAINTEXT_BOOTSTRAP=127.0.0.1:3,127.0.0.1:4",
		"CA_FILE=" + quoted + "'/ca.pem'",
		"OTHER_CA_FILE=" + quoted + "'/other-ca.pem'",
		"CLIENT_CERT_FILE=/d/client.pem",
		"CLIENT_KEY_FILE=/d/client.key",
		"PLAIN_USERNAME=statehost-plain",
		"PLAIN_PASSWORD=abc123",
		"PLAIN_PASSWORD_FILE=/d/plain.password",
		"SCRAM_USERNAME=statehost-scram",
		"SCRAM_PASSWORD='a b'\\''c'",
		"SCRAM_PASSWORD_FILE=/d/scram.password",
		"SCRAM256_USERNAME=statehost-scram256",
		"SCRAM256_PASSWORD=def456",
		"SCRAM256_PASSWORD_FILE=/d/scram256.password",
		"OAUTHBEARER_TOKEN_FILE=/d/oauth.token",
		"LATER_KEY=ignored",
	}
	path := filepath.Join(t.TempDir(), "credentials")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := readSecurity(path)
	if err != nil {
		t.Fatal(err)
	}
	for key, got := range map[string]string{
		"SASL_SSL_BOOTSTRAP":     s.SASLSSLBootstrap,
		"PLAINTEXT_BOOTSTRAP":    s.PlaintextBootstrap,
		"CA_FILE":                s.CAFile,
		"OTHER_CA_FILE":          s.OtherCAFile,
		"CLIENT_CERT_FILE":       s.ClientCertFile,
		"CLIENT_KEY_FILE":        s.ClientKeyFile,
		"PLAIN_USERNAME":         s.PlainUsername,
		"PLAIN_PASSWORD":         s.PlainPassword,
		"PLAIN_PASSWORD_FILE":    s.PlainPasswordFile,
		"SCRAM_USERNAME":         s.ScramUsername,
		"SCRAM_PASSWORD":         s.ScramPassword,
		"SCRAM_PASSWORD_FILE":    s.ScramPasswordFile,
		"SCRAM256_USERNAME":      s.Scram256Username,
		"SCRAM256_PASSWORD":      s.Scram256Password,
		"SCRAM256_PASSWORD_FILE": s.Scram256PasswordFile,
		"OAUTHBEARER_TOKEN_FILE": s.OAuthTokenFile,
	} {
		out, err := exec.Command("bash", "-c", `source "$1" && printf %s "${!2}"`, "bash", path, key).Output()
		if err != nil {
			t.Fatalf("bash sourcing %s: %v", path, err)
		}
		if got != string(out) {
			t.Errorf("%s: read %q, bash reads %q", key, got, out)
		}
	}
	if want := dir + "/ca.pem"; s.CAFile != want {
		t.Errorf("CA_FILE: read %q, want %q", s.CAFile, want)
	}
	if got := s.SASLSSLBrokers(); len(got) != 2 || got[1] != "127.0.0.1:2" {
		t.Errorf("SASLSSLBrokers() = %q", got)
	}

	// A file without one of the keys is refused.
	if err := os.WriteFile(path, []byte(strings.Join(lines[1:], "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readSecurity(path); err == nil || !strings.Contains(err.Error(), "no SASL_SSL_BOOTSTRAP") {
		t.Errorf("a file without SASL_SSL_BOOTSTRAP: %v, want an error naming it", err)
	}
}
