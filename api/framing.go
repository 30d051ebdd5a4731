package api

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"strconv"

	"github.com/surgepay/surgepay"
)

// Go's HTTP/1.1 server takes a request that carries both Content-Length
// and Transfer-Encoding: chunked (RFC 9112 6.1 lets it: the chunked
// framing wins), and deletes Content-Length before any handler sees it,
// so no handler can refuse it. Such a request is how request smuggling
// starts when a proxy in front frames by Content-Length
// (TestFramingConflictRefused shows what Go does alone). GuardFraming
// watches the request heads on each connection and marks such a request,
// which ServeHTTP answers 400 framing_conflict and closes.
//
// Go also answers some heads itself, before any handler, in plain text:
// a Transfer-Encoding other than chunked (501), Content-Length values that
// differ or are not numbers, a header name with a space before its colon
// (400), a head over MaxHeaderBytes (431), an HTTP/2.0 request line (505).
// The guard refuses those heads first, and hands the server a stand-in
// head marked with why, so that the API answers them in its JSON errors.

// FramingHeadBytesMax bounds a request head GuardFraming holds while it
// looks for the end of the head. A longer head is answered 431 and its
// connection closed: no API request needs 64 KiB of headers.
const FramingHeadBytesMax = 64 << 10

// framingConflictHeader replaces the Content-Length of a head that also
// has a Transfer-Encoding, and marks a refused head's stand-in with why
// (the framingRefused values). A client that sends it itself only gets
// its own request refused.
const framingConflictHeader = "Surgepay-Framing-Conflict"

// The values of framingConflictHeader on a refused head's stand-in.
const (
	framingRefusedAmbiguous    = "ambiguous"      // 400 framing_conflict
	framingRefusedHeadTooLarge = "head_too_large" // 431
	framingRefusedVersion      = "version"        // 505: not HTTP/1.x
)

var errFramingLineTooLarge = errors.New("api: chunk line larger than FramingHeadBytesMax")

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
	stDrop             // after a refused head's stand-in: what follows is discarded
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
	if len(c.out) == 0 && len(c.head) == 0 && c.fatal == nil && c.state != stPass && c.state != stDrop {
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
		case stDrop:
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
				if c.state != stHead {
					return errFramingLineTooLarge
				}
				c.refuse(framingRefusedHeadTooLarge)
				return nil
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

// refuse passes on, instead of the head in c.head, a stand-in head that
// Go's server takes, marked with why (a framingRefused value), so that
// the API answers it in JSON and closes the connection; the rest of the
// connection is discarded: the guard cannot vouch for where this request
// ends, and Go would answer the head itself, in plain text.
func (c *framingConn) refuse(why string) {
	c.out = append(c.out, "GET / HTTP/1.1\r\nHost: refused\r\n"+framingConflictHeader+": "+why+"\r\n\r\n"...)
	c.head = c.head[:0:0]
	c.state = stDrop
}

// What a whole request head asks of the guard (judgeHead).
const (
	headPass     = iota // passed on unchanged
	headRefuse          // refused as ambiguous (refuse)
	headVersion         // refused: not HTTP/1.x
	headConflict        // Content-Length and Transfer-Encoding: Content-Length renamed
)

// judgeHead reads a whole request head: its framing decides what follows
// (state and remaining, for headPass). A head with both Content-Length and
// Transfer-Encoding (in HTTP/1.1, where Go honours Transfer-Encoding) is a
// conflict; an obsolete folded line, an encoding other than chunked alone,
// Content-Length values that are not one length, a header line that is
// not a name (a token, so no space before the colon) and a value without
// control characters are refused, and so is a version other than HTTP/1.x.
func judgeHead(head []byte) (act, state int, remaining int64) {
	first, rest, _ := bytes.Cut(head, []byte("\n"))
	first = bytes.TrimRight(first, "\r")
	http10 := bytes.HasSuffix(first, []byte("HTTP/1.0"))
	if v := first[bytes.LastIndexByte(first, ' ')+1:]; len(v) == 8 && string(v[:5]) == "HTTP/" &&
		v[5] >= '0' && v[5] <= '9' && v[5] != '1' && v[6] == '.' && v[7] >= '0' && v[7] <= '9' {
		return headVersion, stPass, 0 // Go answers 505 itself
	}
	var cl, te []byte // the first value of each
	var ncl, nte int
	for len(rest) > 0 {
		var l []byte
		l, rest, _ = bytes.Cut(rest, []byte("\n"))
		l = bytes.TrimSuffix(l, []byte("\r"))
		if len(l) == 0 {
			continue // the blank line that ends the head
		}
		if l[0] == ' ' || l[0] == '\t' {
			// Obsolete line folding: Go joins the lines, a proxy may not;
			// "Transfer-Encoding:\r\n chunked" would read here as no
			// encoding. Refused (RFC 9112 5.2 allows it).
			return headRefuse, stPass, 0
		}
		name, value, ok := bytes.Cut(l, []byte(":"))
		if !ok || !headerToken(name) || !headerValue(value) {
			// "Host : x" or a line without a colon: Go answers 400 in
			// plain text, and a proxy may read the name otherwise.
			return headRefuse, stPass, 0
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			if !digits(value) || (ncl > 0 && !bytes.Equal(value, cl)) {
				return headRefuse, stPass, 0 // not one length: which would a proxy take?
			}
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
	case nte > 0 && !http10 && (nte > 1 || !bytes.EqualFold(te, []byte("chunked"))):
		// Another encoding, or one this reading cannot follow: refused
		// here rather than trusted to read alike in the server (Go
		// answers an encoding it does not implement 501 itself).
		return headRefuse, stPass, 0
	case nte > 0 && !http10 && ncl > 0:
		return headConflict, stPass, 0
	case nte > 0 && !http10:
		return headPass, stChunkSize, 0
	case ncl > 0:
		var n int64
		for _, d := range cl {
			n = n*10 + int64(d-'0')
		}
		if n > 0 {
			return headPass, stBody, n
		}
	}
	return headPass, stHead, 0
}

// headerToken reports whether b is a header name: a token of RFC 9110's
// characters.
func headerToken(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c >= 0x80 || !tokenChars[c] {
			return false
		}
	}
	return true
}

var tokenChars = func() (t [128]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

// headerValue reports whether b holds no control character but tab (Go
// refuses the others in plain text).
func headerValue(b []byte) bool {
	for _, c := range b {
		if (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// digits reports whether b is a Content-Length: 1 to 18 decimal digits
// (no sign, no list; within an int64).
func digits(b []byte) bool {
	if len(b) == 0 || len(b) > 18 {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// endHead passes on the whole head in c.head as judgeHead says: a
// conflicting head has its Content-Length renamed to
// framingConflictHeader.
func (c *framingConn) endHead() {
	act, state, remaining := judgeHead(c.head)
	switch act {
	case headRefuse:
		c.refuse(framingRefusedAmbiguous)
		return
	case headVersion:
		c.refuse(framingRefusedVersion)
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

// The API's own codes for heads GuardFraming refuses.
const (
	EHEADTOOLARGE = "request_header_too_large"   // 431
	EVERSION      = "http_version_not_supported" // 505
)

// framingError is the error a head marked framingConflictHeader is
// answered with.
func framingError(why string) error {
	switch why {
	case framingRefusedHeadTooLarge:
		return &surgepay.Error{Code: EHEADTOOLARGE, Reason: EHEADTOOLARGE, Param: "headers",
			Message: fmt.Sprintf("the request head must be at most %d bytes", FramingHeadBytesMax)}
	case framingRefusedVersion:
		return &surgepay.Error{Code: EVERSION, Reason: EVERSION, Param: "HTTP-Version",
			Message: "this server speaks HTTP/1.1 (and HTTP/1.0)"}
	}
	return &surgepay.Error{Code: surgepay.EINVALID, Reason: "framing_conflict", Param: "Transfer-Encoding",
		Message: "a request's framing must be unambiguous: not both Content-Length and Transfer-Encoding, " +
			"no header folded over lines, no Transfer-Encoding but chunked, one Content-Length that is a number, " +
			"header names without spaces before the colon and values without control characters"}
}
