// Package egress keeps a tenant's destinations to public addresses. A
// tenant creates its destinations itself, and an attempt's answer is
// shown to it: a destination at 127.0.0.1:8080, 10.0.0.5 or the cloud's
// metadata address (169.254.169.254) would let it read the operator's
// internal services through the gateway.
//
// The check is made where the gateway dials (Guard.DialContext, on the
// address the resolver gave and the socket is about to connect to), not
// on the URL: a name that resolves to a private address, a name whose
// answer changes between a check and the dial (DNS rebinding), and every
// form of an address a URL can spell (::ffff:127.0.0.1, 0177.0.0.1 read
// by a resolver as octal) are all caught at the one address that counts.
// A configuration check (config's) refuses the plain cases early (a
// literal address, localhost) so a tenant hears of them when it creates
// the destination, not at its first attempt.
package egress

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"
)

// special are the ranges beyond net/netip's predicates that no public
// destination has (IANA's special-purpose registries), with what each is.
var special = []struct {
	prefix netip.Prefix
	class  string
}{
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified"}, // "this network"
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT (shared, 100.64.0.0/10)"},
	{netip.MustParsePrefix("192.0.0.0/24"), "reserved"},
	{netip.MustParsePrefix("192.0.2.0/24"), "for documentation"},
	{netip.MustParsePrefix("198.51.100.0/24"), "for documentation"},
	{netip.MustParsePrefix("203.0.113.0/24"), "for documentation"},
	{netip.MustParsePrefix("198.18.0.0/15"), "for benchmarking"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"},   // 255.255.255.255 too
	{netip.MustParsePrefix("64:ff9b:1::/48"), "private"}, // local-use NAT64
	{netip.MustParsePrefix("2001:db8::/32"), "for documentation"},
	{netip.MustParsePrefix("3fff::/20"), "for documentation"},
	{netip.MustParsePrefix("2001::/23"), "reserved"}, // IETF protocol assignments, Teredo
}

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
	global6   = netip.MustParsePrefix("2000::/3")
)

// Class says why addr is not a public address: "loopback", "private",
// "link-local", ... ("" when it is public). An IPv4 address written as
// IPv6 (::ffff:10.0.0.1, and the NAT64 and 6to4 forms that carry one) is
// judged as the IPv4 address it reaches.
func Class(addr netip.Addr) string {
	addr = addr.WithZone("").Unmap()
	switch {
	case !addr.IsValid() || addr.IsUnspecified():
		return "unspecified"
	case addr.IsLoopback():
		return "loopback"
	case addr.IsPrivate():
		return "private"
	case addr.IsLinkLocalUnicast():
		return "link-local"
	case addr.IsMulticast(), addr.IsLinkLocalMulticast(), addr.IsInterfaceLocalMulticast():
		return "multicast"
	}
	for _, s := range special {
		if s.prefix.Contains(addr) {
			return s.class
		}
	}
	if addr.Is6() {
		b := addr.As16()
		switch {
		case nat64.Contains(addr):
			return Class(netip.AddrFrom4([4]byte(b[12:16])))
		case sixToFour.Contains(addr):
			return Class(netip.AddrFrom4([4]byte(b[2:6])))
		case !global6.Contains(addr):
			// Outside global unicast: IPv4-compatible (::a.b.c.d),
			// discard-only (100::/64), unassigned.
			return "reserved"
		}
	}
	return ""
}

// RefusedError is a dial the guard refused: the address, and why.
type RefusedError struct {
	Addr  netip.Addr
	Class string
}

func (e *RefusedError) Error() string {
	if !e.Addr.IsValid() {
		return "address refused: " + e.Class + "; tenant destinations reach public addresses only"
	}
	return fmt.Sprintf("address refused: %s is %s; tenant destinations reach public addresses only", e.Addr, e.Class)
}

// Guard refuses what is not public, but for the prefixes the operator
// allows (tenant_egress.allow). The zero Guard allows nothing more.
type Guard struct {
	allow []netip.Prefix

	// proxies are the host:port of the proxies the guarded transport
	// was told to use (Transport): dialed as they are.
	proxies sync.Map
}

// New is a Guard that lets tenants' destinations reach allow too.
func New(allow []netip.Prefix) *Guard { return &Guard{allow: allow} }

// ParseAllow reads one entry of an allow-list: a CIDR prefix
// (10.0.5.0/24, fd00::/8) or one address (10.0.5.7, as /32).
func ParseAllow(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// Check is nil when addr may be dialed for a tenant: public, or allowed;
// a *RefusedError otherwise.
func (g *Guard) Check(addr netip.Addr) error {
	class := Class(addr)
	if class == "" {
		return nil
	}
	plain := addr.WithZone("")
	for _, p := range g.allow {
		if p.Contains(plain) || p.Contains(plain.Unmap()) {
			return nil
		}
	}
	return &RefusedError{Addr: plain, Class: class}
}

// CheckHost is Check for a URL's host as it is written, before any
// resolving: a literal address, and localhost (RFC 6761: every name
// under it is loopback), are refused; any other name is left to the
// dial, since only the address it resolves to then counts.
func (g *Guard) CheckHost(host string) error {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		for _, a := range []netip.Addr{netip.IPv6Loopback(), netip.AddrFrom4([4]byte{127, 0, 0, 1})} {
			if g.Check(a) == nil {
				return nil
			}
		}
		return fmt.Errorf("%s is loopback; tenant destinations reach public addresses only", host)
	}
	a, err := netip.ParseAddr(h) // 127.0.0.1. too
	if err != nil {
		return nil
	}
	if err := g.Check(a); err != nil {
		return fmt.Errorf("%s is %s; tenant destinations reach public addresses only", a.WithZone(""), err.(*RefusedError).Class)
	}
	return nil
}

// control is the dialer's hook: it runs once the address is resolved,
// just before the socket connects to it.
func (g *Guard) control(_ context.Context, _, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		// Not an IP socket address (a unix socket): nothing a tenant's
		// URL dials.
		return &RefusedError{Class: "not an IP address"}
	}
	return g.Check(ap.Addr())
}

// DialContext dials address, refusing a resolved address Check refuses,
// but for a proxy the transport was given (Transport): the operator's own
// egress, which dials the target itself.
func (g *Guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	d := net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	if _, proxy := g.proxies.Load(address); !proxy {
		d.ControlContext = g.control
	}
	return d.DialContext(ctx, network, address)
}

// Transport makes t dial through the guard: its DialContext is the
// guard's, and the proxy its Proxy names for a request (the
// environment's HTTP_PROXY, HTTPS_PROXY) is dialed as it is. Where a
// proxy carries a request, the proxy dials the target, and is the
// operator's egress control: the guard checks only what the gateway
// dials itself.
func (g *Guard) Transport(t *http.Transport) *http.Transport {
	proxy := t.Proxy
	if proxy != nil {
		t.Proxy = func(r *http.Request) (*url.URL, error) {
			u, err := proxy(r)
			if u != nil && err == nil {
				g.proxies.Store(proxyAddr(u), true)
			}
			return u, err
		}
	}
	t.DialContext = g.DialContext
	// A transport with its own DialContext speaks HTTP/2 only when asked.
	t.ForceAttemptHTTP2 = true
	return t
}

// proxyAddr is the host:port the transport dials for proxy u.
func proxyAddr(u *url.URL) string {
	port := u.Port()
	if port == "" {
		switch u.Scheme {
		case "https":
			port = "443"
		case "socks5", "socks5h":
			port = "1080"
		default:
			port = "80"
		}
	}
	return net.JoinHostPort(u.Hostname(), port)
}
