// Package tlsconfig is TLS on surgepay's listeners: the certificate,
// read at start and again on reload (connections keep the certificate
// they started with), the server configuration (TLS 1.2 or newer, ECDHE
// with AEAD ciphers, HTTP/1.1, client certificates for the admin
// listener), the refusal of plain HTTP beyond loopback, and serving.
package tlsconfig

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"

	"github.com/surgepay/surgepay/api"
)

// tlsVersionMin is the oldest TLS version served: TLS 1.0 and 1.1 are
// deprecated (RFC 8996) and refused by PCI DSS.
const tlsVersionMin = tls.VersionTLS12

// tlsCipherSuites12 are the suites offered to a TLS 1.2 client: ECDHE
// (forward secrecy) with an AEAD cipher only. Go's defaults still offer
// the CBC-SHA1 ones (issue 34 item 12), which PCI DSS scanners flag as
// weak. TLS 1.3's suites are all AEAD and not configurable. Every TLS
// 1.2 client of the last decade has one of these.
var tlsCipherSuites12 = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// CertReloader holds the certificate served by a listener, read from its
// files at start and again by Reload. Safe for concurrent use: a
// handshake reads the current certificate, a reload swaps it atomically,
// so connections open at a reload keep theirs and new ones get the new.
type CertReloader struct {
	certFile, keyFile string
	cert              atomic.Pointer[tls.Certificate]
}

// NewCertReloader reads the certificate and key; an error names the files.
func NewCertReloader(certFile, keyFile string) (*CertReloader, error) {
	c := &CertReloader{certFile: certFile, keyFile: keyFile}
	if err := c.Reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// CertFile is the certificate's file.
func (c *CertReloader) CertFile() string { return c.certFile }

// Reload reads the files again. On error the certificate served so far
// stays.
func (c *CertReloader) Reload() error {
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return fmt.Errorf("tls.cert_file %s, tls.key_file %s: %w", c.certFile, c.keyFile, err)
	}
	c.cert.Store(&cert)
	return nil
}

// GetCertificate is tls.Config.GetCertificate.
func (c *CertReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return c.cert.Load(), nil
}

// Server returns the TLS configuration of a listener serving certs;
// with clientCAFile, a client certificate signed by one of its
// authorities is verified when given (the admin listener takes it as a
// credential), and a client without one still connects (to use the
// token, or /healthz).
func Server(certs *CertReloader, clientCAFile string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tlsVersionMin, CipherSuites: tlsCipherSuites12, GetCertificate: certs.GetCertificate,
		// HTTP/1.1 only: the API's limits (in-flight requests, header and
		// body read timeouts) are per connection and measured on it.
		NextProtos: []string{"http/1.1"}}
	if clientCAFile == "" {
		return tc, nil
	}
	pool, err := loadCertPool(clientCAFile)
	if err != nil {
		return nil, fmt.Errorf("tls.admin_client_ca_file: %w", err)
	}
	tc.ClientCAs, tc.ClientAuth = pool, tls.VerifyClientCertIfGiven
	return tc, nil
}

// loadCertPool reads a PEM file of certificates into a pool.
func loadCertPool(path string) (*x509.CertPool, error) {
	b, err := os.ReadFile(path) //nolint:gosec // G304: the operator names the CA file
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}

// disableHTTP2 keeps srv to HTTP/1.1 over TLS (see Server).
func disableHTTP2(srv *http.Server) {
	srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
}

// IsLoopback reports whether the host of addr (host:port) is a loopback
// address or "localhost". An empty host ("":8080) listens on every
// interface: not loopback.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ErrPlainPublic is the refusal to listen in plain HTTP beyond loopback.
var ErrPlainPublic = errors.New("plain HTTP on an address that is not loopback: card numbers and the admin token " +
	"would cross the network in clear; set tls.cert_file and tls.key_file (SURGEPAY_TLS_CERT_FILE, SURGEPAY_TLS_KEY_FILE), " +
	"or tls.proxy_terminated = true (SURGEPAY_TLS_PROXY_TERMINATED=true) if a proxy in front terminates TLS")

// CheckPlainListen returns ErrPlainPublic for a listener address (named
// by its setting) that would serve plain HTTP beyond loopback.
func CheckPlainListen(t Config, setting, addr string) error {
	if addr == "" || t.Enabled() || t.ProxyTerminated || IsLoopback(addr) {
		return nil
	}
	return fmt.Errorf("%s %s: %w", setting, addr, ErrPlainPublic)
}

// Listeners returns the TLS configurations of the API and admin
// listeners and the certificate they share, or all nil without
// tls.cert_file.
func Listeners(t Config) (api, admin *tls.Config, certs *CertReloader, err error) {
	if !t.Enabled() {
		return nil, nil, nil, nil
	}
	if certs, err = NewCertReloader(t.CertFile, t.KeyFile); err != nil {
		return nil, nil, nil, err
	}
	if api, err = Server(certs, ""); err != nil {
		return nil, nil, nil, err
	}
	if admin, err = Server(certs, t.AdminClientCAFile); err != nil {
		return nil, nil, nil, err
	}
	return api, admin, certs, nil
}

// Scheme is the URL scheme of a listener that serves TLS or not.
func Scheme(secure bool) string {
	if secure {
		return "https"
	}
	return "http"
}

// ServeAPI serves the public API on ln like Serve, with every
// connection's framing checked by api.GuardFraming (a request with both
// Content-Length and Transfer-Encoding is refused 400). The guard must
// read plaintext, so TLS is terminated first, by a tls.NewListener under
// it: the API's requests then carry no r.TLS (the API reads none; the
// admin listener, which checks client certificates, is served by
// Serve), and HTTP/2 is off as it is on every listener.
func ServeAPI(srv *http.Server, ln net.Listener) error {
	if srv.TLSConfig != nil {
		disableHTTP2(srv)
		ln = tls.NewListener(plainHTTPRefuser{ln}, srv.TLSConfig)
	}
	return srv.Serve(api.GuardFraming(ln))
}

// plainHTTPRefuser answers a connection that speaks plain HTTP to the TLS
// listener with 400, as http.Server's own TLS does (a TLS connection
// begins with a handshake record, 0x16; an HTTP request with a method in
// capitals), instead of a silent close.
type plainHTTPRefuser struct{ net.Listener }

func (l plainHTTPRefuser) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &plainHTTPConn{Conn: c}, nil
}

type plainHTTPConn struct {
	net.Conn
	checked bool // the first byte was seen; only the TLS handshake reads it, one goroutine
}

func (c *plainHTTPConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if !c.checked && n > 0 {
		c.checked = true
		if p[0] >= 'A' && p[0] <= 'Z' {
			_, _ = io.WriteString(c.Conn, "HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n"+
				"Connection: close\r\n\r\nClient sent an HTTP request to an HTTPS server.\n")
			_ = c.Close() // errPlainHTTP is the error to report; the client is told above, or gone
			return 0, errPlainHTTP
		}
	}
	return n, err
}

var errPlainHTTP = errors.New("plain HTTP on the TLS listener")

// Serve serves srv on ln, in TLS when srv.TLSConfig is set, HTTP/1.1
// only.
func Serve(srv *http.Server, ln net.Listener) error {
	if srv.TLSConfig == nil {
		return srv.Serve(ln)
	}
	disableHTTP2(srv)
	return srv.ServeTLS(ln, "", "")
}

// ErrorLog is http.Server.ErrorLog for a listener: its lines at
// warn, but failed TLS handshakes at debug. Those come one per
// connection from scanners, TCP health checks and clients that do not
// trust the certificate, and would flood the log at warn.
func ErrorLog(log *slog.Logger) *stdlog.Logger {
	return stdlog.New(handshakeLevel{log}, "", 0)
}

// handshakeLevel writes http.Server's log lines to log at their level.
type handshakeLevel struct{ log *slog.Logger }

func (h handshakeLevel) Write(p []byte) (int, error) {
	msg := strings.TrimSuffix(string(p), "\n")
	level := slog.LevelWarn
	if strings.HasPrefix(msg, "http: TLS handshake error") {
		level = slog.LevelDebug
	}
	h.log.Log(context.Background(), level, msg)
	return len(p), nil
}
