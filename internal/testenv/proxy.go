package testenv

import (
	"net"
	"sync"
	"testing"
)

// Proxy is a TCP proxy on 127.0.0.1 in front of a real server (PostgreSQL,
// Redis, NATS), so that a test can take the server away from the code under
// test and give it back without touching the shared server: Cut closes the
// listener and every proxied connection (a new connection is refused, as
// from a stopped server), Restore listens again on the same address.
type Proxy struct {
	t      testing.TB
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
	// thawed, while frozen, is closed by Thaw (or Cut); nil when not frozen.
	thawed chan struct{}
}

// Freeze holds every byte in both directions, of the open connections and
// of new ones, which are still accepted: the database looks like a
// stopped process (SIGSTOP) whose kernel keeps its connections open and
// buffers what it is sent. Thaw delivers the held bytes and resumes.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.thawed == nil {
		p.thawed = make(chan struct{})
	}
}

// Thaw ends a Freeze.
func (p *Proxy) Thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.thawed != nil {
		close(p.thawed)
		p.thawed = nil
	}
}

// waitThawed waits for the end of a Freeze, if any.
func (p *Proxy) waitThawed() {
	p.mu.Lock()
	ch := p.thawed
	p.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

// NewProxy starts a proxy to target (host:port), stopped at cleanup.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{t: t, target: target, addr: ln.Addr().String(), conns: map[net.Conn]struct{}{}}
	p.serve(ln)
	t.Cleanup(func() {
		p.Cut()
		p.wg.Wait()
	})
	return p
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.addr }

// Cut refuses new connections and closes the open ones.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.thawed != nil { // release the held bytes' copiers: their conns close below
		close(p.thawed)
		p.thawed = nil
	}
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
}

// Restore listens again on the proxy's address.
func (p *Proxy) Restore() {
	p.t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.serve(ln)
}

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				p.pipe(ln, c)
			}()
		}
	}()
}

// pipe copies between c and a new connection to the target until either
// side closes or the proxy cuts them.
func (p *Proxy) pipe(ln net.Listener, c net.Conn) {
	u, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	if p.ln != ln { // cut meanwhile
		p.mu.Unlock()
		c.Close()
		u.Close()
		return
	}
	p.conns[c], p.conns[u] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	// Either side ending (or a cut) ends the pair, as a real close would.
	cp := func(dst, src net.Conn) {
		// Ends on either side's close or a cut, an error by design. Bytes
		// read during a Freeze are written after it, as a stopped
		// server's kernel would deliver them when it resumes.
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			p.waitThawed()
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					break
				}
			}
			if err != nil {
				break
			}
		}
		done <- struct{}{}
	}
	go cp(u, c)
	go cp(c, u)
	<-done
	c.Close()
	u.Close()
	<-done
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, u)
	p.mu.Unlock()
}
