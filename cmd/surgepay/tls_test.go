package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"math/big"
	"net/http"
	"net/http/httptrace"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/surgepay/surgepay/internal/datadir"
	"github.com/surgepay/surgepay/internal/tlstest"
)

// reloadTimeoutTLS bounds how long a SIGHUP takes to serve the new
// certificate.
const reloadTimeoutTLS = 10 * time.Second

// TestServeRefusesPlainPublic: serve without TLS on an address that is
// not loopback exits non-zero, names the setting to change and creates
// nothing. Nothing listens: the refusal comes first.
func TestServeRefusesPlainPublic(t *testing.T) {
	isolateEnv(t)
	for _, tc := range []struct{ name, listen, admin, setting string }{
		{"API", "0.0.0.0:0", "off", "listen 0.0.0.0:0"},
		{"Admin", "127.0.0.1:0", "10.11.12.13:9090", "admin_listen 10.11.12.13:9090"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("SURGEPAY_LISTEN", tc.listen)
			t.Setenv("SURGEPAY_ADMIN_LISTEN", tc.admin)
			code, stdout, stderr, created := runIn(t, "serve")
			if code == 0 {
				t.Fatal("exit 0, want non-zero")
			}
			for _, want := range []string{tc.setting, "tls.cert_file", "tls.proxy_terminated = true"} {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr)
				}
			}
			if stdout != "" || len(created) > 0 {
				t.Errorf("stdout %q, created %v, want nothing", stdout, created)
			}
		})
	}
}

// tlsEnv is the environment of a serve with cert as its certificate.
func tlsEnv(cert *tlstest.Cert, more ...string) map[string]string {
	env := map[string]string{"SURGEPAY_TLS_CERT_FILE": cert.CertFile, "SURGEPAY_TLS_KEY_FILE": cert.KeyFile}
	for i := 0; i+1 < len(more); i += 2 {
		env[more[i]] = more[i+1]
	}
	return env
}

// serial is the serial number of the certificate a response came over.
func serial(cs *tls.ConnectionState) *big.Int {
	if cs == nil || len(cs.PeerCertificates) == 0 {
		return nil
	}
	return cs.PeerCertificates[0].SerialNumber
}

// TestServeTLS: with tls.cert_file the API and the admin listener speak
// TLS 1.2 or newer only; a SIGHUP serves a new certificate to new
// connections while a keep-alive connection opened before keeps working.
func TestServeTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "surgepay-test")
	first := ca.Server("first")
	dir := t.TempDir()
	cfg := testConfig(t, dir, tlsEnv(first))
	s := startServe(t, cfg)
	key, token := readDevKey(t, dir), readAdminToken(t, dir)
	if want := "surgepay listening on https://" + cfg.Listen; !strings.Contains(s.out.String(), want) {
		t.Errorf("stdout lacks %q:\n%s", want, s.out)
	}
	if want := "curl -s https://" + cfg.Listen; !strings.Contains(s.out.String(), want) {
		t.Errorf("stdout's example lacks %q:\n%s", want, s.out)
	}
	api := "https://" + cfg.Listen + "/v1/customers"
	auth := map[string]string{"Authorization": "Bearer " + key}
	old := &http.Client{Transport: &http.Transport{TLSClientConfig: ca.ClientTLS(), MaxIdleConnsPerHost: 1}}
	defer old.CloseIdleConnections()
	code, _, cs := doRequest(t, old, "GET", api, nil, auth)
	if code != http.StatusOK || serial(cs).Cmp(first.Serial) != 0 || cs.Version < tls.VersionTLS12 {
		t.Fatalf("GET over TLS: status %d, serial %v (want %v), version %x", code, serial(cs), first.Serial, cs.Version)
	}
	alpn := ca.ClientTLS()
	alpn.NextProtos = []string{"h2", "http/1.1"}
	if c, err := tls.Dial("tcp", cfg.Listen, alpn); err != nil {
		t.Errorf("TLS dial offering h2: %v", err)
	} else {
		if p := c.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
			t.Errorf("a client offering h2 and http/1.1 got %q, want http/1.1 (the limits are per connection)", p)
		}
		c.Close()
	}
	adminURL := "https://" + cfg.AdminListen + "/config"
	if code, _, _ := doRequest(t, old, "GET", adminURL, nil, map[string]string{"Authorization": "Bearer " + token}); code != http.StatusOK {
		t.Errorf("GET /config over TLS with the token: status %d, want 200", code)
	}

	// The framing guard reads the plaintext under TLS too: a request with
	// both Content-Length and Transfer-Encoding is refused.
	t.Run("ErrFramingConflictOverTLS", func(t *testing.T) {
		c, err := tls.Dial("tcp", cfg.Listen, ca.ClientTLS())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "POST /v1/customers HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+key+
			"\r\nContent-Type: application/json\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"+
			"2\r\n{}\r\n0\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "framing_conflict") {
			t.Errorf("Content-Length with Transfer-Encoding over TLS: %d %s, want 400 framing_conflict", res.StatusCode, b)
		}
	})
	t.Run("ErrPlainHTTP", func(t *testing.T) {
		code, _, _ := doRequest(t, http.DefaultClient, "GET", "http://"+cfg.Listen+"/v1/customers", nil, auth)
		if code != http.StatusBadRequest {
			t.Errorf("plain HTTP to the TLS listener: status %d, want 400", code)
		}
	})
	t.Run("ErrTLS11", func(t *testing.T) {
		tc := ca.ClientTLS()
		tc.MinVersion, tc.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
		for _, addr := range []string{cfg.Listen, cfg.AdminListen} {
			if c, err := tls.Dial("tcp", addr, tc); err == nil {
				c.Close()
				t.Errorf("a TLS 1.1 client connected to %s, want refused", addr)
			}
		}
		// One failed handshake per connection (scanners, health checks)
		// must not flood the log at warn: debug only.
		time.Sleep(100 * time.Millisecond) // the server logs after the client saw the alert
		if strings.Contains(s.logs.String(), "TLS handshake error") {
			t.Errorf("a failed handshake is logged at warn or above:\n%s", s.logs)
		}
	})

	t.Run("ReloadOnSIGHUP", func(t *testing.T) {
		second := ca.Server("second")
		for src, dst := range map[string]string{second.CertFile: first.CertFile, second.KeyFile: first.KeyFile} {
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := datadir.WriteFileAtomic(dst, b); err != nil {
				t.Fatal(err)
			}
		}
		sendHUP(t) // serve's signal.Notify takes it
		for _, u := range []string{api, "https://" + cfg.AdminListen + "/healthz"} {
			for deadline := time.Now().Add(reloadTimeoutTLS); ; time.Sleep(50 * time.Millisecond) {
				fresh := &http.Client{Transport: &http.Transport{TLSClientConfig: ca.ClientTLS(), DisableKeepAlives: true}}
				_, _, cs := doRequest(t, fresh, "GET", u, nil, auth)
				if serial(cs).Cmp(second.Serial) == 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("a new connection to %s still gets serial %v %s after SIGHUP, want %v", u, serial(cs), reloadTimeoutTLS, second.Serial)
				}
			}
		}
		var reused bool
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }})
		req, _ := http.NewRequestWithContext(ctx, "GET", api, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		res, err := old.Do(req)
		if err != nil {
			t.Fatalf("GET on the keep-alive connection opened before the reload: %v", err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK || !reused || serial(res.TLS).Cmp(first.Serial) != 0 {
			t.Errorf("GET on the connection opened before the reload: status %d, reused %t, serial %v; want 200 on the "+
				"same connection with the first certificate %v", res.StatusCode, reused, serial(res.TLS), first.Serial)
		}
	})
}

// TestServeAdminClientCert: with tls.admin_client_ca_file a client
// certificate from that CA opens the admin listener without the token;
// one from another CA is refused at the handshake; none needs the token.
func TestServeAdminClientCert(t *testing.T) {
	ca := tlstest.NewCA(t, "surgepay-test")
	clients, stranger := tlstest.NewCA(t, "admins"), tlstest.NewCA(t, "stranger")
	dir := t.TempDir()
	cfg := testConfig(t, dir, tlsEnv(ca.Server("server")))
	cfg.TLS.AdminClientCAFile = clients.CertFile
	startServe(t, cfg)
	url := "https://" + cfg.AdminListen + "/config"
	get := func(tc *tls.Config) (int, error) {
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tc, DisableKeepAlives: true}}
		res, err := hc.Get(url)
		if err != nil {
			return 0, err
		}
		res.Body.Close()
		return res.StatusCode, nil
	}
	if code, err := get(ca.ClientTLS(clients.Client("ops"))); code != http.StatusOK {
		t.Errorf("GET /config with an admin client certificate: status %d, %v; want 200", code, err)
	}
	if code, err := get(ca.ClientTLS()); code != http.StatusUnauthorized {
		t.Errorf("GET /config without a client certificate or token: status %d, %v; want 401", code, err)
	}
	// A client sends a certificate the server's CA list does not name
	// only when made to.
	mallory := stranger.Client("mallory")
	forced := ca.ClientTLS()
	forced.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &mallory.TLS, nil }
	if code, err := get(forced); err == nil {
		t.Errorf("GET /config with a certificate of another CA: status %d, want refused at the handshake", code)
	}
	if code, err := get(ca.ClientTLS(mallory)); code != http.StatusUnauthorized {
		t.Errorf("GET /config from a client whose certificate the server does not ask for: status %d, %v; want 401", code, err)
	}
}

// TestServeAdminReadOnlyClientCert: over mutual TLS, a client
// certificate named in tls.admin_read_only_clients reads the admin
// listener and is refused 403 read_only_operator when it would change
// something; another certificate of the same CA acts.
func TestServeAdminReadOnlyClientCert(t *testing.T) {
	ca := tlstest.NewCA(t, "surgepay-test")
	clients := tlstest.NewCA(t, "admins")
	dir := t.TempDir()
	cfg := testConfig(t, dir, tlsEnv(ca.Server("server")))
	cfg.TLS.AdminClientCAFile = clients.CertFile
	cfg.TLS.AdminReadOnlyClients = []string{"support-alice"}
	startServe(t, cfg)
	base := "https://" + cfg.AdminListen
	do := func(cert *tlstest.Cert, method, path string) (int, string) {
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: ca.ClientTLS(cert), DisableKeepAlives: true}}
		req, _ := http.NewRequest(method, base+path, strings.NewReader(`{"name":"Shop"}`))
		res, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	alice, ops := clients.Client("support-alice"), clients.Client("ops")
	for _, p := range []string{"/config", "/admin/v1/merchants", "/console/"} {
		if code, _ := do(alice, "GET", p); code != http.StatusOK {
			t.Errorf("GET %s with the read-only certificate: status %d, want 200", p, code)
		}
	}
	if code, body := do(alice, "POST", "/admin/v1/merchants"); code != http.StatusForbidden || !strings.Contains(body, "read_only_operator") {
		t.Errorf("POST /admin/v1/merchants with the read-only certificate: %d %s, want 403 read_only_operator", code, body)
	}
	if code, body := do(ops, "POST", "/admin/v1/merchants"); code != http.StatusOK || !strings.Contains(body, `"name":"Shop"`) {
		t.Errorf("POST /admin/v1/merchants with another certificate: %d %s, want 200", code, body)
	}
}
