package api_test

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/surgepay/surgepay/api"
)

// TestConnLimiterCounts: a connection counts from accept to its first
// close, once however often it is closed, and the bound is capped at
// ConnectionsMaxLimit.
func TestConnLimiterCounts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := api.LimitConnections(ln, 2)
	defer l.Close()
	if got := api.LimitConnections(ln, api.ConnectionsMaxLimit+1).Max(); got != api.ConnectionsMaxLimit {
		t.Errorf("Max %d, want the limit %d", got, api.ConnectionsMaxLimit)
	}
	var conns []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		s, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, s)
	}
	if l.Open() != 2 || l.Waits() != 0 {
		t.Fatalf("open %d waits %d, want 2, 0", l.Open(), l.Waits())
	}
	conns[0].Close()
	conns[0].Close()
	if l.Open() != 1 {
		t.Errorf("open %d after one connection closed twice, want 1", l.Open())
	}
}

// limitedServer serves "ok" behind a ConnLimiter of n, plain or TLS.
func limitedServer(t *testing.T, n int, useTLS bool) (*api.ConnLimiter, func() net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := api.LimitConnections(ln, n)
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok") // a client gone away is no error of ours
	}))
	ts.Listener.Close()
	ts.Listener = l
	ts.Config.ConnState = l.ConnState
	if useTLS {
		ts.StartTLS()
	} else {
		ts.Start()
	}
	t.Cleanup(ts.Close)
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if useTLS { // the handshake on the first read or write
			c = tls.Client(c, &tls.Config{InsecureSkipVerify: true})
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	return l, dial
}

const getRequest = "GET / HTTP/1.1\r\nHost: x\r\n\r\n"

// writeConn writes s to c: the request (or its part) each check relies on.
func writeConn(t *testing.T, c net.Conn, s string) {
	t.Helper()
	if _, err := io.WriteString(c, s); err != nil {
		t.Fatal(err)
	}
}

// answered reports whether c gets an HTTP answer within d.
func answered(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return false
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	return err == nil && res.StatusCode == 200 && string(body) == "ok"
}

// waitIdle waits until the limiter counts n idle connections: net/http
// reports a connection idle just after its answer is written, and a
// connection stops being idle once the server has read a request's first
// bytes.
func waitIdle(t *testing.T, l *api.ConnLimiter, n int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for l.Idle() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections idle, want %d", l.Idle(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestConnLimiterEvictsIdle: at the bound, a new connection takes the
// place of the connection idle longest, which is closed; when every
// connection is busy (a request being read), the new one waits, and is
// let in once one of them falls idle. Eviction over TLS too (the server
// reports the TLS connection, the limiter counts the one under it).
// TestConnLimiterSparesTheRecentlyIdle (issue 34 item 10): a connection
// idle for less than the limiter's minimum (a client's between two of its
// requests) is not closed for a new one at the bound: the new one waits
// until the idle one reaches that age, and then takes its place.
func TestConnLimiterSparesTheRecentlyIdle(t *testing.T) {
	if api.EvictIdleMinDefault <= 0 {
		t.Fatalf("EvictIdleMinDefault %v: recently idle connections are not spared", api.EvictIdleMinDefault)
	}
	l, dial := limitedServer(t, 2, false)
	l.SetEvictIdleMin(time.Second)
	first, second := dial(), dial()
	for i, c := range []net.Conn{first, second} {
		writeConn(t, c, getRequest)
		if !answered(c, 5*time.Second) {
			t.Fatal("a connection under the bound was not answered")
		}
		waitIdle(t, l, i+1)
	}
	third := dial()
	writeConn(t, third, getRequest)
	if answered(third, 300*time.Millisecond) {
		t.Fatal("a new connection took the place of one idle for less than the minimum")
	}
	writeConn(t, second, getRequest) // second stays in use: never the oldest idle
	if !answered(second, 5*time.Second) {
		t.Fatal("a recently idle connection was closed for a new one")
	}
	if !answered(third, 5*time.Second) {
		t.Fatal("the new connection was not let in once the idle longest reached the minimum")
	}
	first.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := first.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Errorf("the connection idle longest is still open (%d, %v)", n, err)
	}
	if l.Evictions() != 1 || l.Waits() != 1 {
		t.Fatalf("evictions %d waits %d, want 1, 1", l.Evictions(), l.Waits())
	}
}

func TestConnLimiterEvictsIdle(t *testing.T) {
	for _, useTLS := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "TLS"}[useTLS], func(t *testing.T) {
			l, dial := limitedServer(t, 2, useTLS)
			l.SetEvictIdleMin(0) // any idle connection; TestConnLimiterSparesTheRecentlyIdle has the default
			first, second := dial(), dial()
			for i, c := range []net.Conn{first, second} {
				writeConn(t, c, getRequest)
				if !answered(c, 5*time.Second) {
					t.Fatal("a connection under the bound was not answered")
				}
				waitIdle(t, l, i+1) // first falls idle before second
			}
			third := dial()
			writeConn(t, third, getRequest)
			if !answered(third, 5*time.Second) {
				t.Fatal("a new connection at the bound was not answered while two were idle")
			}
			first.SetReadDeadline(time.Now().Add(5 * time.Second))
			if n, err := first.Read(make([]byte, 1)); n != 0 || err == nil {
				t.Errorf("the connection idle longest is still open (%d, %v)", n, err)
			}
			writeConn(t, second, getRequest)
			if !answered(second, 5*time.Second) {
				t.Error("the younger idle connection was closed instead of the older")
			}
			if l.Evictions() != 1 || l.Waits() != 0 || l.Open() != 2 {
				t.Fatalf("evictions %d waits %d open %d, want 1, 0, 2", l.Evictions(), l.Waits(), l.Open())
			}
			if useTLS {
				return // the rest does not depend on the connection's layers
			}

			// Both busy: a request half sent on each.
			waitIdle(t, l, 2)
			writeConn(t, second, "GET / HTTP/1.1\r\n")
			writeConn(t, third, "GET / HTTP/1.1\r\n")
			waitIdle(t, l, 0)
			late := dial()
			writeConn(t, late, getRequest)
			if answered(late, 300*time.Millisecond) {
				t.Fatal("a connection was let in over the bound while every connection was busy")
			}
			if l.Waits() != 1 {
				t.Errorf("waits %d, want 1", l.Waits())
			}
			writeConn(t, second, "Host: x\r\n\r\n") // second is answered, falls idle, makes room
			if !answered(second, 5*time.Second) {
				t.Fatal("a busy connection was not answered")
			}
			if !answered(late, 5*time.Second) {
				t.Fatal("the waiting connection was not let in once a connection fell idle")
			}
			if l.Evictions() != 2 || l.Open() != 2 {
				t.Errorf("evictions %d open %d, want 2, 2", l.Evictions(), l.Open())
			}
		})
	}
}
