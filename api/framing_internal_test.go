package api

import (
	"bufio"
	"io"
	"math/rand/v2"
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

// chunkConn delivers its data in reads of the given sizes, in turn.
type chunkConn struct {
	net.Conn
	data  string
	sizes []int
	i     int
}

func (c *chunkConn) Read(p []byte) (int, error) {
	if c.data == "" {
		return 0, io.EOF
	}
	n := min(len(p), len(c.data), c.sizes[c.i%len(c.sizes)])
	c.i++
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// TestFramingConnMixedStreams: streams of usual requests (which pass in
// place), chunked ones, blank lines, and one conflicting or refused head
// somewhere, read through buffers of mixed sizes, come out as they went
// in but for that head: its Content-Length renamed, every byte after it
// unchanged; or a refused head's stand-in (refusedHead), and nothing after
// it.
func TestFramingConnMixedStreams(t *testing.T) {
	plain := []string{
		"POST /v1/payments HTTP/1.1\r\nHost: x\r\nContent-Length: 12\r\n\r\n{\"amount\":1}",
		"GET /v1/payments/pay_1 HTTP/1.1\r\nHost: x\r\n\r\n",
		"\r\n",
		"POST /v1/customers HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"a\"\r\n3;e=1\r\n:1}\r\n0\r\nT: 1\r\n\r\n",
		"POST /v1/x HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
		"POST /v1/y HTTP/1.0\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\nok",
	}
	bad := []struct{ in, out string }{
		{"POST /v1/payments HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
			"POST /v1/payments HTTP/1.1\r\n" + framingConflictHeader + ": 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
		{"POST /v1/payments HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", refusedHead(framingRefusedAmbiguous)},
		{"POST /v1/payments HTTP/1.1\r\nContent-Length: -1\r\n\r\n", refusedHead(framingRefusedAmbiguous)},
		{"POST /v1/payments HTTP/1.1\r\nX: 1\r\n folded\r\n\r\n", refusedHead(framingRefusedAmbiguous)},
		{"POST /v1/payments HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", refusedHead(framingRefusedAmbiguous)},
		{"POST /v1/payments HTTP/1.1\r\nContent-Length : 1\r\n\r\n", refusedHead(framingRefusedAmbiguous)},
		{"GET /v1/payments HTTP/2.0\r\nHost: x\r\n\r\n", refusedHead(framingRefusedVersion)},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 2000 {
		var in, want strings.Builder
		for range rng.IntN(6) {
			m := plain[rng.IntN(len(plain))]
			in.WriteString(m)
			want.WriteString(m)
		}
		if round%2 == 0 {
			b := bad[rng.IntN(len(bad))]
			in.WriteString(b.in)
			want.WriteString(b.out)
			for range rng.IntN(3) { // after it, everything passes as it is, or after a refused head, nothing
				m := plain[rng.IntN(len(plain))] + bad[0].in
				in.WriteString(m)
				if b != bad[0] {
					continue
				}
				want.WriteString(m)
			}
		}
		sizes := []int{1 + rng.IntN(4096), 1 + rng.IntN(64), 1 + rng.IntN(4096)}
		c := &framingConn{Conn: &chunkConn{data: in.String(), sizes: sizes}}
		var got strings.Builder
		buf := make([]byte, 1+rng.IntN(4096))
		for {
			n, err := c.Read(buf)
			got.Write(buf[:n])
			if err != nil {
				break
			}
		}
		if got.String() != want.String() {
			t.Fatalf("round %d, reads of %v into %d: got\n%q\nwant\n%q", round, sizes, len(buf), got.String(), want.String())
		}
	}
}

// refusedHead is the stand-in the guard passes on for a refused head.
func refusedHead(why string) string {
	return "GET / HTTP/1.1\r\nHost: refused\r\n" + framingConflictHeader + ": " + why + "\r\n\r\n"
}
