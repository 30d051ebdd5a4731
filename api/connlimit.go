package api

import (
	"container/list"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// A node's connections are bounded apart from its requests in flight
// (inflight_max): an idle keep-alive connection holds a goroutine and its
// read and write buffers, and a client that opens a connection per
// request it cannot get answered (an open-model load beyond capacity
// opened about 9,700, bench/RESULTS.md issue 14 session 8) would hold
// memory without bound. Every connection counts, TLS or not, from accept
// to close.
//
// A connection that arrives at the bound takes the place of the one idle
// longest (a keep-alive connection between requests, as net/http reports
// through ConnState), which is closed, as a server's IdleTimeout would
// close it later. Only when every connection is busy (a request being
// read, handled or answered) does the new one wait, accepted but unread,
// for one to close or fall idle. Before session 10 a new connection
// waited while idle ones held the bound, up to the server's IdleTimeout
// (120 s): after an overload episode, clients that had opened thousands
// of connections kept them, and new requests waited in connect until the
// client gave up (3,117 timeouts of 30 s in a half hour at 3,000/s,
// bench/RESULTS.md issue 14 session 10).
//
// net/http reports a connection idle from the end of an answer until it
// has read the next request's headers; the connection itself knows
// sooner: once a read returns the first bytes of a request, it is no
// longer idle. Closing an idle connection races only with a client whose
// next request is on its way at that moment: the client sees the
// connection close.
// Clients retry a request on a new connection when they know it was not
// processed, or when it is idempotent (Go's transport: a request with an
// Idempotency-Key header), as they must for any server's idle timeout.

// ConnectionsMaxLimit is the most connections_max may be.
const ConnectionsMaxLimit = 1_000_000

// ConnLimiter is a listener that holds at most Max connections open. Set
// its ConnState as the http.Server's ConnState, so that it knows which
// connections are idle.
type ConnLimiter struct {
	net.Listener
	max int

	mu      sync.Mutex
	open    int
	idle    *list.List // of *countedConn, longest idle first
	idleOf  map[*countedConn]*list.Element
	changed chan struct{} // a connection closed or fell idle; capacity 1
	closed  chan struct{} // the listener is closed
	once    sync.Once

	waits, evictions atomic.Uint64
}

// LimitConnections returns ln accepting at most n connections at once
// (n within 1 and ConnectionsMaxLimit), counted for metrics.
func LimitConnections(ln net.Listener, n int) *ConnLimiter {
	n = min(ConnectionsMaxLimit, max(1, n))
	return &ConnLimiter{Listener: ln, max: n, idle: list.New(), idleOf: make(map[*countedConn]*list.Element),
		changed: make(chan struct{}, 1), closed: make(chan struct{})}
}

// Accept accepts a connection and, at the bound, makes room for it: it
// closes the connection idle longest, or waits for one to close or fall
// idle.
func (l *ConnLimiter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	waited := false
	for {
		l.mu.Lock()
		if l.open < l.max {
			l.open++
			l.mu.Unlock()
			return &countedConn{Conn: c, l: l}, nil
		}
		var evict *countedConn
		if e := l.idle.Front(); e != nil {
			evict = e.Value.(*countedConn)
			l.forgetIdle(evict)
		}
		l.mu.Unlock()
		if evict != nil {
			l.evictions.Add(1)
			evict.Close() // frees its place; its server goroutine ends on the closed read
			continue
		}
		if !waited {
			waited = true
			l.waits.Add(1)
		}
		select {
		case <-l.changed:
		case <-l.closed:
			c.Close()
			return nil, net.ErrClosed
		}
	}
}

// Close closes the listener and ends an Accept waiting for room.
func (l *ConnLimiter) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// ConnState is the http.Server's ConnState hook: it tracks which
// connections are idle between requests.
func (l *ConnLimiter) ConnState(nc net.Conn, s http.ConnState) {
	c := l.counted(nc)
	if c == nil {
		return
	}
	l.mu.Lock()
	switch s {
	case http.StateIdle:
		if _, ok := l.idleOf[c]; !ok && !c.closed {
			l.idleOf[c] = l.idle.PushBack(c)
			c.idle.Store(true)
		}
	default: // new, active, hijacked, closed: not idle
		l.forgetIdle(c)
	}
	l.mu.Unlock()
	if s == http.StateIdle {
		l.signal()
	}
}

// counted finds the countedConn under nc (a *tls.Conn wraps it).
func (l *ConnLimiter) counted(nc net.Conn) *countedConn {
	for nc != nil {
		if c, ok := nc.(*countedConn); ok && c.l == l {
			return c
		}
		u, ok := nc.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		nc = u.NetConn()
	}
	return nil
}

// forgetIdle removes c from the idle list; l.mu held.
func (l *ConnLimiter) forgetIdle(c *countedConn) {
	if e, ok := l.idleOf[c]; ok {
		l.idle.Remove(e)
		delete(l.idleOf, c)
		c.idle.Store(false)
	}
}

func (l *ConnLimiter) signal() {
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

// Max is the bound.
func (l *ConnLimiter) Max() int { return l.max }

// Open is the connections open now.
func (l *ConnLimiter) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// Idle is the connections open now that are idle between requests.
func (l *ConnLimiter) Idle() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.idle.Len()
}

// Waits counts the connections that arrived with every place taken by a
// busy connection and waited for one to close or fall idle.
func (l *ConnLimiter) Waits() uint64 { return l.waits.Load() }

// Evictions counts the idle connections closed to make room for a new one.
func (l *ConnLimiter) Evictions() uint64 { return l.evictions.Load() }

type countedConn struct {
	net.Conn
	l      *ConnLimiter
	closed bool        // under l.mu
	idle   atomic.Bool // in l.idle; read without l.mu by Read
}

// Read reads, and takes the connection off the idle list once a request's
// first bytes arrive.
func (c *countedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 && c.idle.Load() {
		c.l.mu.Lock()
		c.l.forgetIdle(c)
		c.l.mu.Unlock()
	}
	return n, err
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	l := c.l
	l.mu.Lock()
	first := !c.closed
	if first {
		c.closed = true
		l.open--
		l.forgetIdle(c)
	}
	l.mu.Unlock()
	if first {
		l.signal()
	}
	return err
}
