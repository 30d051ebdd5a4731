package api

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"
)

// FuzzFraming feeds GuardFraming's connection arbitrary byte streams,
// read through buffers of fuzzed sizes. Invariants:
//   - no panic, and the same bytes out however the stream is split into
//     reads (the in-place pass and the held feed agree);
//   - what comes out is what went in, but for one head's Content-Length
//     lines renamed (a conflict; all after it unchanged), or a refused
//     head replaced by its stand-in with nothing after it; a stream cut
//     short comes out as a prefix;
//   - a stand-in is a head Go's server reads, and its refusal is one of
//     the documented JSON errors: 400 framing_conflict, 431
//     request_header_too_large or 505 http_version_not_supported, with a
//     type, a code and a message;
//   - a head the guard passes (judgeHead) comes out unchanged: a valid
//     head round-trips.
func FuzzFraming(f *testing.F) {
	for _, s := range []string{
		"POST /v1/payments HTTP/1.1\r\nHost: x\r\nContent-Length: 12\r\n\r\n{\"amount\":1}",
		"GET /v1/payments/pay_1 HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n",
		"\r\n\r\nGET / HTTP/1.0\r\n\r\n",
		"POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"a\"\r\n3;e=1\r\n:1}\r\n0\r\nT: 1\r\n\r\n",
		"POST /y HTTP/1.0\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\nok",
		"POST /d HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nxyz\r\n0\r\n\r\n",
		"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n",
		"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
		"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
		"POST / HTTP/1.1\r\nContent-Length: 1, 1\r\n\r\na",
		"POST / HTTP/1.1\r\nContent-Length : 1\r\n\r\na",
		"POST / HTTP/1.1\r\nX: 1\r\n folded\r\n\r\n",
		"POST / HTTP/1.1\r\nX: a\x01b\r\n\r\n",
		"GET / HTTP/2.0\r\nHost: x\r\n\r\n",
		"GET / HTTP/1.1\nHost: x\n\n",
		"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
		"POST / HTTP/1.1\r\nContent-Length: 999999999999999999\r\n\r\n",
		"GET / HTTP/1.1\r\nSurgepay-Framing-Conflict: version\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x",
	} {
		f.Add([]byte(s), uint64(7))
		f.Add([]byte(s), uint64(1))
	}
	f.Fuzz(func(t *testing.T, in []byte, split uint64) {
		whole := readFramed(in, []int{len(in) + 1}, len(in)+1)
		sizes := []int{1 + int(split%61), 1 + int(split>>8%4096), 1 + int(split>>20%7)}
		split1 := readFramed(in, sizes, 1+int(split>>32%4096))
		trickle := readFramed(in, []int{1}, 1)
		if !bytes.Equal(whole, split1) || !bytes.Equal(whole, trickle) {
			t.Fatalf("%q: out depends on the reads:\nwhole   %q\nsplit   %q (%v)\ntrickle %q", in, whole, split1, sizes, trickle)
		}
		if err := framedFrom(in, whole); err != nil {
			t.Fatalf("%q -> %q: %v", in, whole, err)
		}
		checkStandIns(t, in, whole)
		if at, head, ok := firstHead(in); ok {
			if act, _, _ := judgeHead(head); act == headPass && !bytes.HasPrefix(whole, in[:at+len(head)]) {
				t.Fatalf("%q: a head the guard passes came out as %q", in, whole)
			}
		}
	})
}

// readFramed reads in through a framingConn over a connection that
// delivers reads of sizes in turn, into a buffer of buf bytes.
func readFramed(in []byte, sizes []int, buf int) []byte {
	c := &framingConn{Conn: &chunkConn{data: string(in), sizes: sizes}}
	var out []byte
	p := make([]byte, buf)
	for range 1 << 20 {
		n, err := c.Read(p)
		out = append(out, p[:n]...)
		if err != nil {
			break
		}
	}
	return out
}

// framedFrom reports how out is not in as the guard may change it: in
// unchanged, but for renamed Content-Length lines, or a stand-in of a
// refused head ending it, or cut short.
func framedFrom(in, out []byte) error {
	for _, why := range []string{framingRefusedAmbiguous, framingRefusedHeadTooLarge, framingRefusedVersion} {
		if s := refusedHead(why); bytes.HasSuffix(out, []byte(s)) {
			out = out[:len(out)-len(s)]
			break
		}
	}
	ins, outs := bytes.SplitAfter(in, []byte("\n")), bytes.SplitAfter(out, []byte("\n"))
	if len(outs) > len(ins) {
		return fmt.Errorf("%d lines out of %d in", len(outs), len(ins))
	}
	renamed := []byte(framingConflictHeader + ":")
	for i, o := range outs {
		l := ins[i]
		if i == len(outs)-1 && !bytes.HasSuffix(o, []byte("\n")) {
			if !bytes.HasPrefix(l, o) {
				return fmt.Errorf("line %d: last %q is not a prefix of %q", i, o, l)
			}
			continue
		}
		if bytes.Equal(o, l) {
			continue
		}
		name, value, ok := bytes.Cut(l, []byte(":"))
		if !ok || !bytes.EqualFold(name, []byte("Content-Length")) || !bytes.Equal(o, append(slices.Clip(renamed), value...)) {
			return fmt.Errorf("line %d: %q became %q", i, l, o)
		}
	}
	return nil
}

// checkStandIns reads out as Go's server would and checks that a refused
// head's stand-in is read and answered with a documented JSON error.
func checkStandIns(t *testing.T, in, out []byte) {
	br := bufio.NewReader(bytes.NewReader(out))
	for range 64 {
		r, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		why := r.Header.Get(framingConflictHeader)
		_, _ = io.Copy(io.Discard, r.Body)
		if why == "" || r.Host != "refused" {
			continue
		}
		status, body := render(nil, framingError(why))
		want := map[int]string{400: "framing_conflict", 431: EHEADTOOLARGE, 505: EVERSION}[status]
		var eb struct {
			Error struct{ Type, Code, Message string }
		}
		if err := json.Unmarshal(body, &eb); err != nil || want == "" || eb.Error.Code != want ||
			eb.Error.Type == "" || eb.Error.Message == "" {
			t.Fatalf("%q: stand-in %q answered %d %s", in, why, status, body)
		}
	}
}

// firstHead returns the first request head of in after any blank lines,
// through its blank line, and where it starts, if in holds it whole within
// FramingHeadBytesMax.
func firstHead(in []byte) (int, []byte, bool) {
	at := 0
	for bytes.HasPrefix(in[at:], []byte("\r\n")) || bytes.HasPrefix(in[at:], []byte("\n")) {
		at += bytes.IndexByte(in[at:], '\n') + 1
	}
	end := at
	for {
		i := bytes.IndexByte(in[end:], '\n')
		if i < 0 {
			return 0, nil, false
		}
		end += i + 1
		if end-at > FramingHeadBytesMax {
			return 0, nil, false
		}
		if h := in[at:end]; bytes.HasSuffix(h, []byte("\n\r\n")) || bytes.HasSuffix(h, []byte("\n\n")) {
			return at, h, true
		}
	}
}
