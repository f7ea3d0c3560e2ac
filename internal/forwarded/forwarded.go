// Package forwarded says who an HTTP request came from: the connection's
// peer, or, behind proxies the config trusts, the client they name in
// X-Forwarded-For. Intake's log, the API's wrong-token limit and the
// dashboard's sign-in limit all read it so.
package forwarded

import (
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ClientAddr is the address a request came from, believing X-Forwarded-For
// only as far as it was written by proxies in trusted.
func ClientAddr(r *http.Request, trusted []netip.Prefix) string {
	peer := r.RemoteAddr
	if host, _, err := net.SplitHostPort(peer); err == nil {
		peer = host
	}
	if len(trusted) == 0 || !isTrusted(peer, trusted) {
		return peer
	}
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		for _, hop := range strings.Split(v, ",") {
			if hop = strings.TrimSpace(hop); hop != "" {
				hops = append(hops, hop)
			}
		}
	}
	for i := len(hops) - 1; i >= 0; i-- {
		if !isTrusted(hops[i], trusted) {
			return hops[i]
		}
	}
	if len(hops) > 0 {
		return hops[0]
	}
	return peer
}

func isTrusted(addr string, trusted []netip.Prefix) bool {
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return false
	}
	ip = ip.Unmap()
	for _, p := range trusted {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}
