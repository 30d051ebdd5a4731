package loadtest

import (
	"crypto/tls"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/surgepay/surgepay/internal/tlstest"
)

// tlsServer serves "ok" and, with the bearer token, Prometheus text on
// /metrics, over TLS with a certificate of a private CA.
func tlsServer(t *testing.T, token string) (*httptest.Server, *tlstest.CA) {
	t.Helper()
	ca := tlstest.NewCA(t, "loadtest-ca")
	cert := ca.Server("api")
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			if r.Header.Get("Authorization") != "Bearer "+token {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			w.Write([]byte("process_cpu_seconds_total 1.5\nprocess_resident_memory_bytes 1e+07\n"))
			return
		}
		w.Write([]byte("ok"))
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the untrusted handshakes are expected
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert.TLS}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, ca
}

// TestRunHTTPS: a run against an https URL whose certificate a private CA
// signs succeeds with --ca-file, and samples the server's /metrics over
// TLS with --server-metrics-token; without --ca-file every request fails
// (the certificate is not trusted); a --ca-file that holds no certificate
// is a usage error.
func TestRunHTTPS(t *testing.T) {
	const token = "admin-token-0123456789"
	srv, ca := tlsServer(t, token)
	out := filepath.Join(t.TempDir(), "r.json")
	base := []string{"--url", srv.URL, "--scenario", "get", "--rate", "20", "--duration", "1500ms", "--quiet"}
	t.Run("OK", func(t *testing.T) {
		code, stdout, stderr := runMain(t, append(base, "--ca-file", ca.CertFile, "--out", out,
			"--server-metrics", srv.URL+"/metrics", "--server-metrics-token", token, "--threshold", "errors<0.1%")...)
		if code != ExitOK {
			t.Fatalf("exit %d, want %d\n%s%s", code, ExitOK, stdout, stderr)
		}
		res, err := ReadResult(out)
		if err != nil {
			t.Fatal(err)
		}
		if res.Summary.Requests == 0 || res.Summary.Errors != 0 {
			t.Errorf("%d requests, %d errors; want some and none", res.Summary.Requests, res.Summary.Errors)
		}
		if res.Resources.Server.Samples == 0 {
			t.Errorf("no server resource sample over TLS with the token; warnings %v", res.Warnings)
		}
	})
	t.Run("ErrUntrusted", func(t *testing.T) {
		code, stdout, stderr := runMain(t, append(base, "--threshold", "errors<0.1%")...)
		if code == ExitOK {
			t.Errorf("exit %d without --ca-file, want failure (an untrusted certificate)\n%s%s", code, stdout, stderr)
		}
	})
	t.Run("ErrCAFile", func(t *testing.T) {
		code, _, stderr := runMain(t, append(base, "--ca-file", srv.URL)...)
		if code != ExitUsage || !strings.Contains(stderr, "--ca-file") {
			t.Errorf("exit %d, stderr %q; want %d naming --ca-file", code, stderr, ExitUsage)
		}
	})
}
