package probe

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/surgepay/surgepay/config"
)

func TestURL(t *testing.T) {
	for _, tt := range []struct {
		name, listen, admin, cert, path, want string
	}{
		{"the admin listener", "127.0.0.1:8080", "127.0.0.1:9090", "", "/readyz", "http://127.0.0.1:9090/readyz"},
		{"admin off: the API listener", "10.0.0.5:8080", "", "", "/healthz", "http://10.0.0.5:8080/healthz"},
		{"all IPv4 interfaces: loopback", "", "0.0.0.0:9090", "", "/readyz", "http://127.0.0.1:9090/readyz"},
		{"no host: loopback", "", ":9090", "", "/readyz", "http://127.0.0.1:9090/readyz"},
		{"all IPv6 interfaces: loopback", "", "[::]:9090", "", "/readyz", "http://[::1]:9090/readyz"},
		{"TLS", "", "127.0.0.1:9090", "/etc/surgepay/cert.pem", "/readyz", "https://127.0.0.1:9090/readyz"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Listen, cfg.AdminListen, cfg.TLS.CertFile = tt.listen, tt.admin, tt.cert
			if got, err := URL(cfg, tt.path); err != nil || got != tt.want {
				t.Errorf("URL = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	cfg := config.Default()
	cfg.AdminListen = "nonsense"
	if _, err := URL(cfg, "/readyz"); err == nil {
		t.Error("an address without a port: no error")
	}
}

// configFor is a configuration whose admin listener is srv's, over TLS
// if srv speaks it.
func configFor(srv *httptest.Server) config.Config {
	cfg := config.Default()
	cfg.AdminListen = srv.Listener.Addr().String()
	if srv.TLS != nil {
		cfg.TLS.CertFile = "cert.pem" // only whether TLS is on is read
	}
	return cfg
}

func TestCheck(t *testing.T) {
	var notReady atomic.Bool
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/slow":
			time.Sleep(2 * time.Second)
		case r.URL.Path == "/readyz" && notReady.Load():
			http.Error(w, `{"status":"starting"}`, http.StatusServiceUnavailable)
		case r.URL.Path == "/readyz" || r.URL.Path == "/healthz":
			w.Write([]byte("ok\n")) //nolint:errcheck // a test server's answer
		default:
			http.NotFound(w, r)
		}
	})
	plain := httptest.NewServer(handler)
	defer plain.Close()
	secure := httptest.NewTLSServer(handler)
	defer secure.Close()
	ctx := context.Background()

	if err := Check(ctx, configFor(plain), "/readyz", time.Second); err != nil {
		t.Errorf("a ready server: %v", err)
	}
	if err := Check(ctx, configFor(secure), "/readyz", time.Second); err != nil {
		t.Errorf("a ready server over TLS (a certificate for no name of its address): %v", err)
	}
	notReady.Store(true)
	if err := Check(ctx, configFor(plain), "/readyz", time.Second); err == nil || !strings.Contains(err.Error(), "503") ||
		!strings.Contains(err.Error(), "starting") {
		t.Errorf("a server not ready: %v, want the 503 and its body", err)
	}
	if err := Check(ctx, configFor(plain), "/healthz", time.Second); err != nil {
		t.Errorf("--live on a live server not ready: %v, want nil", err)
	}
	start := time.Now()
	if err := Check(ctx, configFor(plain), "/slow", 200*time.Millisecond); err == nil || time.Since(start) > 1500*time.Millisecond {
		t.Errorf("a server that does not answer: %v after %v, want an error within the timeout", err, time.Since(start))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.AdminListen = ln.Addr().String()
	ln.Close()
	if err := Check(ctx, cfg, "/readyz", time.Second); err == nil || !strings.Contains(err.Error(), cfg.AdminListen) {
		t.Errorf("nothing listening: %v, want an error naming %s", err, cfg.AdminListen)
	}
}

// Main's exit codes: 0 ready, 1 not, 2 a usage error.
func TestMainExitCodes(t *testing.T) {
	t.Setenv("SURGEPAY_CONFIG", "")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.Error(w, "starting", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	t.Setenv("SURGEPAY_ADMIN_LISTEN", srv.Listener.Addr().String())
	for _, tt := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{nil, 1, "503"},
		{[]string{"--live"}, 0, ""},
		{[]string{"--timeout", "0s"}, 2, "--timeout"},
		{[]string{"extra"}, 2, "surgepay help healthcheck"},
	} {
		var stdout, stderr bytes.Buffer
		if code := Main(context.Background(), tt.args, &stdout, &stderr); code != tt.code || !strings.Contains(stderr.String(), tt.stderr) {
			t.Errorf("healthcheck %v: exit %d, stderr %q; want %d and %q", tt.args, code, stderr.String(), tt.code, tt.stderr)
		}
	}
}
