package api

import (
	"bytes"
	"errors"
	"net"
	"strconv"
)

// Go's HTTP/1.1 server takes a request that carries both Content-Length
// and Transfer-Encoding: chunked (RFC 9112 6.1 lets it: the chunked
// framing wins), and deletes Content-Length before any handler sees it,
// so no handler can refuse it. Such a request is how request smuggling
// starts when a proxy in front frames by Content-Length
// (TestFramingConflictRefused shows what Go does alone). GuardFraming
// watches the request heads on each connection and marks such a request,
// which ServeHTTP answers 400 framing_conflict and closes.

// FramingHeadBytesMax bounds a request head GuardFraming holds while it
// looks for the end of the head. A longer head closes the connection (Go
// itself answers 431 from 1 MiB): no API request needs 64 KiB of headers.
const FramingHeadBytesMax = 64 << 10

// framingConflictHeader replaces the Content-Length of a head that also
// has a Transfer-Encoding. A client that sends it itself only gets its
// own request refused.
const framingConflictHeader = "Surgepay-Framing-Conflict"

var errFramingHeadTooLarge = errors.New("api: request head larger than FramingHeadBytesMax")

// GuardFraming returns ln with every accepted connection watched as
// described above. It must see the plaintext: under TLS, wrap the TLS
// listener (Serve, not ServeTLS). Bytes pass through unchanged but for a
// conflicting head's Content-Length line; a head is held until it is
// complete, bodies are passed on as they arrive.
func GuardFraming(ln net.Listener) net.Listener { return &framingListener{ln} }

type framingListener struct{ net.Listener }

func (l *framingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &framingConn{Conn: c}, nil
}

// The states of a connection's byte stream.
const (
	stHead      = iota // in a request head
	stBody             // in a Content-Length body: remaining bytes left
	stChunkSize        // in a chunk-size line
	stChunkData        // in a chunk's data: remaining bytes left
	stChunkCRLF        // in the CRLF after a chunk's data
	stTrailer          // in the trailer section after the last chunk
	stPass             // no longer watched (after a conflict: the connection closes)
)

// framingLineBytesMax bounds a chunk-size line and a trailer section.
const framingLineBytesMax = 4 << 10

// framingConn tracks HTTP/1.1 message framing as the server reads. Used by
// the server's one reading goroutine at a time, like any net.Conn read.
type framingConn struct {
	net.Conn
	state     int
	remaining int64
	head      []byte // the head (or chunk line, trailer) read so far
	out       []byte // bytes ready for the server
	fatal     error  // a head too large: every read fails
}

// NetConn returns the connection under c (as *tls.Conn does), for
// ConnLimiter.ConnState.
func (c *framingConn) NetConn() net.Conn { return c.Conn }

// Read returns the bytes read so far that the server may see. A read
// error is returned as it comes, never kept: the server aborts a pending
// read with a past deadline and reads on afterwards. It reads into p
// itself (feed copies what it keeps before p is filled): a buffer of the
// connection's own would be held through every idle keep-alive wait, 4 KiB
// for each of thousands of connections after a stall. When nothing is
// held, what arrives is first passed on in place (pass): whole heads that
// need no change and the Content-Length bodies after them, which is every
// usual request; feed takes the rest.
func (c *framingConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if len(c.out) == 0 && len(c.head) == 0 && c.fatal == nil && c.state != stPass {
		n, err := c.Conn.Read(p)
		k := c.pass(p[:n])
		if k < n {
			c.fatal = c.feed(p[k:n])
		}
		switch {
		case k > 0 && len(c.out) == 0 && c.fatal == nil:
			return k, err
		case k > 0:
			return k, nil // c.out or c.fatal on the next Read
		case c.fatal != nil:
			return 0, c.fatal
		case err != nil && len(c.out) == 0:
			return 0, err
		}
	}
	for len(c.out) == 0 {
		if c.fatal != nil {
			return 0, c.fatal
		}
		if c.state == stPass && len(c.head) == 0 {
			return c.Conn.Read(p)
		}
		n, err := c.Conn.Read(p)
		if c.fatal = c.feed(p[:n]); c.fatal != nil {
			return 0, c.fatal
		}
		if err != nil && len(c.out) == 0 {
			return 0, err
		}
	}
	n := copy(p, c.out)
	c.out = c.out[n:]
	if len(c.out) == 0 {
		c.out = c.out[:0:0]
	}
	return n, nil
}

// pass moves the framing states over the start of data that passes
// unchanged and leaves nothing held: Content-Length bodies, blank lines
// before a request line, and whole heads that need no change. It returns
// how many bytes that is; it stops at a head not whole in data, at a head
// refused or renamed, and in chunked framing, which feed takes from there
// with the same rules.
func (c *framingConn) pass(data []byte) int {
	done := 0
	for done < len(data) {
		switch c.state {
		case stBody:
			n := int(min(int64(len(data)-done), c.remaining))
			done += n
			if c.remaining -= int64(n); c.remaining == 0 {
				c.state = stHead
			}
		case stHead:
			// As feed: a line at a time, the head whole at a blank line, a
			// lone blank line passed on, too long a head left to feed.
			start, end := done, done
			for {
				i := bytes.IndexByte(data[end:], '\n')
				if i < 0 {
					return done
				}
				end += i + 1
				head := data[start:end]
				if bytes.HasSuffix(head, []byte("\n\r\n")) || bytes.HasSuffix(head, []byte("\n\n")) {
					break
				}
				if len(bytes.TrimRight(head, "\r\n")) == 0 {
					done, start = end, end
					continue
				}
				if len(head) > FramingHeadBytesMax {
					return done
				}
			}
			act, state, remaining := judgeHead(data[start:end])
			if act != headPass {
				return done
			}
			c.state, c.remaining = state, remaining
			done = end
		default:
			return done
		}
	}
	return done
}

// feed moves data through the framing states into out.
func (c *framingConn) feed(data []byte) error {
	for len(data) > 0 {
		switch c.state {
		case stPass:
			c.out = append(c.out, data...)
			return nil
		case stBody, stChunkData:
			n := int(min(int64(len(data)), c.remaining))
			c.out = append(c.out, data[:n]...)
			data = data[n:]
			if c.remaining -= int64(n); c.remaining == 0 && c.state == stBody {
				c.state = stHead
			} else if c.remaining == 0 {
				c.state = stChunkCRLF
			}
		case stChunkCRLF:
			c.out = append(c.out, data[0])
			if data[0] == '\n' {
				c.state = stChunkSize
			}
			data = data[1:]
		default: // a head, a chunk-size line or a trailer: held until complete
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				c.head = append(c.head, data...)
				data = nil
			} else {
				c.head = append(c.head, data[:i+1]...)
				data = data[i+1:]
				if err := c.line(); err != nil {
					return err
				}
			}
			if len(c.head) > FramingHeadBytesMax {
				return errFramingHeadTooLarge
			}
		}
	}
	return nil
}

// line handles c.head, which ends with a line feed.
func (c *framingConn) line() error {
	switch c.state {
	case stChunkSize:
		line := bytes.TrimRight(c.head, "\r\n")
		if i := bytes.IndexByte(line, ';'); i >= 0 {
			line = line[:i]
		}
		size, err := strconv.ParseInt(string(bytes.TrimSpace(line)), 16, 64)
		c.flushHead()
		switch {
		case err != nil || size < 0:
			c.state = stPass // the server refuses the body and closes
		case size == 0:
			c.state = stTrailer
		default:
			c.state, c.remaining = stChunkData, size
		}
	case stTrailer: // trailer lines until a blank one
		switch {
		case len(bytes.TrimRight(c.head, "\r\n")) == 0 || bytes.HasSuffix(c.head, []byte("\n\r\n")) || bytes.HasSuffix(c.head, []byte("\n\n")):
			c.flushHead()
			c.state = stHead
		case len(c.head) > framingLineBytesMax:
			c.flushHead()
			c.state = stPass
		}
	case stHead:
		if bytes.HasSuffix(c.head, []byte("\n\r\n")) || bytes.HasSuffix(c.head, []byte("\n\n")) {
			c.endHead()
		} else if len(bytes.TrimRight(c.head, "\r\n")) == 0 {
			c.flushHead() // blank lines before a request line
		}
	}
	if c.state == stChunkSize && len(c.head) > framingLineBytesMax {
		c.flushHead()
		c.state = stPass
	}
	return nil
}

func (c *framingConn) flushHead() {
	c.out = append(c.out, c.head...)
	c.head = c.head[:0]
}

// refuse passes the head on with a framingConflictHeader line after its
// request line, so that the server answers 400 framing_conflict and closes
// the connection, and reads nothing more of it: the guard cannot vouch
// for where this request ends.
func (c *framingConn) refuse(lines [][]byte) {
	c.out = append(c.out, lines[0]...)
	c.out = append(c.out, framingConflictHeader+": ambiguous\r\n"...)
	for _, l := range lines[1:] {
		c.out = append(c.out, l...)
	}
	c.head = c.head[:0]
	c.state = stPass
}

// What a whole request head asks of the guard (judgeHead).
const (
	headPass     = iota // passed on unchanged
	headRefuse          // passed on marked, nothing more read (refuse)
	headConflict        // Content-Length and Transfer-Encoding: Content-Length renamed
)

// judgeHead reads a whole request head: its framing decides what follows
// (state and remaining, for headPass). A head with both Content-Length and
// Transfer-Encoding (in HTTP/1.1, where Go honours Transfer-Encoding) is a
// conflict; an obsolete folded line, an encoding other than chunked alone
// and a Content-Length that is not a length are refused.
func judgeHead(head []byte) (act, state int, remaining int64) {
	first, rest, _ := bytes.Cut(head, []byte("\n"))
	http10 := bytes.HasSuffix(bytes.TrimRight(first, "\r"), []byte("HTTP/1.0"))
	var cl, te []byte // the first value of each
	var ncl, nte int
	for len(rest) > 0 {
		var l []byte
		l, rest, _ = bytes.Cut(rest, []byte("\n"))
		if len(l) > 0 && (l[0] == ' ' || l[0] == '\t') {
			// Obsolete line folding: Go joins the lines, a proxy may not;
			// "Transfer-Encoding:\r\n chunked" would read here as no
			// encoding. Refused (RFC 9112 5.2 allows it).
			return headRefuse, stPass, 0
		}
		name, value, ok := bytes.Cut(l, []byte(":"))
		if !ok {
			continue
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if ncl++; ncl == 1 {
				cl = value
			}
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			if nte++; nte == 1 {
				te = value
			}
		}
	}
	switch {
	case nte > 0 && !http10 && ncl > 0:
		return headConflict, stPass, 0
	case nte > 0 && !http10:
		if nte == 1 && bytes.EqualFold(te, []byte("chunked")) {
			return headPass, stChunkSize, 0
		}
		// Another encoding, or one this reading cannot follow: refused
		// here rather than trusted to read alike in the server.
		return headRefuse, stPass, 0
	case ncl > 0:
		n, err := strconv.ParseInt(string(cl), 10, 64)
		switch {
		case err != nil || n < 0:
			return headRefuse, stPass, 0 // not a length this reading can follow
		case n > 0:
			return headPass, stBody, n
		}
	}
	return headPass, stHead, 0
}

// endHead passes on the whole head in c.head as judgeHead says: a
// conflicting head has its Content-Length renamed to
// framingConflictHeader.
func (c *framingConn) endHead() {
	act, state, remaining := judgeHead(c.head)
	switch act {
	case headRefuse:
		c.refuse(bytes.SplitAfter(c.head, []byte("\n")))
		return
	case headConflict:
		lines := bytes.SplitAfter(c.head, []byte("\n"))
		for i, l := range lines[1:] {
			name, value, ok := bytes.Cut(l, []byte(":"))
			if ok && bytes.EqualFold(name, []byte("Content-Length")) {
				lines[i+1] = append([]byte(framingConflictHeader+":"), value...)
			}
		}
		c.out = append(c.out, bytes.Join(lines, nil)...)
		c.head = c.head[:0]
		c.state = stPass
		return
	}
	c.state, c.remaining = state, remaining
	c.flushHead()
}
