package receive

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"

	"github.com/oncehook/oncehook/internal/metrics"
	"github.com/oncehook/oncehook/internal/tracing"
	"github.com/oncehook/oncehook/provider"
	"github.com/oncehook/oncehook/store"
)

// Envelope is what a transport brought for one source: one HTTP request's
// body and headers, one message from a queue, one publish from the
// outbox. Accept makes events of it the same way whatever carried it.
type Envelope struct {
	// Header is the request's headers, or the message's headers or
	// attributes, under canonical keys.
	Header http.Header
	// Body is the raw bytes, exactly as received: a signature covers them.
	Body []byte
	// ReceivedAt is when the transport took it (zero: now).
	ReceivedAt time.Time
	// Enqueued is when a broker took the message, by the broker's own
	// clock (zero: it gave none): a signature's age is measured against
	// it, not against ReceivedAt, so that a backlog (messages published
	// while the gateway was down) is not "too old" when it is consumed.
	Enqueued time.Time
	// Queued says the envelope waited in a queue, and nobody will sign it
	// again: a signature that matches but whose timestamp is outside the
	// tolerance (against Enqueued, else ReceivedAt) is taken, logged and
	// counted as aged, never refused for its age alone (invariant 23). A
	// signature that does not match is refused as ever.
	Queued bool
	// Trace is the W3C traceparent the events' deliveries continue; empty:
	// the span in Accept's context, if any.
	Trace string
	// Method, URL and PathToken are HTTP's, for the presets that read them
	// (Twilio signs the URL, some providers send a secret in the path). A
	// queue leaves them unset: Method is then POST.
	Method    string
	URL       *url.URL
	PathToken string
	// SkipVerify says the transport authenticated the envelope itself: a
	// queue source without verify: true (the broker's credentials say who
	// may publish), the outbox (the caller's own transaction or API token).
	SkipVerify bool
	// Key, when set, is the event's key as the caller gives it (the
	// outbox's Idempotency-Key): the source's key rules are not read. Only
	// for an envelope that is one event.
	Key string
	// Client names where the envelope came from, for the log: a request's
	// address, a queue's name.
	Client string
	// Reconcile marks a deliberate re-publish (a reconciliation pass:
	// POST /v1/publish?reconcile=true, PublishOptions.Reconcile): an event
	// whose key is already stored is answered and counted as republished,
	// not as a duplicate, so that the pass neither shows as a provider's
	// trouble nor raises the duplicate-rate alert (invariant 27). An event
	// whose key is new is accepted and delivered as any other: the pass
	// found a row whose publish was lost.
	Reconcile bool
	// Reserve, when set, is asked for n more bytes before a batch's split
	// (which holds memory beyond the body until the answer) is taken on:
	// HTTP's in-flight budget. An error it returns rejects the envelope; a
	// *Rejection says how.
	Reserve func(ctx context.Context, n int64) error
}

// Rejection is why Accept did not take an envelope: a named reason (the
// Reason constants), the status HTTP answers for it, and a detail that
// quotes no secret. Accept counts and logs it; a transport decides what
// it means for its client (an HTTP answer, a message acked as poison, or
// left for the broker to redeliver when the store was unavailable).
type Rejection struct {
	Status int
	Reason string
	Detail string
	// unread: the request's body was not read to its end.
	unread bool
	// retryAfter, when set, is the Retry-After a rate limit answers.
	retryAfter int
}

func (r *Rejection) Error() string { return r.Reason + ": " + r.Detail }

// Temporary reports whether the same envelope may be taken later: the
// store could not commit, or memory was short. Anything else (a bad
// signature, a malformed body, no key) would be rejected again.
func (r *Rejection) Temporary() bool {
	return r.Reason == ReasonUnavailable || r.Reason == ReasonOverloaded
}

// ErrorResponse is what HTTP answers for it.
func (r *Rejection) ErrorResponse() ErrorResponse {
	return ErrorResponse{Error: r.Detail, Reason: r.Reason}
}

// rateLimited is the rejection of a request past its tenant's rate: 429,
// to retry once a request's worth of the rate came back (a second at
// least).
func rateLimited(l *rate.Limiter) *Rejection {
	rej := rejection(http.StatusTooManyRequests, ReasonRateLimited, "over the rate its tenant is allowed; retry later")
	rej.retryAfter = max(1, int(math.Ceil(1/float64(l.Limit()))))
	return rej
}

func rejection(status int, reason, detail string) *Rejection {
	return &Rejection{Status: status, Reason: reason, Detail: bounded(detail)}
}

// Accept takes one envelope for the named source, whatever transport
// brought it: it verifies it (unless SkipVerify), splits it into events,
// takes each one's key, type, routes and place in its entity's order,
// claims them through the group committer, and returns each event's
// verdict only once the transaction holding them is durable (invariants 1
// and 19: a 200, an ack, a publish's answer all mean committed). A
// duplicate is a verdict, not an error. Every outcome is counted as
// intake's are, so a queue's duplicates land in the same rollups as a
// webhook's. The error is a *Rejection.
func (c *Core) Accept(ctx context.Context, source string, env Envelope) (Response, error) {
	src, ok := c.sources.Load().byName[source]
	if !ok {
		c.metrics.Request("", ReasonUnknownSource)
		return Response{}, rejection(http.StatusNotFound, ReasonUnknownSource, "no source named "+source)
	}
	resp, rej := c.accept(ctx, src, env)
	if rej != nil {
		return resp, rej
	}
	return resp, nil
}

// accept is Accept for a source in hand.
func (c *Core) accept(ctx context.Context, src *Source, env Envelope) (Response, *Rejection) {
	events, now, verdict, rej := c.events(ctx, src, env)
	if rej != nil {
		return Response{}, rej
	}
	if verdict == discarded {
		return Response{Status: StatusDiscarded, Events: []EventResult{}}, nil
	}
	name := src.Name

	// 4. Claim and persist; answer only once durable. Events the hot set
	// knows are committed are duplicates for certain and skip the queue.
	claims := make([]store.Claim, len(events))
	pending := make([]store.NewEvent, 0, len(events))
	for i, e := range events {
		if !e.Keyless && c.seen.Has(name, e.Key, now) {
			claims[i].Duplicate = true
			continue
		}
		pending = append(pending, e)
	}
	if len(pending) > 0 {
		cctx := ctx
		var claim trace.Span
		if c.tracer != nil {
			// The claim is the wait for the durable commit.
			cctx, claim = c.tracer.Start(ctx, "claim", trace.WithAttributes(tracing.Events.Int(len(pending))))
		}
		got, err := c.claimer.Claim(cctx, pending)
		if claim != nil {
			claim.End()
		}
		if errors.Is(err, store.ErrRejected) {
			c.log.Error("the store refused these events", "source", name, "err", bounded(err.Error()))
			return Response{}, c.rejected(ctx, name, env.Client, rejection(http.StatusInternalServerError, ReasonStoreRejected, "the events could not be stored"))
		}
		if err != nil {
			c.log.Error("claim failed", "source", name, "err", bounded(err.Error()))
			return Response{}, c.rejected(ctx, name, env.Client, rejection(http.StatusServiceUnavailable, ReasonUnavailable, "events could not be stored; retry later"))
		}
		j := 0
		for i := range claims {
			if claims[i].Duplicate {
				continue // answered by the hot set
			}
			claims[i] = got[j]
			if claim := got[j]; !pending[j].Keyless && !claim.ExpiresAt.IsZero() {
				// Committed, new or not: the key is in the store until the
				// stored expiry, and the set must not outlive it.
				c.seen.Add(name, pending[j].Key, claim.ExpiresAt)
			}
			j++
		}
	}

	if verdict == aged {
		c.metrics.SignatureAged(name) // taken: counted once it is stored
	}
	resp := c.verdicts(src, events, claims, now, env.Reconcile, c.metrics, c.onDup)
	if c.tracer != nil {
		trace.SpanFromContext(ctx).SetAttributes(tracing.Verdict.String(resp.Status), tracing.Events.Int(len(events)))
	}
	return resp, nil
}

// Events makes env into the events Accept would claim for the named
// source, without claiming them: verified (unless SkipVerify), split,
// each with its key, type, deliveries (routes and filters) and place in
// its entity's order, decided exactly as for intake. The outbox claims
// them in the caller's own transaction (a store's TxDriver), then asks
// Verdicts what to answer and count. A rejection is a *Rejection, counted
// and logged as Accept's are; an envelope its source discards (a bad
// signature on a source that answers 200 anyway) is no events.
func (c *Core) Events(ctx context.Context, source string, env Envelope) ([]store.NewEvent, error) {
	src, ok := c.sources.Load().byName[source]
	if !ok {
		c.metrics.Request("", ReasonUnknownSource)
		return nil, rejection(http.StatusNotFound, ReasonUnknownSource, "no source named "+source)
	}
	events, _, _, rej := c.events(ctx, src, env)
	if rej != nil {
		return nil, rej
	}
	return events, nil
}

// Verdicts is what Accept answers for events claimed elsewhere (Events,
// then a TxDriver's ClaimEvents in the caller's transaction): the
// response, and what Accept would have counted, as hourly counters and
// duplicate copies for the caller to write in that same transaction (a
// TxDriver's AddCounts), so that they are counted exactly when the claims
// commit. now is the events' ReceivedAt; reconcile, the envelope's
// Reconcile.
func (c *Core) Verdicts(source string, events []store.NewEvent, claims []store.Claim, now time.Time, reconcile bool) (Response, []store.StatDelta, []store.Copy) {
	src, ok := c.sources.Load().byName[source]
	if !ok {
		src = &Source{Name: source}
	}
	tally := metrics.Rollups(func() time.Time { return now })
	resp := c.verdicts(src, events, claims, now, reconcile, tally, nil)
	return resp, tally.Hourly.Take(), tally.Copies.Take()
}

// verified is what verification said of an envelope it did not refuse.
type verified int

const (
	authentic verified = iota // verified, or the transport vouched for it
	aged                      // a queued message whose signature matched, signed outside the tolerance
	discarded                 // failed, on a source that discards those
)

// events is steps 2 and 3 of Accept, for a source in hand: the
// transport has read the body (step 1).
func (c *Core) events(ctx context.Context, src *Source, env Envelope) (_ []store.NewEvent, now time.Time, _ verified, _ *Rejection) {
	name := src.Name
	now = env.ReceivedAt
	if now.IsZero() {
		now = c.now()
	}
	method := env.Method
	if method == "" {
		method = http.MethodPost
	}
	u := env.URL
	if u == nil {
		u = &url.URL{}
	}
	preq := &provider.Request{Method: method, URL: u, Header: env.Header, Body: env.Body, PathToken: env.PathToken}
	if int64(len(env.Body)) > c.maxBody {
		// HTTP reads no more than this; a queue's message may be larger
		// than the broker's own limit is here, and a publish too.
		return nil, now, authentic, c.rejected(ctx, name, env.Client, rejection(http.StatusRequestEntityTooLarge, ReasonTooLarge, "body exceeds the size limit"))
	}

	// 2. Authenticity, before anything in the body is trusted or parsed.
	verdict, rej := c.verify(ctx, src, env, preq, now)
	if rej != nil || verdict == discarded {
		return nil, now, verdict, rej
	}

	// 3. Split into events and take each one's key.
	// A preset that builds its items counts them against this before
	// building each (413 below), rather than being checked once they all
	// are in memory: a 640 KB WhatsApp batch grew the process by 270 MB.
	body := env.Body
	preq.MaxItemBytes = maxExpansion*int64(len(body)) + expansionSlack
	items, err := src.Preset.Items(preq)
	if err != nil {
		var rej *Rejection
		switch {
		case errors.Is(err, provider.ErrTooLarge):
			rej = rejection(http.StatusRequestEntityTooLarge, ReasonTooLarge,
				"the batch's events would hold over 4 times the request's "+strconv.Itoa(len(body))+" bytes (+64 KiB)")
		case errors.Is(err, provider.ErrMalformed):
			rej = rejection(http.StatusBadRequest, ReasonMalformed, err.Error())
		default:
			rej = rejection(http.StatusBadRequest, ReasonMalformed, "could not read the events")
		}
		return nil, now, verdict, c.rejected(ctx, name, env.Client, rej)
	}
	if env.Key != "" {
		if len(items) != 1 {
			return nil, now, verdict, c.rejected(ctx, name, env.Client, rejection(http.StatusBadRequest, ReasonMalformed,
				"a key given with the body names one event; this body is "+strconv.Itoa(len(items))))
		}
		items[0].Key = env.Key
	}
	// What the split produced is held in memory too, until the answer, and
	// stored: it is bounded, and counted against the transport's budget.
	if split := splitBytes(body, items); split > 0 {
		if split > maxExpansion*int64(len(body))+expansionSlack {
			return nil, now, verdict, c.rejected(ctx, name, env.Client, rejection(http.StatusRequestEntityTooLarge, ReasonTooLarge,
				"the batch's "+strconv.Itoa(len(items))+" events would hold "+strconv.FormatInt(split, 10)+
					" bytes, over 4 times the request's "+strconv.Itoa(len(body))+" (+64 KiB)"))
		}
		if env.Reserve != nil {
			if err := env.Reserve(ctx, split); err != nil {
				var rej *Rejection
				if !errors.As(err, &rej) {
					rej = rejection(http.StatusServiceUnavailable, ReasonOverloaded, "too many request bytes in flight; retry later")
				}
				return nil, now, verdict, c.rejected(ctx, name, env.Client, rej)
			}
		}
	}
	given := env.Header.Get("Content-Type")
	if src.traits.ContentType != nil {
		given = src.traits.ContentType(preq)
	}
	// It is stored and sent back out with every delivery: one that no
	// store or destination would take (an HTTP request cannot carry a
	// line break or a control byte in it, but a queue's message or an
	// outbox publish can) is left out, and the event taken without it.
	contentType, leftOut := contentTypeOf(given, body)
	if leftOut {
		c.log.Info("Content-Type left out: over 256 bytes, not UTF-8, or holding a control character", "source", name,
			"content_type", strconv.QuoteToASCII(bounded(given)), "stored", contentType, "client", env.Client)
	}
	traceparent := traceOf(env.Trace)
	if traceparent == "" {
		traceparent = tracing.Inject(ctx) // "" when not traced
	}
	events, keyless, over := newEvents(src, items, env.Header, preq.URL, contentType, traceparent, now)
	if over > 0 {
		// Not refused: stored, filtered for the routes that read the body
		// (each event says which), and an operator can send it to them.
		c.metrics.FilterOverBudget(name, over)
		c.log.Warn("the filters on the body cost more than the request's budget: their routes passed over these events",
			"source", name, "events", over, "of", len(items), "body_bytes", len(body), "client", env.Client)
	}
	if keyless >= 0 {
		detail := "no event key found in the request"
		if len(items) > 1 {
			// A batch is answered whole: say which of its events has no
			// key, and that the others were refused with it (a WhatsApp
			// account_update beside the messages of one POST).
			detail = "event " + strconv.Itoa(keyless+1) + " of the batch's " + strconv.Itoa(len(items))
			if typ := items[keyless].Type; typ != "" {
				detail += " (" + typ + ")"
			}
			detail += " has no key, and this source rejects events without one (on_missing_key: reject): the whole batch is refused"
		}
		return nil, now, verdict, c.rejected(ctx, name, env.Client, rejection(http.StatusUnprocessableEntity, ReasonMissingKey, detail))
	}
	return events, now, verdict, nil
}

// verify is step 2: env's signature, checked by its source's preset
// (unless the transport vouched for it). A queued message's signature is
// as old as when its broker took it (Enqueued), not as when it was
// consumed; one that matches but was signed outside the tolerance even so
// (a relay that held it, a provider's or broker's clock astray, a replay
// by someone the broker lets publish, which the key's window still
// answers as a duplicate) is taken as aged: nobody will sign it again,
// and refusing it would lose it for its age alone.
func (c *Core) verify(ctx context.Context, src *Source, env Envelope, preq *provider.Request, now time.Time) (verified, *Rejection) {
	if env.SkipVerify {
		return authentic, nil
	}
	at := now
	if env.Queued && !env.Enqueued.IsZero() {
		at = env.Enqueued
	}
	err := src.Preset.Verify(preq, at)
	switch {
	case err == nil:
		return authentic, nil
	case env.Queued && errors.Is(err, provider.ErrSignatureAge):
		clock := "the broker's"
		if env.Enqueued.IsZero() {
			clock = "oncehook's (the broker gave none)"
		}
		c.log.Warn("message taken with a signature outside the tolerance: its signature matches", "source", src.Name,
			"detail", bounded(err.Error()), "measured_against", clock, "client", env.Client)
		return aged, nil
	case src.DiscardUnauthorized:
		c.count(ctx, src.Name, ReasonDiscarded)
		c.log.Info("request discarded", "source", src.Name, "reason", ReasonSignature, "detail", bounded(err.Error()), "client", env.Client)
		return discarded, nil
	}
	return authentic, c.rejected(ctx, src.Name, env.Client, rejection(http.StatusUnauthorized, ReasonSignature, err.Error()))
}

// verdicts turns claims into the answer, and counts each event's verdict
// and the request's outcome in m: the gateway's metrics (Prometheus, and
// the rollups its writer commits), or the outbox's tally (the rollups
// only, committed in the caller's transaction). One place, so that a
// duplicate is counted the same wherever it arrived. onDup, when set,
// hears each duplicate. Under reconcile, a stored key is republished
// instead: answered and counted so, neither a copy on its event's page nor
// a sample for the key doctor, which both look for a provider's resends.
func (c *Core) verdicts(src *Source, events []store.NewEvent, claims []store.Claim, now time.Time, reconcile bool, m *metrics.Metrics, onDup func(source, key string, body []byte)) Response {
	name := src.Name
	again := StatusDuplicate
	if reconcile {
		again = StatusRepublished
	}
	resp := Response{Status: again, Events: make([]EventResult, len(events))}
	if len(events) == 0 {
		resp.Status = StatusAccepted // a batch with no updates: nothing to store, nothing to retry
	}
	for i, claim := range claims {
		res := EventResult{Key: events[i].Key, Status: StatusAccepted, Keyless: events[i].Keyless}
		verdict := StatusAccepted
		switch {
		case claim.Duplicate && reconcile:
			res.Status, verdict = StatusRepublished, StatusRepublished
		case claim.Duplicate:
			res.Status, verdict = StatusDuplicate, StatusDuplicate
			m.Copy(name, events[i].Key, now)
			if onDup != nil {
				onDup(name, events[i].Key, events[i].Body)
			}
		case events[i].Keyless:
			verdict = metrics.Keyless
		}
		if !claim.Duplicate {
			resp.Status = StatusAccepted
			m.Stored(name, events[i].Type)
			if src.Order != nil && events[i].Order.Entity == "" {
				m.Unordered(name)
			}
			if len(events[i].Destinations) == 0 && len(events[i].Filtered) > 0 {
				m.Filtered(name)
			}
		}
		m.Event(name, verdict)
		resp.Events[i] = res
	}
	m.Request(name, resp.Status)
	return resp
}

// Refuse is a rejection a transport decides before Accept or Events can
// (a caller's Idempotency-Key that no rule would read): counted under
// source by reason and logged, as Accept counts and logs its own, so
// that every refusal of every transport is counted once, the same way.
// Admit takes one request of source's from its tenant's rate (Source's
// Limit), before its body is read: nil when it may go on, or the 429 to
// answer, counted (not logged: a flood past the rate would fill the log).
// POST /v1/publish asks it; intake over HTTP does by itself.
func (c *Core) Admit(ctx context.Context, source string) *Rejection {
	src, ok := c.sources.Load().byName[source]
	if !ok {
		return nil // Accept answers it
	}
	return c.admit(ctx, src)
}

func (c *Core) admit(ctx context.Context, src *Source) *Rejection {
	if src.Limit == nil || src.Limit.Allow() {
		return nil
	}
	rej := rateLimited(src.Limit)
	c.count(ctx, src.Name, rej.Reason)
	return rej
}

func (c *Core) Refuse(ctx context.Context, source, client string, status int, reason, detail string) *Rejection {
	return c.rejected(ctx, source, client, rejection(status, reason, detail))
}

// rejected counts and logs a rejection, says it on the span, and returns it.
func (c *Core) rejected(ctx context.Context, source, client string, rej *Rejection) *Rejection {
	c.count(ctx, source, rej.Reason)
	if c.tracer != nil && rej.Status >= 500 {
		trace.SpanFromContext(ctx).SetStatus(codes.Error, rej.Reason)
	}
	c.log.Info("request rejected", "source", source, "status", rej.Status, "reason", rej.Reason,
		"detail", rej.Detail, "client", client)
	return rej
}
