package api

import (
	"net"
	"sync"
	"sync/atomic"

	"golang.org/x/net/netutil"
)

// A node's connections are bounded apart from its requests in flight
// (inflight_max): an idle keep-alive connection holds a goroutine and its
// read and write buffers, and a client that opens a connection per
// request it cannot get answered (an open-model load beyond capacity
// opened about 9,700, bench/RESULTS.md issue 14 session 8) would hold
// memory without bound. At the bound the listener stops accepting: the
// kernel's accept queue holds the next connections (then refuses them),
// and a client waits in connect instead of a node growing. Every
// connection counts, TLS or not, from accept to close; idle ones close
// after the server's IdleTimeout.

// ConnectionsMaxLimit is the most connections_max may be.
const ConnectionsMaxLimit = 1_000_000

// ConnLimiter is a listener that holds at most Max connections open.
type ConnLimiter struct {
	net.Listener
	max   int
	open  atomic.Int64
	waits atomic.Uint64
}

// LimitConnections returns ln accepting at most n connections at once
// (n within 1 and ConnectionsMaxLimit), with x/net/netutil's
// LimitListener, counted for metrics.
func LimitConnections(ln net.Listener, n int) *ConnLimiter {
	n = min(ConnectionsMaxLimit, max(1, n))
	return &ConnLimiter{Listener: netutil.LimitListener(ln, n), max: n}
}

// Accept waits for a free connection slot, then for a connection.
func (l *ConnLimiter) Accept() (net.Conn, error) {
	if l.open.Load() >= int64(l.max) {
		l.waits.Add(1) // at the bound: this Accept waits for a close
	}
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.open.Add(1)
	return &countedConn{Conn: c, l: l}, nil
}

// Max is the bound.
func (l *ConnLimiter) Max() int { return l.max }

// Open is the connections open now.
func (l *ConnLimiter) Open() int { return int(l.open.Load()) }

// Waits counts the accepts that began at the bound and waited for a
// connection to close: a node holding its bound of connections.
func (l *ConnLimiter) Waits() uint64 { return l.waits.Load() }

type countedConn struct {
	net.Conn
	l    *ConnLimiter
	once sync.Once
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.open.Add(-1) })
	return err
}
