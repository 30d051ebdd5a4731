// Package tlstest makes certificate authorities and certificates for
// tests, in process (crypto/x509), written as PEM files in a test's
// temporary folder. Keys are ECDSA P-256: fast to make.
package tlstest

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
)

// CA is a certificate authority. CertFile is its certificate as PEM: the
// file a client trusts (a CA file) or a server checks client
// certificates against.
type CA struct {
	t        testing.TB
	dir      string
	cert     *x509.Certificate
	key      *ecdsa.PrivateKey
	CertFile string
	// Pool holds the CA's certificate, for a tls.Config's RootCAs.
	Pool *x509.CertPool
}

// Cert is a certificate issued by a CA, with its key: CertFile (the
// leaf) and KeyFile as PEM.
type Cert struct {
	CertFile, KeyFile string
	// Serial tells two certificates apart (tls.ConnectionState's
	// PeerCertificates[0].SerialNumber).
	Serial *big.Int
	TLS    tls.Certificate
}

// NewCA makes a CA named name in a new temporary folder.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{SerialNumber: serial(t), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &CA{t: t, dir: t.TempDir(), cert: cert, key: key, Pool: x509.NewCertPool()}
	ca.Pool.AddCert(cert)
	ca.CertFile = ca.write(name+"-ca.pem", "CERTIFICATE", der)
	return ca
}

// Server issues a server certificate for hosts (IP addresses or DNS
// names; default 127.0.0.1 and localhost), written as name.pem and
// name-key.pem.
func (ca *CA) Server(name string, hosts ...string) *Cert {
	ca.t.Helper()
	if len(hosts) == 0 {
		hosts = []string{"127.0.0.1", "localhost"}
	}
	tmpl := ca.leaf(name, x509.ExtKeyUsageServerAuth)
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return ca.issue(name, tmpl)
}

// Client issues a client certificate for common name name.
func (ca *CA) Client(name string) *Cert {
	ca.t.Helper()
	return ca.issue(name, ca.leaf(name, x509.ExtKeyUsageClientAuth))
}

// ClientTLS returns a client configuration trusting only ca, with certs
// as client certificates.
func (ca *CA) ClientTLS(certs ...*Cert) *tls.Config {
	tc := &tls.Config{RootCAs: ca.Pool}
	for _, c := range certs {
		tc.Certificates = append(tc.Certificates, c.TLS)
	}
	return tc
}

func (ca *CA) leaf(name string, usage x509.ExtKeyUsage) *x509.Certificate {
	return &x509.Certificate{SerialNumber: serial(ca.t), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
}

func (ca *CA) issue(name string, tmpl *x509.Certificate) *Cert {
	ca.t.Helper()
	key := newKey(ca.t)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		ca.t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		ca.t.Fatal(err)
	}
	c := &Cert{CertFile: ca.write(name+".pem", "CERTIFICATE", der), KeyFile: ca.write(name+"-key.pem", "PRIVATE KEY", kder),
		Serial: tmpl.SerialNumber}
	if c.TLS, err = tls.LoadX509KeyPair(c.CertFile, c.KeyFile); err != nil {
		ca.t.Fatal(err)
	}
	return c
}

func (ca *CA) write(name, kind string, der []byte) string {
	ca.t.Helper()
	path := filepath.Join(ca.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		ca.t.Fatal(err)
	}
	return path
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n.Add(n, big.NewInt(1))
}
