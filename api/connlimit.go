package api

import (
	"container/list"
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
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
//
// A connection held for a refusal (a request refused before its body
// came, waiting up to refusedBodyWait for it: closeIfBodyUnread) leaves
// the bound while it is held, for a count of its own of at most Max more:
// it frees its place within refusedBodyWait, and a new connection must
// not wait for it. Issue 34 item 10: a merchant whose slow-body
// connections reconnected at once after each 429 raised another
// merchant's p99 from 33 ms to 579 ms; answered at once, the refusals
// let the flood reconnect as fast as the CPU could refuse it (1,300 a
// second), and at the bound the other merchant's idle keep-alive
// connections were closed to let the flood in (505 in 10 s) and its new
// ones waited behind the flood's in the accept queue. When that count is
// full, a held connection stays in the bound, and while one does, a new
// connection waits for a place rather than close an idle one: the idle
// connections at the bound are then the other merchants' keep-alive
// connections, and the held one frees its place within refusedBodyWait.
// Set ConnContext as the http.Server's ConnContext so that the API can
// say which connections it holds so.
//
// Only a connection idle for EvictIdleMinDefault (a second) or more is
// closed for a new one; a younger idle connection is a client's between
// two requests, and its next request would pay for a new connection,
// queued behind the new ones in the accept queue. With a merchant's
// slow-body flood reconnecting together every 2 s (issue 34 item 10),
// each wave closed 3-5 of another merchant's keep-alive connections, its
// next sales dialled again and waited behind the wave: its p99 rose
// 6-12x over the phase without the flood. At the bound a new connection
// now waits for a connection to close, end its refusal or reach that
// idle age.

// ConnectionsMaxLimit is the most connections_max may be.
const ConnectionsMaxLimit = 1_000_000

// EvictIdleMinDefault is how long a connection must have been idle before
// one arriving at the bound may close it: refusedBodyWait, the longest a
// held connection keeps its place.
const EvictIdleMinDefault = refusedBodyWait

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
	held    int           // connections held for a refusal, counted apart from open; at most max
	heldIn  int           // connections held for a refusal while held was full, counted in open
	changed chan struct{} // a connection closed, fell idle or ended its refusal; capacity 1
	closed  chan struct{} // the listener is closed
	once    sync.Once
	// evictIdleMin is how long a connection must have been idle to be
	// closed for a new one (EvictIdleMinDefault). Under mu.
	evictIdleMin time.Duration

	waits, evictions atomic.Uint64
}

// LimitConnections returns ln accepting at most n connections at once
// (n within 1 and ConnectionsMaxLimit), counted for metrics.
func LimitConnections(ln net.Listener, n int) *ConnLimiter {
	n = min(ConnectionsMaxLimit, max(1, n))
	return &ConnLimiter{Listener: ln, max: n, idle: list.New(), idleOf: make(map[*countedConn]*list.Element),
		changed: make(chan struct{}, 1), closed: make(chan struct{}), evictIdleMin: EvictIdleMinDefault}
}

// SetEvictIdleMin sets how long a connection must have been idle before
// one arriving at the bound may close it (EvictIdleMinDefault; 0: any idle
// connection).
func (l *ConnLimiter) SetEvictIdleMin(d time.Duration) {
	l.mu.Lock()
	l.evictIdleMin = max(0, d)
	l.mu.Unlock()
	l.signal()
}

// Accept accepts a connection and, at the bound, makes room for it: it
// closes the connection idle longest if it has been idle evictIdleMin,
// or, while a connection held for a refusal is in the bound or none is
// idle that long, waits for one to close, end its refusal or reach that
// idle age.
func (l *ConnLimiter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	waited := false
	var timer *time.Timer // when the idle longest reaches evictIdleMin
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		l.mu.Lock()
		if l.open < l.max {
			l.open++
			l.mu.Unlock()
			return &countedConn{Conn: c, l: l}, nil
		}
		var (
			evict *countedConn
			ripe  time.Duration // until the idle longest may be closed
		)
		if e := l.idle.Front(); e != nil && l.heldIn == 0 {
			oldest := e.Value.(*countedConn)
			if ripe = l.evictIdleMin - time.Since(oldest.idleAt); ripe <= 0 {
				evict = oldest
				l.forgetIdle(evict)
			}
		}
		l.mu.Unlock()
		if evict != nil {
			l.evictions.Add(1)
			_ = evict.Close() // frees its place; its server goroutine ends on the closed read (its close error tells the new connection nothing)
			continue
		}
		if !waited {
			waited = true
			l.waits.Add(1)
		}
		var ripened <-chan time.Time
		if ripe > 0 {
			if timer == nil {
				timer = time.NewTimer(ripe)
			} else {
				timer.Reset(ripe)
			}
			ripened = timer.C
		}
		select {
		case <-l.changed:
		case <-ripened:
		case <-l.closed:
			_ = c.Close() // the listener's closing is the error to report
			return nil, net.ErrClosed
		}
	}
}

// Close closes the listener and ends an Accept waiting for room.
func (l *ConnLimiter) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

type countedConnKey struct{}

// ConnContext is the http.Server's ConnContext hook: it lets the API find
// a request's connection (holdForRefusal).
func (l *ConnLimiter) ConnContext(ctx context.Context, nc net.Conn) context.Context {
	if c := l.counted(nc); c != nil {
		return context.WithValue(ctx, countedConnKey{}, c)
	}
	return ctx
}

// holdForRefusal marks the connection of the request of ctx as held for
// a refusal until the returned func is called (ConnLimiter): out of the
// bound if the count of held connections has room, else in it. A request
// on a connection the limiter does not count (a test's server, the
// limiter not wired) marks nothing.
func holdForRefusal(ctx context.Context) (done func()) {
	c, ok := ctx.Value(countedConnKey{}).(*countedConn)
	if !ok {
		return func() {}
	}
	l := c.l
	l.mu.Lock()
	if !c.closed && c.held == notHeld {
		if l.held < l.max {
			c.held = heldApart
			l.held++
			l.open--
		} else {
			c.held = heldInBound
			l.heldIn++
		}
	}
	l.mu.Unlock()
	l.signal() // a place freed, or one a waiting Accept must not evict for
	return func() {
		l.mu.Lock()
		switch c.held {
		case heldApart: // back in the bound; over it until a connection closes
			l.held--
			l.open++
		case heldInBound:
			l.heldIn--
		}
		c.held = notHeld
		l.mu.Unlock()
		l.signal()
	}
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
			c.idleAt = time.Now()
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

// Open is the connections open now, those held for a refusal apart from
// the bound included.
func (l *ConnLimiter) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open + l.held
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

// Held is the connections held for a refusal now, in the bound or not.
func (l *ConnLimiter) Held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held + l.heldIn
}

// The states of a connection held for a refusal.
const (
	notHeld     = iota
	heldApart   // counted in ConnLimiter.held, not in open
	heldInBound // counted in ConnLimiter.heldIn and open
)

type countedConn struct {
	net.Conn
	l      *ConnLimiter
	closed bool        // under l.mu
	held   int         // notHeld, heldApart or heldInBound; under l.mu
	idleAt time.Time   // when it last fell idle; under l.mu
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
		switch c.held {
		case heldApart:
			l.held--
		case heldInBound:
			l.heldIn--
			l.open--
		default:
			l.open--
		}
		c.held = notHeld
		l.forgetIdle(c)
	}
	l.mu.Unlock()
	if first {
		l.signal()
	}
	return err
}
