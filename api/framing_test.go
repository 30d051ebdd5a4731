package api_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/surgepay/surgepay/api"
	"github.com/surgepay/surgepay/internal/testenv"
)

// serveRaw serves e's engine on a real loopback listener, guarded or not,
// and returns its address.
func serveRaw(t *testing.T, e *env, guard bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewJSONHandler(e.logs, nil))
	srv := &http.Server{Handler: api.New(api.Config{Engine: e.eng, Logger: log}), ReadHeaderTimeout: 5 * time.Second}
	served := ln
	if guard {
		served = api.GuardFraming(ln)
	}
	go srv.Serve(served)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// rawResponse is a response read off a raw connection, its body read and
// closed.
type rawResponse struct {
	StatusCode int
	Header     http.Header
	Close      bool // the response closes the connection
	Body       []byte
}

// rawExchange writes raw to a new connection and reads up to n responses,
// fewer if the server closes it.
func rawExchange(t *testing.T, addr, raw string, n int) []rawResponse {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(2 * time.Second)) // a bound on a hang, not a timing assertion
	br := bufio.NewReader(c)
	var out []rawResponse
	for len(out) < n {
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			return out
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		out = append(out, rawResponse{StatusCode: res.StatusCode, Header: res.Header, Close: res.Close, Body: b})
		if res.Close {
			return out
		}
	}
	return out
}

// conflicting is a POST whose Content-Length (10) and chunked body
// disagree: framed by Content-Length it is one request; framed by chunks
// (what Go does) the bytes after the last chunk are a second, smuggled
// request.
func conflicting(key string) string {
	smuggled := "GET /v1/customers HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + key + "\r\n\r\n"
	body := `{"name":"Smuggler"}`
	return "POST /v1/customers HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + key + "\r\n" +
		"Content-Type: application/json\r\nContent-Length: 10\r\nTransfer-Encoding: chunked\r\n\r\n" +
		strings.ToLower(strings.TrimLeft(itoa16(len(body)), "0")) + "\r\n" + body + "\r\n0\r\n\r\n" + smuggled
}

func itoa16(n int) string { const h = "0123456789abcdef"; return string([]byte{h[n>>4&0xf], h[n&0xf]}) }

// TestFramingConflictGoAlone documents what Go's server does by itself
// with a request carrying both Content-Length and Transfer-Encoding: it
// serves it by its chunks and then the smuggled request after them. If a
// Go release starts refusing it, this test says so, and GuardFraming may go.
func TestFramingConflictGoAlone(t *testing.T) {
	e := newEnv(t, testenv.OpenSQLite(t))
	res := rawExchange(t, serveRaw(t, e, false), conflicting(e.keyA), 2)
	if len(res) != 2 || res[0].StatusCode != 200 || res[1].StatusCode != 200 {
		t.Fatalf("Go alone: got %d responses %v; this test expected 2 × 200 (the request and the smuggled one)", len(res), statuses(res))
	}
}

// TestFramingConflictRefused: behind GuardFraming (as surgepay serve
// runs), the same request is 400 framing_conflict, nothing is created,
// and the connection closes before the smuggled request.
func TestFramingConflictRefused(t *testing.T) {
	e := newEnv(t, testenv.OpenSQLite(t))
	addr := serveRaw(t, e, true)
	res := rawExchange(t, addr, conflicting(e.keyA), 2)
	if len(res) != 1 || res[0].StatusCode != 400 || !res[0].Close {
		t.Fatalf("got %d responses %v, want one 400 that closes the connection", len(res), statuses(res))
	}
	var eb struct{ Error struct{ Code, Param string } }
	if err := json.NewDecoder(bytes.NewReader(res[0].Body)).Decode(&eb); err != nil {
		t.Fatalf("error body %q: %v", res[0].Body, err)
	}
	if eb.Error.Code != "framing_conflict" || eb.Error.Param != "Transfer-Encoding" {
		t.Fatalf("error %+v, want framing_conflict on Transfer-Encoding", eb.Error)
	}
	if list := e.must(200, e.keyA, "GET", "/v1/customers?limit=100", ""); strings.Contains(string(list.Raw), "Smuggler") {
		t.Fatalf("the refused request created a customer: %s", list.Raw)
	}
	// Any case of the names, and the order reversed.
	raw := "POST /v1/customers HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + e.keyA + "\r\ntransfer-encoding: chunked\r\n" +
		"Content-Type: application/json\r\ncontent-LENGTH: 2\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
	if res := rawExchange(t, addr, raw, 2); len(res) != 1 || res[0].StatusCode != 400 {
		t.Fatalf("lower-case names: got %v, want one 400", statuses(res))
	}
}

// TestGuardFramingKeepsTraffic: a guarded connection carries pipelined
// requests framed every legal way, split across reads anywhere, unchanged.
func TestGuardFramingKeepsTraffic(t *testing.T) {
	e := newEnv(t, testenv.OpenSQLite(t))
	addr := serveRaw(t, e, true)
	auth := "Host: x\r\nAuthorization: Bearer " + e.keyA + "\r\n"
	reqs := []string{
		"POST /v1/customers HTTP/1.1\r\n" + auth + "Content-Type: application/json\r\nContent-Length: 15\r\n\r\n{\"name\":\"Ada\"}\n",
		"POST /v1/customers HTTP/1.1\r\n" + auth + "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" +
			"5;ext=1\r\n{\"nam\r\nB\r\ne\":\"Grace\"}\r\n0\r\nX-Trailer: 1\r\n\r\n",
		"GET /v1/customers?limit=2 HTTP/1.1\r\n" + auth + "\r\n",
		"POST /v1/customers HTTP/1.1\r\n" + auth + "Content-Type: application/json\r\nContent-Length: 0\r\n\r\n",
		"POST /v1/customers HTTP/1.0\r\n" + auth + "Connection: keep-alive\r\nContent-Type: application/json\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n{}",
	}
	res := rawExchange(t, addr, strings.Join(reqs, ""), len(reqs))
	if len(res) != len(reqs) {
		for _, r := range res {
			t.Logf("%d %s", r.StatusCode, r.Body)
		}
		t.Fatalf("got %d responses %v, want %d", len(res), statuses(res), len(reqs))
	}
	for i, r := range res {
		if r.StatusCode != 200 {
			t.Errorf("request %d: %d %s\nlog: %s", i, r.StatusCode, r.Body, e.logs.String())
		}
	}
	list := e.must(200, e.keyA, "GET", "/v1/customers?limit=100", "")
	if !strings.Contains(string(list.Raw), `"Ada"`) || !strings.Contains(string(list.Raw), `"Grace"`) {
		t.Fatalf("bodies changed on the way: %s", list.Raw)
	}
	// A head over the bound is refused 431, and the connection closed.
	huge := "GET /v1/customers HTTP/1.1\r\n" + auth + "X-Pad: " + strings.Repeat("p", api.FramingHeadBytesMax) + "\r\n\r\n"
	if res := rawExchange(t, addr, huge+huge, 2); len(res) != 1 || res[0].StatusCode != 431 || !res[0].Close {
		t.Fatalf("a %d-byte head: got %v, want one 431 closing the connection", len(huge), statuses(res))
	}
}

func statuses(res []rawResponse) []int {
	out := make([]int, len(res))
	for i, r := range res {
		out[i] = r.StatusCode
	}
	return out
}

// A header folded over lines, which Go joins and a proxy may not, is
// refused with the connection closed: before, the guard read
// "Transfer-Encoding:\r\n chunked" as no encoding, stopped following the
// connection, and a conflicting request after it on the same connection
// was served (found by review).
func TestFramingFoldedHeaderRefused(t *testing.T) {
	e := newEnv(t, testenv.OpenSQLite(t))
	addr := serveRaw(t, e, true)
	auth := "Host: x\r\nAuthorization: Bearer " + e.keyA + "\r\nContent-Type: application/json\r\n"
	for name, first := range map[string]string{
		"TransferEncoding": "POST /v1/customers HTTP/1.1\r\n" + auth + "Transfer-Encoding:\r\n chunked\r\n\r\n" +
			"e\r\n{\"name\":\"Ada\"}\r\n0\r\n\r\n",
		"ContentLength": "POST /v1/customers HTTP/1.1\r\n" + auth + "Content-Length:\r\n 14\r\n\r\n{\"name\":\"Ada\"}",
		"OtherEncoding": "POST /v1/customers HTTP/1.1\r\n" + auth + "Transfer-Encoding: gzip, chunked\r\n\r\n" +
			"e\r\n{\"name\":\"Ada\"}\r\n0\r\n\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			res := rawExchange(t, addr, first+conflicting(e.keyA), 3)
			if len(res) != 1 || res[0].StatusCode != 400 || !res[0].Close {
				t.Fatalf("got %d responses %v, want one refusal that closes the connection", len(res), statuses(res))
			}
		})
	}
	if list := e.must(200, e.keyA, "GET", "/v1/customers?limit=100", ""); strings.Contains(string(list.Raw), "Smuggler") {
		t.Fatalf("a request after the folded one was served: %s", list.Raw)
	}
}

// TestGuardFramingAnyReadSize: the guard passes a pipelined stream through
// unchanged whatever the reader's buffer (net/http reads 4 KiB at a time,
// and 1 byte in its background read), and renames a conflicting head's
// Content-Length however its bytes are split.
func TestGuardFramingAnyReadSize(t *testing.T) {
	plain := "POST /v1/customers HTTP/1.1\r\nHost: x\r\nContent-Length: 15\r\n\r\n{\"name\":\"Ada\"}\n" +
		"POST /v1/customers HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\n{\"nam\r\nB\r\ne\":\"Grace\"}\r\n0\r\nX-Trailer: 1\r\n\r\n" +
		"\r\nGET /v1/customers?limit=2 HTTP/1.1\r\nHost: x\r\n\r\n"
	conflict := "POST /v1/payments HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
	for _, size := range []int{1, 2, 3, 7, 64, 4096} {
		for _, stream := range []string{plain, conflict} {
			got := readGuarded(t, stream, size)
			want := stream
			if stream == conflict {
				want = strings.Replace(stream, "Content-Length:", "Surgepay-Framing-Conflict:", 1)
			}
			if got != want {
				t.Errorf("read %d bytes at a time: got %q, want %q", size, got, want)
			}
		}
	}
}

// readGuarded writes stream into a guarded connection and reads it back
// size bytes at a time, as the server would, until the writer closes.
func readGuarded(t *testing.T, stream string, size int) string {
	t.Helper()
	client, server := net.Pipe()
	ln := api.GuardFraming(&oneConnListener{c: server})
	conn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		_, _ = io.WriteString(client, stream) // a short write shows as a stream read back short, which the caller compares
		client.Close()
	}()
	var out strings.Builder
	buf := make([]byte, size)
	for {
		n, err := conn.Read(buf)
		out.Write(buf[:n])
		if err != nil {
			break
		}
	}
	conn.Close()
	return out.String()
}

// oneConnListener accepts c once.
type oneConnListener struct{ c net.Conn }

func (l *oneConnListener) Accept() (net.Conn, error) { return l.c, nil }
func (l *oneConnListener) Close() error              { return nil }
func (l *oneConnListener) Addr() net.Addr            { return l.c.LocalAddr() }

// TestFramingErrorsJSON: heads Go's server answered itself, before any
// handler, in plain text (501 for an unknown Transfer-Encoding, 400 for
// differing or malformed Content-Length values and a space before a
// header's colon, 431 for an oversized head, 505 for HTTP/2.0) are the
// API's JSON errors, on a connection that then closes; a usual request
// before them on the same connection is served.
func TestFramingErrorsJSON(t *testing.T) {
	e := newEnv(t, testenv.OpenSQLite(t))
	addr := serveRaw(t, e, true)
	auth := "Host: x\r\nAuthorization: Bearer " + e.keyA + "\r\nContent-Type: application/json\r\n"
	post := "POST /v1/customers HTTP/1.1\r\n" + auth
	for _, tt := range []struct {
		name, head string
		status     int
		code       string
	}{
		{"TransferEncodingGzip", post + "Transfer-Encoding: gzip\r\n\r\n{}", 400, "framing_conflict"},
		{"TransferEncodingIdentity", post + "Transfer-Encoding: identity\r\nContent-Length: 2\r\n\r\n{}", 400, "framing_conflict"},
		{"ContentLengthsDiffer", post + "Content-Length: 2\r\nContent-Length: 3\r\n\r\n{} ", 400, "framing_conflict"},
		{"ContentLengthList", post + "Content-Length: 2, 2\r\n\r\n{}", 400, "framing_conflict"},
		{"ContentLengthSigned", post + "Content-Length: +2\r\n\r\n{}", 400, "framing_conflict"},
		{"ContentLengthEmpty", post + "Content-Length: \r\n\r\n{}", 400, "framing_conflict"},
		{"SpaceBeforeColon", post + "Content-Length : 2\r\n\r\n{}", 400, "framing_conflict"},
		{"LineWithoutColon", post + "Content-Length 2\r\n\r\n{}", 400, "framing_conflict"},
		{"ControlInValue", post + "X-Note: a\x01b\r\nContent-Length: 2\r\n\r\n{}", 400, "framing_conflict"},
		{"HeadTooLarge", "GET /v1/customers HTTP/1.1\r\n" + auth + "X-Pad: " + strings.Repeat("p", api.FramingHeadBytesMax) + "\r\n\r\n", 431, "request_header_too_large"},
		{"HTTP20", "GET /v1/customers HTTP/2.0\r\n" + auth + "\r\n", 505, "http_version_not_supported"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ok := "GET /v1/customers?limit=1 HTTP/1.1\r\n" + auth + "\r\n"
			res := rawExchange(t, addr, ok+tt.head+conflicting(e.keyA), 3)
			if len(res) != 2 || res[0].StatusCode != 200 || res[1].StatusCode != tt.status || !res[1].Close {
				t.Fatalf("got %v, want 200 then %d closing the connection", statuses(res), tt.status)
			}
			var eb struct{ Error struct{ Type, Code string } }
			if err := json.NewDecoder(bytes.NewReader(res[1].Body)).Decode(&eb); err != nil || eb.Error.Code != tt.code ||
				res[1].Header.Get("Content-Type") != "application/json" {
				t.Fatalf("got %q body error %+v (%v), want JSON %s", res[1].Header.Get("Content-Type"), eb.Error, err, tt.code)
			}
		})
	}
	if list := e.must(200, e.keyA, "GET", "/v1/customers?limit=100", ""); strings.Contains(string(list.Raw), "Smuggler") {
		t.Fatalf("a request after a refused head was served: %s", list.Raw)
	}
	// Identical Content-Length values are one length (Go takes them too).
	same := post + "Content-Length: 14\r\nContent-Length: 14\r\n\r\n{\"name\":\"Ada\"}"
	if res := rawExchange(t, addr, same, 1); len(res) != 1 || res[0].StatusCode != 200 {
		t.Fatalf("two equal Content-Length values: got %v, want 200", statuses(res))
	}
}
