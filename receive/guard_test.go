package receive_test

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/oncehook/oncehook/internal/metrics"
	"github.com/oncehook/oncehook/receive"
)

// guarded serves mux as the gateway's intake listener does (Paths before
// it, Listener under it), over TLS when tlsConfig is set.
func guarded(t *testing.T, tlsConfig *tls.Config) (base string, m *metrics.Metrics) {
	t.Helper()
	m = metrics.New()
	h := receive.New(receive.Options{Metrics: m})
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "served "+r.URL.Path)
		if r.TLS != nil {
			io.WriteString(w, " over TLS")
		}
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h.Paths(mux)}
	go srv.Serve(h.Listener(ln, tlsConfig))
	t.Cleanup(func() { srv.Close() })
	scheme := "http"
	if tlsConfig != nil {
		scheme = "https"
	}
	return scheme + "://" + ln.Addr().String(), m
}

// answer is a request's status and body, the body as intake's error shape
// when it is one.
func answer(t *testing.T, c *http.Client, req *http.Request) (int, string, receive.ErrorResponse) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e receive.ErrorResponse
	if resp.Header.Get("Content-Type") == "application/json" {
		json.Unmarshal(b, &e)
	}
	return resp.StatusCode, string(b), e
}

// What net/http answers by itself before any handler is intake's answer
// too, in its one error shape and counted by reason: a path with an empty
// or dot segment (a 307 to the clean path before, uncounted) and a header
// over net/http's limit (a plain-text 431 before, uncounted), over HTTP
// and over TLS, whose requests keep their TLS state.
func TestWhatNetHTTPRefusesIsAnsweredAndCounted(t *testing.T) {
	s := httptest.NewUnstartedServer(nil)
	s.StartTLS()
	tlsConfig, tlsClient := &tls.Config{Certificates: s.TLS.Certificates}, s.Client()
	s.Close()
	for name, c := range map[string]struct {
		tls    *tls.Config
		client *http.Client
	}{"http": {nil, &http.Client{}}, "https": {tlsConfig, tlsClient}} {
		t.Run(name, func(t *testing.T) {
			base, m := guarded(t, c.tls)
			c.client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
			for _, p := range []string{"//in/demo", "/in/../in/demo", "/in/./demo", "/in/demo//", "/in/%2e%2e/in/demo"} {
				req, _ := http.NewRequest(http.MethodPost, base+p, strings.NewReader(`{}`))
				status, body, e := answer(t, c.client, req)
				if status != http.StatusBadRequest || e.Reason != receive.ReasonBadPath || !strings.Contains(e.Error, "/in/demo") {
					t.Errorf("POST %s: %d %s; want 400 bad_path naming /in/demo", p, status, body)
				}
			}
			if n := counted(m, receive.ReasonBadPath); n != 5 {
				t.Errorf("%v bad paths counted, want 5", n)
			}
			// Clean paths go through, dots inside a segment included.
			for _, p := range []string{"/in/demo", "/in/demo/", "/.well-known/x", "/in/de..mo"} {
				req, _ := http.NewRequest(http.MethodPost, base+p, strings.NewReader(`{}`))
				if status, body, _ := answer(t, c.client, req); status != 200 || body != "served "+p+map[bool]string{true: " over TLS"}[c.tls != nil] {
					t.Errorf("POST %s: %d %q", p, status, body)
				}
			}
			req, _ := http.NewRequest(http.MethodPost, base+"/in/demo", strings.NewReader(`{}`))
			req.Header.Set("X-Big", strings.Repeat("a", 2<<20))
			status, body, e := answer(t, c.client, req)
			if status != http.StatusRequestHeaderFieldsTooLarge || e.Reason != receive.ReasonHeaderTooLarge {
				t.Errorf("a 2 MiB header: %d %.200s; want 431 in intake's shape", status, body)
			}
			if n := counted(m, receive.ReasonHeaderTooLarge); n != 1 {
				t.Errorf("%v oversized headers counted, want 1", n)
			}
			if c.tls != nil {
				// Plain HTTP to the TLS listener is told so, as net/http
				// tells it.
				status, body, _ := answer(t, &http.Client{}, mustRequest(t, strings.Replace(base, "https:", "http:", 1)+"/in/demo"))
				if status != http.StatusBadRequest || !strings.Contains(body, "HTTP request to an HTTPS server") {
					t.Errorf("plain HTTP to the TLS listener: %d %q", status, body)
				}
			}
		})
	}
}

func mustRequest(t *testing.T, url string) *http.Request {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// counted is how many requests m counted with reason, under no source.
func counted(m *metrics.Metrics, reason string) float64 {
	families, _ := m.Registry.Gather()
	for _, f := range families {
		for _, s := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if f.GetName() == "oncehook_requests_total" && labels["source"] == "" && labels["outcome"] == reason {
				return s.GetCounter().GetValue()
			}
		}
	}
	return 0
}
