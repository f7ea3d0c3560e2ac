package egress_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/oncehook/oncehook/internal/egress"
)

// What is not public is refused, by class, however it is written: the
// ranges of net/netip's predicates, the special-purpose ones beyond
// them, and IPv4 reached through an IPv6 form (mapped, NAT64, 6to4).
func TestOnlyPublicAddressesAreDialed(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1":                "loopback",
		"127.255.255.254":          "loopback",
		"::1":                      "loopback",
		"::ffff:127.0.0.1":         "loopback",
		"10.1.2.3":                 "private",
		"172.16.0.1":               "private",
		"172.31.255.255":           "private",
		"192.168.1.1":              "private",
		"fc00::1":                  "private",
		"fd12:3456::1":             "private",
		"::ffff:10.0.0.1":          "private",
		"::ffff:192.168.0.1":       "private",
		"169.254.169.254":          "link-local",
		"169.254.0.1":              "link-local",
		"fe80::1":                  "link-local",
		"fe80::1%eth0":             "link-local",
		"::ffff:169.254.169.254":   "link-local",
		"0.0.0.0":                  "unspecified",
		"0.1.2.3":                  "unspecified",
		"::":                       "unspecified",
		"224.0.0.1":                "multicast",
		"239.255.255.250":          "multicast",
		"ff02::1":                  "multicast",
		"ff05::2":                  "multicast",
		"100.64.0.1":               "carrier-grade NAT (shared, 100.64.0.0/10)",
		"100.127.255.254":          "carrier-grade NAT (shared, 100.64.0.0/10)",
		"192.0.0.8":                "reserved",
		"192.0.2.1":                "for documentation",
		"198.51.100.1":             "for documentation",
		"203.0.113.9":              "for documentation",
		"2001:db8::1":              "for documentation",
		"198.18.0.1":               "for benchmarking",
		"240.0.0.1":                "reserved",
		"255.255.255.255":          "reserved",
		"64:ff9b::7f00:1":          "loopback", // NAT64 of 127.0.0.1
		"64:ff9b::a00:1":           "private",  // NAT64 of 10.0.0.1
		"64:ff9b:1::1":             "private",
		"2002:7f00:1::1":           "loopback", // 6to4 of 127.0.0.1
		"2002:a9fe:a9fe::1":        "link-local",
		"::127.0.0.1":              "reserved", // IPv4-compatible, deprecated
		"100::1":                   "reserved",
		"2001::1":                  "reserved", // Teredo
		"8.8.8.8":                  "",
		"1.1.1.1":                  "",
		"100.63.255.255":           "",
		"100.128.0.0":              "",
		"172.32.0.1":               "",
		"169.253.255.255":          "",
		"::ffff:8.8.8.8":           "",
		"64:ff9b::808:808":         "", // NAT64 of 8.8.8.8
		"2002:808:808::1":          "",
		"2606:4700:4700::1111":     "",
		"2a00:1450:4001:82a::200e": "",
	} {
		a := netip.MustParseAddr(addr)
		if got := egress.Class(a); got != want {
			t.Errorf("Class(%s) = %q, want %q", addr, got, want)
		}
		err := egress.New(nil).Check(a)
		var refused *egress.RefusedError
		if (want == "") != (err == nil) || (err != nil && (!errors.As(err, &refused) || refused.Class != want)) {
			t.Errorf("Check(%s) = %v, want class %q", addr, err, want)
		}
	}
}

// The operator's allow-list lets tenants reach what it names, and that
// only; an IPv4 entry covers the address's mapped form too.
func TestTheAllowListLetsThrough(t *testing.T) {
	var allow []netip.Prefix
	for _, s := range []string{"10.0.5.0/24", "fd00::/8", "192.168.1.7", "10.9.9.9/8"} {
		p, err := egress.ParseAllow(s)
		if err != nil {
			t.Fatal(err)
		}
		allow = append(allow, p)
	}
	g := egress.New(allow)
	for addr, ok := range map[string]bool{
		"10.0.5.1": true, "::ffff:10.0.5.1": true, "10.0.6.1": true, "fd00::5": true, "192.168.1.7": true,
		"192.168.1.8": false, "127.0.0.1": false, "fc00::1": false, "169.254.169.254": false, "8.8.8.8": true,
	} {
		if err := g.Check(netip.MustParseAddr(addr)); (err == nil) != ok {
			t.Errorf("%s: %v, want allowed %v", addr, err, ok)
		}
	}
	for _, bad := range []string{"", "10.0.5.0/33", "example.com", "10.0.5", "10.0.5.0/24/1", "\x00", strings.Repeat("1", 1<<20)} {
		if _, err := egress.ParseAllow(bad); err == nil {
			t.Errorf("ParseAllow(%q) took it", bad)
		}
	}
}

// A URL's host is refused as written when it is a literal address that
// is not public, or localhost (any case, a trailing dot, a name under
// it); a name is left to the dial.
func TestALiteralHostIsRefusedBeforeAnyDial(t *testing.T) {
	g := egress.New(nil)
	for _, host := range []string{"127.0.0.1", "localhost", "LocalHost.", "api.localhost", "::1", "::ffff:127.0.0.1", "0.0.0.0", "169.254.169.254", "fe80::1%eth0", "10.0.0.1", "127.0.0.1.", "FE80::1"} {
		err := g.CheckHost(host)
		if err == nil || !strings.Contains(err.Error(), "tenant destinations reach public addresses only") {
			t.Errorf("CheckHost(%q) = %v", host, err)
		}
	}
	for _, host := range []string{"hooks.example.com", "8.8.8.8", "2606:4700:4700::1111", "localhost.example.com", "0177.0.0.1", ""} {
		if err := g.CheckHost(host); err != nil {
			t.Errorf("CheckHost(%q) = %v, want it left to the dial", host, err)
		}
	}
	if err := egress.New([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}).CheckHost("localhost"); err != nil {
		t.Errorf("localhost with 127.0.0.0/8 allowed: %v", err)
	}
}

// guarded is a client whose dials go through g, as a tenant's
// destination's do.
func guarded(g *egress.Guard, proxy func(*http.Request) (*url.URL, error)) *http.Client {
	return &http.Client{Transport: g.Transport(&http.Transport{Proxy: proxy})}
}

// A tenant's POST to a loopback server never reaches it, however the
// URL names it (a literal, a name that resolves there, an IPv6 form);
// the error says why, and no more. Allowed, it goes through.
func TestADialToLoopbackNeverReachesIt(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		io.WriteString(w, "internal answer")
	}))
	defer srv.Close()
	port := strconv.Itoa(srv.Listener.Addr().(*net.TCPAddr).Port)
	client := guarded(egress.New(nil), nil)
	for _, host := range []string{"127.0.0.1", "localhost", "[::ffff:127.0.0.1]", "[::1]", "0.0.0.0"} {
		resp, err := client.Post("http://"+host+":"+port+"/hook", "application/json", strings.NewReader("{}"))
		if err == nil {
			resp.Body.Close()
			t.Errorf("%s: answered %d", host, resp.StatusCode)
			continue
		}
		var refused *egress.RefusedError
		if !errors.As(err, &refused) || !strings.Contains(err.Error(), "address refused: ") || !strings.Contains(err.Error(), "tenant destinations reach public addresses only") {
			t.Errorf("%s: %v", host, err)
		}
		if strings.Contains(err.Error(), "internal answer") {
			t.Errorf("%s: the error quotes the answer: %v", host, err)
		}
	}
	if n := calls.Load(); n != 0 {
		t.Fatalf("the loopback server was called %d times", n)
	}
	allowed := guarded(egress.New([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}), nil)
	resp, err := allowed.Post("http://localhost:"+port+"/hook", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatalf("allowed: %v", err)
	}
	resp.Body.Close()
	if calls.Load() != 1 {
		t.Fatalf("allowed: %d calls", calls.Load())
	}
}

// Where a proxy carries the request, the proxy is dialed (the operator's
// egress control, which dials the target itself): the guard checks only
// what the gateway dials.
func TestAProxyIsTheOperatorsEgress(t *testing.T) {
	var asked atomic.Value
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Store(r.URL.String())
		w.WriteHeader(http.StatusNoContent)
	}))
	defer proxy.Close()
	u, _ := url.Parse(proxy.URL)
	resp, err := guarded(egress.New(nil), http.ProxyURL(u)).Post("http://10.1.2.3/hook", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	resp.Body.Close()
	if got, _ := asked.Load().(string); got != "http://10.1.2.3/hook" {
		t.Fatalf("the proxy was asked for %q", got)
	}
}
