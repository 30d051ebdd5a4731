package api_test

import (
	"net"
	"testing"

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
