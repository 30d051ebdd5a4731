package api

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ForwardedHopsMax bounds the X-Forwarded-For entries clientAddr reads,
// from the right: a request behind more trusted proxies than this is
// counted under the leftmost one it read.
const ForwardedHopsMax = 32

// clientAddr is the address a request is counted under (the checkout
// routes' per-address limit): its peer's, unless the peer is a trusted
// proxy. Then it is the rightmost X-Forwarded-For entry that is not a
// trusted proxy, read from the right, where each proxy appends the
// address it received the request from (HAProxy's option forwardfor,
// nginx's $proxy_add_x_forwarded_for). Entries left of that one were
// written by the client or an untrusted hop, and are never believed, so a
// shopper cannot pick another's bucket or spread over many. A request
// whose entries are all trusted proxies, or whose first entry read is not
// an address, is counted under the last trusted hop: the proxy speaks for
// it.
func clientAddr(r *http.Request, trusted []netip.Prefix) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil || !isTrusted(peer, trusted) {
		return host
	}
	client, read := peer, 0
	values := r.Header.Values("X-Forwarded-For")
	for i := len(values) - 1; i >= 0; i-- {
		entries := strings.Split(values[i], ",")
		for j := len(entries) - 1; j >= 0; j-- {
			if read++; read > ForwardedHopsMax {
				return client.String()
			}
			a, ok := parseForwarded(entries[j])
			if !ok {
				return client.String()
			}
			client = a
			if !isTrusted(a, trusted) {
				return a.String()
			}
		}
	}
	return client.String()
}

// parseForwarded reads one X-Forwarded-For entry: an address, with a
// port or in brackets as some proxies write it.
func parseForwarded(entry string) (netip.Addr, bool) {
	entry = strings.TrimSpace(entry)
	if a, err := netip.ParseAddr(entry); err == nil {
		return a.Unmap().WithZone(""), true
	}
	if ap, err := netip.ParseAddrPort(entry); err == nil {
		return ap.Addr().Unmap().WithZone(""), true
	}
	if a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(entry, "["), "]")); err == nil {
		return a.Unmap().WithZone(""), true
	}
	return netip.Addr{}, false
}

func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	a = a.Unmap().WithZone("")
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}
