package tlsconfig

import (
	"bytes"
	"crypto/tls"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/surgepay/surgepay/internal/tlstest"
)

// TestCheckPlainListen: plain HTTP is refused beyond loopback, naming the
// setting and address, unless TLS is on or a proxy terminates it.
func TestCheckPlainListen(t *testing.T) {
	for _, tc := range []struct {
		addr string
		tls  Config
		ok   bool
	}{
		{"127.0.0.1:8080", Config{}, true},
		{"127.9.9.9:8080", Config{}, true},
		{"[::1]:8080", Config{}, true},
		{"localhost:8080", Config{}, true},
		{"", Config{}, true}, // admin_listen off
		{":8080", Config{}, false},
		{"0.0.0.0:8080", Config{}, false},
		{"[::]:8080", Config{}, false},
		{"10.0.0.5:8080", Config{}, false},
		{"api.example.com:8080", Config{}, false},
		{"0.0.0.0:8080", Config{ProxyTerminated: true}, true},
		{"0.0.0.0:8443", Config{CertFile: "c.pem", KeyFile: "k.pem"}, true},
	} {
		err := CheckPlainListen(tc.tls, "listen", tc.addr)
		if (err == nil) != tc.ok {
			t.Errorf("CheckPlainListen(%+v, %q) = %v, want ok %t", tc.tls, tc.addr, err, tc.ok)
		}
		if err != nil && (!errors.Is(err, ErrPlainPublic) || !strings.Contains(err.Error(), "listen "+tc.addr)) {
			t.Errorf("CheckPlainListen(%q) = %v, want ErrPlainPublic naming the setting and address", tc.addr, err)
		}
	}
}

// TestCertReloaderKeepsCertOnError: files that do not load are refused
// by name at start, and a reload from them keeps the running
// certificate.
func TestCertReloaderKeepsCertOnError(t *testing.T) {
	ca := tlstest.NewCA(t, "surgepay-test")
	cert := ca.Server("server")
	if _, err := NewCertReloader(cert.CertFile+".missing", cert.KeyFile); err == nil || !strings.Contains(err.Error(), "tls.cert_file") {
		t.Errorf("NewCertReloader with a missing file: %v, want an error naming tls.cert_file", err)
	}
	r, err := NewCertReloader(cert.CertFile, cert.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cert.KeyFile, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := r.Reload(); err == nil {
		t.Error("Reload from a broken key file: nil error, want refused")
	}
	got, _ := r.GetCertificate(nil)
	if got == nil || len(got.Certificate) == 0 || !bytes.Equal(got.Certificate[0], cert.TLS.Certificate[0]) {
		t.Error("after a refused reload the served certificate changed, want the running one")
	}
}

// TestServerAEADOnly is issue 34 item 12: TLS 1.2 offered the CBC-SHA1
// suites of Go's defaults. A TLS 1.2 client offering only those is
// refused at the handshake; one offering an ECDHE AEAD suite connects.
func TestServerAEADOnly(t *testing.T) {
	ca := tlstest.NewCA(t, "surgepay-test")
	cert := ca.Server("server")
	certs, err := NewCertReloader(cert.CertFile, cert.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := Server(certs, "")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", tc)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake() // fails for the refused suites by design; the client's dial decides the test
			c.Close()
		}
	}()
	dial := func(suites ...uint16) error {
		cc := ca.ClientTLS()
		cc.MaxVersion, cc.CipherSuites = tls.VersionTLS12, suites
		c, err := tls.Dial("tcp", ln.Addr().String(), cc)
		if err == nil {
			c.Close()
		}
		return err
	}
	cbc := []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA, tls.TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA,
		tls.TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA, tls.TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA}
	if err := dial(cbc...); err == nil {
		t.Error("a TLS 1.2 client offering only CBC-SHA1 suites connected, want refused")
	}
	if err := dial(tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256); err != nil {
		t.Errorf("a TLS 1.2 client offering ECDHE AES-GCM: %v, want connected", err)
	}
}
