package idempotency

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"

	"github.com/oncehook/oncehook/effect"
	"github.com/oncehook/oncehook/internal/jsonhttp"
	"github.com/oncehook/oncehook/internal/redact"
)

// LedgerKeyPrefix begins every key the middleware keeps in the effects
// ledger: idem:{Options.Name}:{client}:{key}.
const LedgerKeyPrefix = "idem:"

// LedgerPrefix is the ledger's key prefix of the answers of the route
// named name (Options.Name): what a retention rule or a listing of one
// API's answers selects.
func LedgerPrefix(name string) string { return LedgerKeyPrefix + name + ":" }

// LedgerKey is the ledger's key of client's request with key at the route
// named name.
func LedgerKey(name, client, key string) string { return LedgerPrefix(name) + client + ":" + key }

// ParseLedgerKey splits a ledger key the middleware made into its route's
// name and the rest (the client and the key), and reports whether it is
// one.
func ParseLedgerKey(ledgerKey string) (name, rest string, ok bool) {
	after, ok := strings.CutPrefix(ledgerKey, LedgerKeyPrefix)
	if !ok {
		return "", "", false
	}
	return strings.Cut(after, ":")
}

// Proxy is the user's API at upstream behind the middleware (New(ledger,
// opts)): a reverse proxy that forwards each request as it came (its path
// unchanged, a prefix included), the client's headers and the key passed
// on. An upstream that cannot be reached is a 502 that releases the key at
// once (the request never left: a retry may run it); one that does not
// answer is a 502 that keeps the key held until its lease (nobody knows
// whether it acted). opts.Logger hears of both.
func Proxy(upstream *url.URL, ledger effect.Ledger, opts Options) http.Handler {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(upstream)
			pr.SetXForwarded()
			neverResend(pr.Out)
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			var op *net.OpError
			if errors.As(err, &op) && op.Op == "dial" {
				// The request never left: a retry may run it at once.
				NotStarted(r)
				log.Warn("the upstream could not be reached", "err", redact.Error(err))
				jsonhttp.WriteError(w, http.StatusBadGateway, "upstream_unavailable", "the API behind oncehook could not be reached: retry with the same Idempotency-Key")
				return
			}
			// Nobody knows whether the upstream acted: the key stays held
			// until its lease, never released at once.
			Unanswered(r)
			log.Warn("the upstream did not answer", "err", redact.Error(err))
			jsonhttp.WriteError(w, http.StatusBadGateway, "upstream_unavailable", "the API behind oncehook did not answer: retry with the same Idempotency-Key (after its lease, if it is still held)")
		},
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	return New(ledger, opts)(rp)
}

// UnderPrefix refuses a path with a dot segment before it reaches the
// upstream behind a prefix. The mux resolves "/x/../y" (it redirects), but
// not one spelt encoded ("%2e%2e", "..%2f", "..%5c"), and the proxy
// forwards a path as it came: an upstream that decodes and then resolves
// it (nginx and Apache do; some take "\" for "/") would serve a path
// outside the prefix, which is all of the API the config meant to put on
// intake's listener. No client needs a dot segment, so any is refused.
func UnderPrefix(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for seg := range strings.FieldsFuncSeq(r.URL.Path, func(c rune) bool { return c == '/' || c == '\\' }) {
			if seg == "." || seg == ".." {
				jsonhttp.WriteJSON(w, http.StatusBadRequest, jsonhttp.Error{Error: "the path holds a . or .. segment (perhaps encoded): it is refused, never forwarded", Reason: "invalid", Field: "path"})
				return
			}
		}
		h.ServeHTTP(w, r)
	})
}

// neverResend keeps the transport from sending out again on a new
// connection when the one it reused broke: it does that for a request
// with no body (the reverse proxy drops an empty one) that carries an
// Idempotency-Key, taking the header's word that a repeat is harmless. The
// upstream may have acted on the first copy: only the proxy's key decides
// a repeat. A body the transport cannot rewind makes the request one it
// never resends; an empty one is still sent as Content-Length: 0.
func neverResend(out *http.Request) {
	switch out.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return // safe by HTTP's own rules: resent with or without a key
	}
	if out.Body == nil || out.Body == http.NoBody {
		out.Body = io.NopCloser(strings.NewReader(""))
		out.GetBody = nil
	}
}
