// Package testcerts makes the certificates of TLS tests: a CA, a server certificate it
// signs for 127.0.0.1 and localhost, and a client certificate for mutual TLS, written as PEM
// files into a test's temporary folder.
package testcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Set is the files of one CA and the certificates it signed.
type Set struct {
	CAFile                string // the CA's certificate
	ServerCert, ServerKey string
	ClientCert, ClientKey string
	// Server is the server's key pair, for a listener (kfake.TLS); ClientCAs holds the CA.
	Server    tls.Certificate
	ClientCAs *x509.CertPool
}

// New writes a Set into a new temporary folder of t.
func New(t testing.TB) Set {
	t.Helper()
	dir := t.TempDir()
	caKey, caCert := key(t), &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "statehost test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caCert, caCert, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	s := Set{CAFile: filepath.Join(dir, "ca.pem"), ClientCAs: x509.NewCertPool()}
	s.ClientCAs.AddCert(ca)
	write(t, s.CAFile, "CERTIFICATE", caDER)
	sign := func(serial int64, name string, usage x509.ExtKeyUsage) (certFile, keyFile string, pair tls.Certificate) {
		k := key(t)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		certFile, keyFile = filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".key")
		write(t, certFile, "CERTIFICATE", der)
		write(t, keyFile, "PRIVATE KEY", kder)
		pair, err = tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		return certFile, keyFile, pair
	}
	s.ServerCert, s.ServerKey, s.Server = sign(2, "server", x509.ExtKeyUsageServerAuth)
	s.ClientCert, s.ClientKey, _ = sign(3, "client", x509.ExtKeyUsageClientAuth)
	return s
}

func key(t testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func write(t testing.TB, path, typ string, der []byte) {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// User is a SASL user of SecureKfake.
type User struct{ Mechanism, Name, Password string }

// SecureKfake starts a kfake broker that takes only TLS, with the Set's server certificate,
// and SASL, with users (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512), and the further opts; it
// returns the broker's address. t's cleanup closes it.
func (s Set) SecureKfake(t testing.TB, users []User, opts ...kfake.Opt) string {
	t.Helper()
	opts = append([]kfake.Opt{kfake.NumBrokers(1),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{s.Server}, MinVersion: tls.VersionTLS12}),
		kfake.EnableSASL()}, opts...)
	for _, u := range users {
		opts = append(opts, kfake.Superuser(u.Mechanism, u.Name, u.Password))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()[0]
}
