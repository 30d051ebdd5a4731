package api

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"
)

// clientAddr believes X-Forwarded-For only from a trusted proxy, and
// then only from the right, up to the first address that is not a
// trusted proxy: what a client wrote itself is never read.
func TestClientAddr(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("127.0.0.1/32"),
		netip.MustParsePrefix("fd00::/8")}
	for _, tt := range []struct {
		name, peer string
		xff        []string
		trusted    []netip.Prefix
		want       string
	}{
		{"no proxies configured: the peer, the header ignored", "203.0.113.7:5000", []string{"198.51.100.1"}, nil, "203.0.113.7"},
		{"an untrusted peer's header is ignored", "203.0.113.7:5000", []string{"198.51.100.1"}, trusted, "203.0.113.7"},
		{"a trusted proxy names the client", "10.0.0.2:41000", []string{"198.51.100.1"}, trusted, "198.51.100.1"},
		{"what the client wrote, left of it, is not read", "10.0.0.2:41000", []string{"1.1.1.1, 2.2.2.2, 198.51.100.1"}, trusted, "198.51.100.1"},
		{"two trusted proxies", "127.0.0.1:41000", []string{"198.51.100.1, 10.1.2.3"}, trusted, "198.51.100.1"},
		{"several headers are one list, in order", "127.0.0.1:41000", []string{"9.9.9.9", "198.51.100.1", "10.1.2.3"}, trusted, "198.51.100.1"},
		{"no header: the proxy", "10.0.0.2:41000", nil, trusted, "10.0.0.2"},
		{"only trusted entries: the last trusted hop", "10.0.0.2:41000", []string{"10.9.9.9, 10.1.1.1"}, trusted, "10.9.9.9"},
		{"garbage the proxy appended: the proxy speaks for it", "10.0.0.2:41000", []string{"198.51.100.1, unknown"}, trusted, "10.0.0.2"},
		{"garbage left of the client is not read", "10.0.0.2:41000", []string{"<script>, 198.51.100.1"}, trusted, "198.51.100.1"},
		{"an entry with a port", "10.0.0.2:41000", []string{"198.51.100.1:61000"}, trusted, "198.51.100.1"},
		{"IPv6, bracketed, with a port", "[fd00::1]:41000", []string{"[2001:db8::7]:61000"}, trusted, "2001:db8::7"},
		{"IPv6 bracketed without a port", "[fd00::1]:41000", []string{"[2001:db8::7]"}, trusted, "2001:db8::7"},
		{"an IPv4-mapped trusted peer", "[::ffff:10.0.0.2]:41000", []string{"198.51.100.1"}, trusted, "198.51.100.1"},
		{"a mapped client address is its IPv4 form", "10.0.0.2:41000", []string{"::ffff:198.51.100.1"}, trusted, "198.51.100.1"},
		{"a peer that is no address", "pipe", []string{"198.51.100.1"}, trusted, "pipe"},
		{"more trusted hops than read", "10.0.0.2:41000", []string{"198.51.100.1," + strings.Repeat(" 10.0.0.9,", ForwardedHopsMax) + " 10.0.0.8"}, trusted, "10.0.0.9"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := &http.Request{RemoteAddr: tt.peer, Header: http.Header{}}
			for _, v := range tt.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := clientAddr(r, tt.trusted); got != tt.want {
				t.Errorf("clientAddr(peer %s, X-Forwarded-For %q) = %s, want %s", tt.peer, tt.xff, got, tt.want)
			}
		})
	}
}
