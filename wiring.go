package oncehook

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/deliver"
	"github.com/oncehook/oncehook/effect"
	"github.com/oncehook/oncehook/idempotency"
	"github.com/oncehook/oncehook/internal/alert"
	"github.com/oncehook/oncehook/internal/apiauth"
	"github.com/oncehook/oncehook/internal/dashboard"
	"github.com/oncehook/oncehook/internal/hold"
	"github.com/oncehook/oncehook/internal/jsonhttp"
	"github.com/oncehook/oncehook/internal/metrics"
	"github.com/oncehook/oncehook/internal/redact"
	"github.com/oncehook/oncehook/internal/route"
	"github.com/oncehook/oncehook/provider"
	"github.com/oncehook/oncehook/receive"
	"github.com/oncehook/oncehook/store"
)

// The config, translated into each part's options: one function a part,
// so that what the gateway builds reads as a list (Gateway.build). A
// zero the config leaves (a limit not set) passes on, and the part fills
// in its own default.

// deliverDestinations are the worker's destinations; senders are the
// queue destinations' publishers (publishers.prepare), by name: the
// others POST to their url.
func deliverDestinations(cfg *config.Config, senders map[string]deliver.Sender) []deliver.Destination {
	dests := make([]deliver.Destination, len(cfg.Destinations))
	for i, d := range cfg.Destinations {
		dests[i] = deliver.Destination{
			Name: d.Name, URL: d.URL, Timeout: time.Duration(d.Timeout), Headers: d.Headers,
			Retry:         deliver.RetryPolicy{MaxAttempts: d.Retry.MaxAttempts, BaseDelay: time.Duration(d.Retry.BaseDelay), MaxDelay: time.Duration(d.Retry.MaxDelay)},
			NoTraceparent: d.Traceparent != nil && !*d.Traceparent,
			Sender:        senders[d.Name],
			Transform:     cfg.Script(d.Name),
		}
		if d.Secret != "" {
			dests[i].SigningKey, _ = provider.DecodeStandardSecret(d.Secret) // validated
		}
	}
	return dests
}

// holdPolicies are the destinations' flow control: a rate where one is
// set, and a breaker unless it is turned off.
func holdPolicies(cfg *config.Config) map[string]hold.Policy {
	out := make(map[string]hold.Policy, len(cfg.Destinations))
	for _, d := range cfg.Destinations {
		b := d.Breaker
		out[d.Name] = hold.Policy{Rate: d.Rate.N, Per: d.Rate.Per, Concurrency: d.Concurrency, Breaker: hold.BreakerPolicy{
			Off: b.Off, Failures: b.Failures, FailureRatio: b.FailureRatio, Window: time.Duration(b.Window),
			MinAttempts: b.MinAttempts, Cooldown: time.Duration(b.Cooldown), MaxCooldown: time.Duration(b.MaxCooldown),
		}}
	}
	return out
}

func destinationNames(cfg *config.Config) []string {
	names := make([]string, len(cfg.Destinations))
	for i, d := range cfg.Destinations {
		names[i] = d.Name
	}
	return names
}

func effectOptions(cfg *config.Config, commit func(context.Context, []store.EffectOp) ([]store.EffectResult, error)) effect.Options {
	retention := map[string]time.Duration{}
	for _, a := range cfg.Upstreams {
		// An API's stored answers are kept for its window (24h unless set).
		w := 24 * time.Hour
		if a.Idempotency.Window > 0 {
			w = time.Duration(a.Idempotency.Window)
		}
		retention[idempotencyPrefix(a.Name)] = w
	}
	for p, d := range cfg.Effects.RetentionByPrefix {
		retention[p] = time.Duration(d)
	}
	return effect.Options{
		Retention: time.Duration(cfg.Effects.Retention), RetentionByPrefix: retention,
		MaxLease: time.Duration(cfg.Effects.MaxLease), MaxResult: int(cfg.Effects.MaxResult),
		Commit: commit,
	}
}

func alertOptions(cfg *config.Config, st store.Store, ledger *effect.Local, m *metrics.Metrics, log *slog.Logger) alert.Options {
	a := cfg.Alerts
	return alert.Options{
		URL: a.URL, Headers: a.Headers,
		DuplicateFactor: a.DuplicateFactor, MinVolume: a.MinVolume, BaselineFloor: a.BaselineFloor,
		DeadLetters: a.DeadLetters, OldestPending: time.Duration(a.OldestPending), Interval: time.Duration(a.Interval),
		Store: st, Ledger: ledger, Registerer: m.Registry, Logger: log,
	}
}

func receiveSources(cfg *config.Config) ([]receive.Source, error) {
	sources := make([]receive.Source, len(cfg.Sources))
	for i, s := range cfg.Sources {
		p, err := provider.New(s.Preset, s.ProviderOptions())
		if err != nil {
			return nil, fmt.Errorf("sources[%d]: %w", i, err)
		}
		routes := make(route.Routes, len(s.Destinations))
		for j, d := range s.Destinations {
			routes[j] = route.Route{Destination: d.Name, Types: d.Types}
			if d.Filter != nil {
				if routes[j].Filter, err = route.Compile(d.Filter); err != nil {
					return nil, fmt.Errorf("sources[%d].destinations[%d].filter: %w", i, j, err) // validated: never
				}
			}
		}
		sources[i] = receive.Source{
			Name: s.Name, Preset: p, Window: time.Duration(s.Window), BodyRetention: time.Duration(s.BodyRetention), Routes: routes,
			RejectMissingKey: s.OnMissingKey == "reject", DiscardUnauthorized: s.OnBadSignature == "discard",
			Elsewhere: s.Elsewhere(),
		}
		if o := s.Order; o != nil {
			rule, err := provider.ParseOrderRule(o.Entity, o.Version, o.VersionUnit, time.Duration(o.MaxAhead))
			if err != nil {
				return nil, fmt.Errorf("sources[%d].order: %w", i, err) // validated: never
			}
			sources[i].Order = &receive.Order{Rule: rule, Mode: store.OrderMode(o.Mode), DeliverStale: o.OnStale == "deliver"}
		}
	}
	return sources, nil
}

// idempotencyPrefix is the ledger's key prefix of an API's answers.
func idempotencyPrefix(name string) string { return "idem:" + name + ":" }

// upstreamProxy is the user's API a behind the Idempotency-Key
// middleware: a reverse proxy to its upstream (validated) that forwards
// each request as it came (its path unchanged, prefix included), the
// client's headers and the key passed on. The bodies the middleware holds
// are read on intake's terms (budget and pace). log names the API.
func upstreamProxy(a config.Upstream, ledger effect.Ledger, intake *receive.Handler, maxStored int, m *metrics.Metrics, log *slog.Logger) http.Handler {
	up, _ := url.Parse(a.Upstream)
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(up)
			pr.SetXForwarded()
			neverResend(pr.Out)
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			var op *net.OpError
			if errors.As(err, &op) && op.Op == "dial" {
				// The request never left: a retry may run it at once.
				idempotency.NotStarted(r)
				log.Warn("the upstream could not be reached", "err", redact.Error(err))
				jsonhttp.WriteError(w, http.StatusBadGateway, "upstream_unavailable", "the API behind oncehook could not be reached: retry with the same Idempotency-Key")
				return
			}
			// Nobody knows whether the upstream acted: the key stays held
			// until its lease, never released at once.
			idempotency.Unanswered(r)
			log.Warn("the upstream did not answer", "err", redact.Error(err))
			jsonhttp.WriteError(w, http.StatusBadGateway, "upstream_unavailable", "the API behind oncehook did not answer: retry with the same Idempotency-Key (after its lease, if it is still held)")
		},
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	idem := a.Idempotency
	client := idempotency.AuthorizationClient
	if len(idem.ClientHeaders) > 0 || len(idem.ClientCookies) > 0 {
		client = idempotency.Credentials(idem.ClientHeaders, idem.ClientCookies)
	}
	return idempotency.New(ledger, idempotency.Options{
		Name: a.Name, Methods: idem.Methods, RequireKey: idem.RequireKey, Wait: time.Duration(idem.Wait),
		Lease: time.Duration(idem.Lease), Timeout: time.Duration(idem.Timeout),
		Client: client, SingleTenant: idem.SingleTenant, NotStarted: idem.NotStarted,
		MaxStored: maxStored, Logger: log,
		ReadBody: func(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, func(), error) {
			body, done, err := intake.ReadBody(w, r, limit)
			if err != nil {
				return nil, nil, bodyRefused(w, err)
			}
			return body, done, nil
		},
		OnAnswer: func(replayed bool) { m.Answered(a.Name, replayed) },
	})(rp)
}

// bodyRefused is how an API on the API listener answers a body intake's
// ReadBody refused (the proxy's, the publish endpoint's), setting the
// headers that go with it.
func bodyRefused(w http.ResponseWriter, err error) *idempotency.BodyError {
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return &idempotency.BodyError{Status: http.StatusRequestEntityTooLarge, Reason: "too_large", Message: fmt.Sprintf("the body is over %d bytes", tooLarge.Limit)}
	case errors.Is(err, receive.ErrOverloaded), errors.Is(err, receive.ErrEvicted):
		w.Header().Set("Retry-After", "1")
		return &idempotency.BodyError{Status: http.StatusServiceUnavailable, Reason: "overloaded", Message: "too many request bytes in flight: retry later"}
	case errors.Is(err, receive.ErrSlowBody):
		w.Header().Set("Connection", "close")
		return &idempotency.BodyError{Status: http.StatusRequestTimeout, Reason: "slow_body", Message: "the body arrived too slowly; it was cut"}
	}
	return &idempotency.BodyError{Status: http.StatusBadRequest, Reason: "unreadable", Message: "could not read the body"}
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

func apiTokens(cfg *config.Config) []apiauth.Token {
	tokens := make([]apiauth.Token, len(cfg.API.Tokens))
	for i, t := range cfg.API.Tokens {
		tokens[i] = apiauth.Token{Name: t.Name, Value: t.Token, ReadOnly: t.ReadOnly, Publish: t.Publish}
	}
	return tokens
}

// transformed runs destination's transformation (the running config's) on
// a stored event as its next attempt would, for the dashboard's event page;
// nil when the destination has none. Nothing is sent.
func (g *Gateway) transformed(ctx context.Context, e admin.EventDetail, destination string) (*dashboard.Transformed, error) {
	cfg := g.cfg.Load()
	script := cfg.Script(destination)
	if script == nil {
		return nil, nil
	}
	i := slices.IndexFunc(cfg.Destinations, func(d config.Destination) bool { return d.Name == destination })
	if i < 0 {
		return nil, nil
	}
	cd := cfg.Destinations[i]
	body := []byte(e.Body)
	if e.BodyBase64 != nil {
		body = e.BodyBase64
	}
	attempt := 1
	for _, d := range e.Deliveries {
		if d.Destination == destination {
			attempt = d.Attempts + 1
		}
	}
	dest := &deliver.Destination{Name: cd.Name, URL: cd.URL, Headers: cd.Headers, Transform: script}
	p, err := deliver.PreviewTransform(ctx, dest, store.LeasedDelivery{
		Source: e.Source, Key: e.Key, Type: e.Type, Destination: destination, Attempt: attempt,
		ContentType: e.ContentType, Header: e.Headers, Body: body, ReceivedAt: e.ReceivedAt,
	})
	if err != nil {
		return nil, err
	}
	t := &dashboard.Transformed{Skipped: p.Output.Skip, URL: p.URL, ContentType: p.Message.ContentType,
		Body: string(p.Message.Body), Digest: p.Output.Digest(), TookMS: float64(p.Output.Took.Microseconds()) / 1000}
	if !utf8.Valid(p.Message.Body) {
		t.Body = fmt.Sprintf("(%d bytes, not UTF-8)", len(p.Message.Body))
	}
	names := make([]string, 0, len(p.Header))
	for k := range p.Header {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		for _, v := range p.Header[k] {
			t.Headers = append(t.Headers, dashboard.HeaderLine{Name: k, Value: v})
		}
	}
	return t, nil
}
