package jetstream_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/surgepay/surgepay/internal/tlstest"
	"github.com/surgepay/surgepay/stage/jetstream"
	"github.com/surgepay/surgepay/stage/stagetest"
)

// TestOpenTLS: a nats-server whose config has a tls block that verifies
// clients takes records from a stage configured with the CA file that
// signs its certificate and a client certificate (stage.nats_tls_*); a
// stage that trusts only the system's roots, or sends no client
// certificate, is refused.
func TestOpenTLS(t *testing.T) {
	serverCA, clientCA := tlstest.NewCA(t, "nats-server-ca"), tlstest.NewCA(t, "nats-client-ca")
	cert, client := serverCA.Server("nats"), clientCA.Client("surgepay")
	conf := filepath.Join(t.TempDir(), "nats.conf")
	text := fmt.Sprintf("tls {\n  cert_file: %q\n  key_file: %q\n  ca_file: %q\n  verify: true\n  timeout: 2\n}\n",
		cert.CertFile, cert.KeyFile, clientCA.CertFile)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	url := stagetest.StartNATS(t, "-c", conf).URL
	good := jetstream.Config{URL: url, TLSCAFile: serverCA.CertFile, TLSCertFile: client.CertFile, TLSKeyFile: client.KeyFile}
	s, err := jetstream.Open(context.Background(), good)
	if err != nil {
		t.Fatalf("Open with the CA file and a client certificate: %v", err)
	}
	defer s.Close()
	put(t, s, rec(1))
	if n, _ := backlog(t, s); n != 1 {
		t.Errorf("backlog %d after one Put over TLS, want 1", n)
	}
	for name, bad := range map[string]jetstream.Config{
		"ErrSystemRoots":   {URL: strings.Replace(url, "nats://", "tls://", 1), TLSCertFile: client.CertFile, TLSKeyFile: client.KeyFile},
		"ErrNoClientCert":  {URL: url, TLSCAFile: serverCA.CertFile},
		"ErrPlainExpected": {URL: url},
	} {
		if s, err := jetstream.Open(context.Background(), bad); err == nil {
			s.Close()
			t.Errorf("%s: Open connected, want refused", name)
		}
	}
}
