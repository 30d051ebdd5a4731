package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/surgepay/surgepay/config"
)

// TestServeReadTimeouts: serve applies read_header_timeout (a connection
// whose headers never end is closed) and body_read_timeout (a body that
// stops coming is answered 408 body_timeout), from the configuration.
func TestServeReadTimeouts(t *testing.T) {
	cfg := testConfig(t, t.TempDir(), nil)
	cfg.ReadHeaderTimeout = config.Duration{Duration: 200 * time.Millisecond}
	cfg.BodyReadTimeout = config.Duration{Duration: 200 * time.Millisecond}
	startServe(t, cfg)
	key := readDevKey(t, cfg.DataDir)
	// A generous client deadline: the server must end the exchange well
	// before it (the defaults, 5 s and 10 s, would too; the client would
	// still be waiting at 60 s with no server timeout at all).
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", cfg.Listen)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(60 * time.Second))
		return c, bufio.NewReader(c)
	}

	t.Run("Headers", func(t *testing.T) {
		c, br := dial()
		if _, err := io.WriteString(c, "GET /v1/customers HTTP/1.1\r\nHost: x\r\n"); err != nil {
			t.Fatal(err)
		}
		if _, err := br.ReadByte(); err != io.EOF {
			t.Errorf("a request whose headers never end: read %v, want EOF (the server closed it)", err)
		}
	})
	t.Run("Body", func(t *testing.T) {
		c, br := dial()
		if _, err := io.WriteString(c, "POST /v1/customers HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "+key+
			"\r\nContent-Type: application/json\r\nContent-Length: 50\r\n\r\n{"); err != nil {
			t.Fatal(err)
		}
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("a body that stops: %v, want an answer", err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(body), `"body_timeout"`) {
			t.Errorf("a body that stops: %d %s, want 408 body_timeout", res.StatusCode, body)
		}
	})
}
