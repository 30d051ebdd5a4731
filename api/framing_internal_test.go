package api

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// trickleConn delivers its data one byte per Read, so that every split of
// a head, a chunk line and a body across reads is exercised.
type trickleConn struct {
	net.Conn
	data string
}

func (c *trickleConn) Read(p []byte) (int, error) {
	if c.data == "" {
		return 0, io.EOF
	}
	p[0], c.data = c.data[0], c.data[1:]
	return 1, nil
}

func TestFramingConnSplitsAnywhere(t *testing.T) {
	in := "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello" +
		"POST /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n0\r\nT: 1\r\n\r\n" +
		"GET /c HTTP/1.1\r\nHost: x\r\n\r\n" +
		"POST /d HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nxyz\r\n0\r\n\r\n"
	br := bufio.NewReader(&framingConn{Conn: &trickleConn{data: in}})
	want := []struct{ path, body, conflict string }{{"/a", "hello", ""}, {"/b", "abc", ""}, {"/c", "", ""}, {"/d", "xyz", "3"}}
	for _, w := range want {
		r, err := http.ReadRequest(br)
		if err != nil {
			t.Fatalf("%s: %v", w.path, err)
		}
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path != w.path || string(b) != w.body || r.Header.Get(framingConflictHeader) != w.conflict {
			t.Fatalf("got %s %q conflict %q, want %s %q conflict %q", r.URL.Path, b, r.Header.Get(framingConflictHeader), w.path, w.body, w.conflict)
		}
	}
	if rest, _ := io.ReadAll(br); len(rest) != 0 {
		t.Fatalf("left over: %q", rest)
	}
	if strings.Count(in, "Content-Length") != 2 {
		t.Fatal("the input changed")
	}
}
