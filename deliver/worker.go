// Package deliver hands stored events to their destinations: it takes the
// deliveries the gateway's writer leases to it, POSTs each one with the
// event's key as Idempotency-Key, and hands the outcome (delivered, retry at
// a later time, or dead letter) back to the writer, which commits it with
// its next transaction. A worker that dies leaves leases behind that expire,
// so another worker (or the same one restarted) takes the deliveries over:
// everything stored is delivered at least once, and the key lets the
// destination make it exactly once.
//
// The worker never writes on its own: on SQLite's single writer, a lease
// transaction and an outcome transaction per batch each paid a commit, and
// queued with intake's. The writer carries them in its own commits instead
// (see internal/groupcommit), and hands a new event's deliveries over in
// memory, with the body, at the commit that stores it.
package deliver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncehook/oncehook/internal/lease"
	"github.com/oncehook/oncehook/internal/metrics"
	"github.com/oncehook/oncehook/internal/redact"
	"github.com/oncehook/oncehook/internal/tracing"
	"github.com/oncehook/oncehook/internal/transform"
	"github.com/oncehook/oncehook/store"
)

// Destination is where a delivery goes.
type Destination struct {
	Name    string
	URL     string
	Timeout time.Duration
	// SigningKey, when set, signs each delivery the Standard Webhooks way
	// (webhook-id, webhook-timestamp, webhook-signature).
	SigningKey []byte
	Headers    map[string]string
	Retry      RetryPolicy
	// NoTraceparent sends no W3C traceparent when deliveries are traced
	// (by default each attempt's span travels, for the destination to
	// continue the trace).
	NoTraceparent bool
	// Sender is the destination's kind: a queue's publisher. Nil: an HTTP
	// POST to URL (signed with SigningKey), over Client.
	Sender Sender
	// Client is what an HTTP POST goes over; nil: the worker's. A
	// tenant's destination has one whose dials reach public addresses
	// only (internal/egress).
	Client *http.Client
	// Transform, when set, reshapes each attempt's message just before it
	// is sent (or skips the event for this destination): see
	// internal/transform. Its failure is the event's, never the
	// destination's: a dead letter with the script's error and line, and
	// nothing the breaker counts.
	Transform *transform.Script
	// OwnLease says the Sender passes the worker's lease on before it
	// ends (a pull destination hands it to its consumer, in the store,
	// under the store's fence): an attempt is bounded by the destination's
	// timeout alone, not by the worker's lease, which is sized for the
	// other destinations.
	OwnLease bool

	// Statuses are its retry_on and final_on (nil: the default table),
	// applied to every answer with an HTTP status: a POST's, and a pull
	// consumer's ack.
	Statuses *StatusRules
	// DeliveryControl honours the receiver's webhook-delivery header
	// (standard_webhooks_abort): "abort-message" makes a failed attempt
	// final (a dead letter, no more retries), "disable" pauses the
	// destination (Options.Disable), as an operator would.
	DeliveryControl bool

	// secrets are what its URL and headers carry that an answer quoting
	// them must not show (SetDestinations reads them).
	secrets *redact.Secrets
}

// Writer is where a worker's outcomes go and where it gets deliveries: the
// gateway's group committer. Outcomes are committed with the writer's next
// transaction; WantDue asks it to lease deliveries that are due in the
// store, as far as the worker has room (see Worker.Reserve).
type Writer interface {
	Complete(outcomes ...store.Outcome)
	WantDue()
}

// Options configure a Worker.
type Options struct {
	// Writer commits outcomes and leases deliveries (required).
	Writer       Writer
	Destinations []Destination
	// Concurrency is how many attempts run at once (DefaultConcurrency
	// when unset).
	Concurrency int
	// Lease is how long a worker owns a leased delivery.
	Lease time.Duration
	// ShutdownGrace is how long in-flight attempts may finish after Run's
	// context ends; attempts still running then are cut and their leases
	// released. Default: the lease.
	ShutdownGrace time.Duration
	Logger        *slog.Logger
	Metrics       *metrics.Metrics
	// IdlePoll is the longest an idle worker sleeps without looking at the
	// store (default 5s): commits in this process wake it at once, but a
	// replay made by another process (oncehook replay) is found this way.
	IdlePoll time.Duration
	// Held, when set, names the destinations whose deliveries wait now
	// (internal/hold decides): the worker does not wait on them (the
	// writer does not lease them).
	Held func() []string
	// Gate, when set, admits each attempt first (a rate limit, a breaker:
	// internal/hold decides) and hears how it ended. A delivery it does
	// not admit is given back, no attempt spent, due when it says.
	Gate Gate
	// Unconfigured, when set, is told the destination of a leased delivery
	// that is not among Destinations (removed from the config while it
	// had deliveries pending), and must hold it from then on: Held names
	// it until it is configured again. Without it, such a delivery is
	// given back due in a minute.
	Unconfigured func(destination string)
	// Disable, when set, pauses a destination whose receiver asked for it
	// (webhook-delivery: disable, on a destination with DeliveryControl),
	// as an operator's pause does, audited; why says so.
	Disable func(ctx context.Context, destination, why string) error
	// Tracer, when set, traces each attempt (a client span, the child of
	// the intake span the event was stored under) and sends its
	// traceparent with the delivery.
	Tracer trace.Tracer
	// Now and Jitter are injected so tests can control time and randomness.
	Now    func() time.Time
	Jitter func(n int64) int64
	Client *http.Client
}

// Worker delivers events. Create it with New, attach it to its Writer as
// the receiver of leased deliveries, start it with Run, and wake it with
// Notify when another process may have made deliveries due (a NOTIFY, a
// replay).
type Worker struct {
	store  store.Store
	writer Writer
	dests  atomic.Pointer[map[string]*Destination] // SetDestinations swaps them
	opts   Options
	client *http.Client
	log    *slog.Logger
	wake   chan struct{}

	// room is how many more deliveries the worker can take: concurrency
	// less attempts running and room the writer reserved for a commit in
	// flight.
	room     atomic.Int64
	inflight countingGroup

	// Attempts run under a context of their own, so that a shutdown lets
	// them finish; it is cut only when the grace period is over.
	attemptCtx  context.Context
	cutAttempts context.CancelFunc
	// An attempt waiting for its send slot (Gate.Admit) stops waiting as
	// soon as a shutdown begins: its delivery goes back, no attempt spent,
	// and the shutdown does not wait out a slow rate's slots.
	waitCtx   context.Context
	stopWaits context.CancelFunc

	// next hands a delivery to an idle runner (see runner); done ends
	// them, once Run has returned.
	next chan store.LeasedDelivery
	done chan struct{}

	mu       sync.Mutex
	stopping bool // Reserve gives no more room
	stopped  bool // Run has returned: what is handed now goes straight back

	// dropped are the (destination, header) pairs a transformation set
	// and was not let send, already logged: once each, at most
	// maxDroppedLogged of them.
	dropped      sync.Map
	droppedCount atomic.Int32
}

// maxDroppedLogged bounds the headers a transformation dropped that the
// worker logs (a script may set a new Nats-* name per event).
const maxDroppedLogged = 256

// countingGroup counts attempts running. Unlike a WaitGroup, it may grow
// again from zero while someone waits (the writer hands deliveries over
// while Run drains).
type countingGroup struct {
	mu   sync.Mutex
	n    int
	zero sync.Cond
}

func (g *countingGroup) Add(n int) {
	g.mu.Lock()
	g.n += n
	g.mu.Unlock()
}

func (g *countingGroup) Done() {
	g.mu.Lock()
	g.n--
	if g.n == 0 && g.zero.L != nil {
		g.zero.Broadcast()
	}
	g.mu.Unlock()
}

// Wait returns once nothing is running.
func (g *countingGroup) Wait() {
	g.mu.Lock()
	if g.zero.L == nil {
		g.zero.L = &g.mu
	}
	for g.n > 0 {
		g.zero.Wait()
	}
	g.mu.Unlock()
}

func (g *countingGroup) Load() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n
}

// NewTransport is the transport of the worker's client, sized for
// concurrency attempts at once (0: DefaultConcurrency); it honours the
// environment's HTTP_PROXY, HTTPS_PROXY and NO_PROXY.
func NewTransport(concurrency int) *http.Transport {
	if concurrency <= 0 {
		concurrency = DefaultConcurrency
	}
	return &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		MaxIdleConns:        concurrency * 2,
		MaxIdleConnsPerHost: concurrency,
		IdleConnTimeout:     90 * time.Second,
	}
}

// NewClient is a client for destinations over t: one that follows no
// redirect. A redirect is the destination's misconfiguration, reported
// as a failed attempt rather than the event POSTed elsewhere.
func NewClient(t http.RoundTripper) *http.Client {
	return &http.Client{
		Transport:     t,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// DefaultConcurrency is how many attempts a worker runs at once when its
// options set no number.
const DefaultConcurrency = 64

// New creates a Worker. The store is only read (when is the next delivery
// due); every write goes through opts.Writer.
func New(s store.Store, opts Options) *Worker {
	if opts.Concurrency <= 0 {
		opts.Concurrency = DefaultConcurrency
	}
	if opts.Lease <= 0 {
		var longest time.Duration
		for _, d := range opts.Destinations {
			if !d.OwnLease {
				longest = max(longest, d.Timeout)
			}
		}
		opts.Lease = lease.Default(longest)
	}
	if opts.ShutdownGrace <= 0 {
		opts.ShutdownGrace = opts.Lease
	}
	if opts.IdlePoll <= 0 {
		opts.IdlePoll = 5 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Metrics == nil {
		opts.Metrics = metrics.New()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Jitter == nil {
		opts.Jitter = rand.Int64N
	}
	client := opts.Client
	if client == nil {
		client = NewClient(NewTransport(opts.Concurrency))
	}
	w := &Worker{
		store:  s,
		writer: opts.Writer,
		opts:   opts,
		client: client,
		log:    opts.Logger,
		wake:   make(chan struct{}, 1),
		next:   make(chan store.LeasedDelivery),
		done:   make(chan struct{}),
	}
	w.attemptCtx, w.cutAttempts = context.WithCancel(context.Background())
	w.waitCtx, w.stopWaits = context.WithCancel(w.attemptCtx)
	w.room.Store(int64(opts.Concurrency))
	w.SetDestinations(opts.Destinations)
	return w
}

// SetDestinations replaces the destinations the worker delivers to (a
// config reload): attempts running finish as they started; the next ones
// use these. A delivery whose destination is no longer among them is held
// (see Options.Unconfigured), never dead-lettered: it goes again once the
// destination is configured again.
func (w *Worker) SetDestinations(dests []Destination) {
	m := make(map[string]*Destination, len(dests))
	for i := range dests {
		d := dests[i]
		if d.Sender == nil {
			client := w.client
			if d.Client != nil {
				client = d.Client
			}
			s, err := NewHTTPSender(d.URL, d.SigningKey, client, w.opts.Now)
			if err != nil {
				w.log.Error("destination not usable", "destination", d.Name, "err", err)
				continue
			}
			d.Sender = s
		}
		if u, err := url.Parse(d.URL); err == nil {
			d.secrets = redact.SecretsOf(u, headerOf(d.Headers))
		}
		m[d.Name] = &d
	}
	w.dests.Store(&m)
}

// unconfiguredWait is how long a delivery to a destination that is not
// configured waits when nothing holds the destination.
const unconfiguredWait = time.Minute

// Notify wakes the worker to ask for due deliveries now. It never blocks.
func (w *Worker) Notify() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Reserve reserves room for up to n deliveries, for a commit about to lease
// them, and says how many it reserved. It is how the hand-off stays bounded:
// what the worker has no room for stays in the store, due.
func (w *Worker) Reserve(n int) int {
	w.mu.Lock()
	stopping := w.stopping
	w.mu.Unlock()
	if stopping {
		return 0
	}
	for {
		r := w.room.Load()
		if r <= 0 {
			return 0
		}
		k := min(r, int64(n))
		if w.room.CompareAndSwap(r, r-k) {
			return int(k)
		}
	}
}

// Hand takes the deliveries a commit leased to this worker (they fit in the
// room reserved for them), starts their attempts at once, and gives back the
// room they did not use. After Run has stopped, they are released instead,
// for the next start.
func (w *Worker) Hand(ds []store.LeasedDelivery, reserved int) {
	w.mu.Lock()
	stopped := w.stopped
	if !stopped {
		w.inflight.Add(len(ds))
	}
	w.mu.Unlock()
	if stopped {
		w.release(ds)
	} else {
		for _, d := range ds {
			select {
			case w.next <- d: // an idle runner takes it
			default:
				go w.runner(d)
			}
		}
	}
	if unused := reserved - len(ds); unused > 0 {
		w.room.Add(int64(unused))
	}
}

// runnerIdle is how long a runner waits for another attempt before it
// ends.
const runnerIdle = 2 * time.Second

// runner runs d's attempt, then the attempts Hand gives it while it is
// idle, until none came for runnerIdle or Run has returned. An attempt
// needs a deep stack (the attempt's frames, then the HTTP client's): a
// runner grows its own once, where a goroutine per attempt grew a new
// one every time.
func (w *Worker) runner(d store.LeasedDelivery) {
	w.run(d)
	idle := time.NewTimer(runnerIdle)
	defer idle.Stop()
	for {
		select {
		case d = <-w.next:
			w.run(d)
			idle.Reset(runnerIdle)
		case <-idle.C:
			return
		case <-w.done:
			return
		}
	}
}

// run makes one attempt and hands its outcome to the writer.
func (w *Worker) run(d store.LeasedDelivery) {
	defer w.inflight.Done()
	o := w.attempt(w.attemptCtx, d)
	w.writer.Complete(o)
	w.room.Add(1)
}

// release gives leased deliveries back, unattempted and uncounted, due now.
func (w *Worker) release(ds []store.LeasedDelivery) {
	if len(ds) == 0 {
		return
	}
	now := w.opts.Now()
	out := make([]store.Outcome, len(ds))
	for i, d := range ds {
		out[i] = store.Outcome{DeliveryID: d.ID, LeaseToken: d.LeaseToken, Kind: store.OutcomeReleased, Attempt: d.Attempt, NextAttemptAt: now, Ordered: d.Ordered}
	}
	w.writer.Complete(out...)
}

// Run asks for due deliveries until ctx ends (attempts start as soon as
// the writer hands deliveries over, Run or not), then lets in-flight
// attempts finish (up to ShutdownGrace), hands every outcome to the writer
// and returns; deliveries handed over after that are given back at once.
// Close the writer after Run returns: it commits those last outcomes.
func (w *Worker) Run(ctx context.Context) {
	// At start, and then whenever nothing says otherwise, look at the store
	// (a backlog, another replica's expired leases, a replay made by
	// another process): at the next due time, or every IdlePoll.
	poll := time.NewTimer(0)
	defer poll.Stop()
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-w.wake:
			w.writer.WantDue()
		case <-poll.C:
			w.writer.WantDue()
			poll.Reset(w.nextPoll(ctx))
		}
	}

	w.mu.Lock()
	w.stopping = true
	w.mu.Unlock()
	w.stopWaits()
	grace := time.AfterFunc(w.opts.ShutdownGrace, w.cutAttempts)
	defer grace.Stop()
	for {
		w.inflight.Wait()
		// Nothing is handed over from here on: what comes is given back.
		w.mu.Lock()
		if w.inflight.Load() == 0 {
			if !w.stopped {
				close(w.done) // idle runners end: nothing is handed to them now
			}
			w.stopped = true
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
	}
}

func (w *Worker) held() []string {
	if w.opts.Held == nil {
		return nil
	}
	return w.opts.Held()
}

// nextPoll is how long until the store's next delivery is due, at most
// IdlePoll.
func (w *Worker) nextPoll(ctx context.Context) time.Duration {
	wait := w.opts.IdlePoll
	if next, ok, err := w.store.NextDue(ctx, w.held()); err != nil {
		wait = min(wait, time.Second)
	} else if ok {
		wait = min(wait, max(next.Sub(w.opts.Now()), time.Millisecond))
	}
	return wait
}

// The headers of a stale event delivered anyway (on_stale: deliver): it
// is older than the version the destination already has for its entity,
// which CurrentVersionHeader names as the provider wrote it.
const (
	StaleHeader          = "X-Oncehook-Stale"
	CurrentVersionHeader = "X-Oncehook-Current-Version"
)

// headerSafe is v, or v URL-escaped when it holds a byte a header value
// cannot (a version is the provider's text).
func headerSafe(v string) string {
	if strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f || r >= 0x80 }) {
		return url.QueryEscape(v)
	}
	return v
}

// IdempotencyKey is what every delivery of an event carries: stable across
// attempts and replays, and the same value the provider's key gave.
func IdempotencyKey(source, key string) string { return source + ":" + key }

// DeliveryIDHeader carries the delivery's own id (DeliveryID): one per
// destination of an event, where Idempotency-Key and webhook-id are the
// event's, the same at each of its destinations.
const DeliveryIDHeader = "X-Oncehook-Delivery-Id"

// DeliveryID is the id of the delivery of source's event key to
// destination: stable across its attempts and replays (invariant 8, for
// the delivery), and different for each destination, so an app behind
// several destinations that dedupes on it keeps each delivery once. It is
// derived from the three names rather than the store's row id, which
// starts again on a new database and repeats across gateways: an app that
// keeps the ids it has seen would then take a new delivery for a repeat.
// The three are joined unambiguously (a source name holds no ":", and a
// stored key no NUL).
func DeliveryID(source, key, destination string) string {
	var in [320]byte // most names and keys fit: no allocation but the id
	sum := sha256.Sum256(append(append(append(append(append(in[:0], source...), ':'), key...), 0), destination...))
	var id [4 + 32]byte
	copy(id[:], "dlv_")
	hex.Encode(id[4:], sum[:16])
	return string(id[:])
}

// MessageID is the Standard Webhooks webhook-id of an event's deliveries. It
// is derived from the key (which may contain dots the spec forbids in ids)
// so it too is stable across attempts and replays.
func MessageID(source, key string) string {
	sum := sha256.Sum256([]byte(IdempotencyKey(source, key)))
	return "msg_" + hex.EncodeToString(sum[:16])
}

// Gate admits attempts and counts their outcomes; hold.Holds is one.
type Gate interface {
	// Admit may wait (for a send slot), but not past latest, the last
	// start the attempt's lease leaves room for (zero: no bound).
	Admit(ctx context.Context, destination string, latest time.Time) (bool, time.Time)
	Report(ctx context.Context, destination string, o GateOutcome)
}

// GateOutcome is how an attempt ended, as a Gate's flow control counts it
// (gateOutcome makes it from a Result).
type GateOutcome struct {
	Success bool // 2xx
	// Failure is what a breaker counts: 5xx, 429, a timeout, a connection
	// error. A permanent 4xx is the event's problem, not the destination's:
	// neither a success nor a failure here.
	Failure    bool
	RetryAfter time.Duration // a 429's Retry-After: the whole destination waits that long
	Reason     string
}

// attempt makes one attempt, traced when the worker has a tracer.
func (w *Worker) attempt(ctx context.Context, d store.LeasedDelivery) store.Outcome {
	if w.opts.Tracer == nil {
		return w.try(ctx, d)
	}
	ctx, span := w.opts.Tracer.Start(tracing.Extract(ctx, d.Trace), "deliver "+d.Destination, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(tracing.Source.String(d.Source), tracing.Destination.String(d.Destination),
			tracing.Key.String(IdempotencyKey(d.Source, d.Key)), tracing.Attempt.Int(d.Attempt)))
	o := w.try(ctx, d)
	span.SetAttributes(tracing.Outcome.String(o.Kind.String()))
	if o.StatusCode != 0 {
		span.SetAttributes(attribute.Int("http.response.status_code", o.StatusCode))
	}
	if o.Kind == store.OutcomeRetry || o.Kind == store.OutcomeDead {
		span.SetStatus(codes.Error, o.Error)
	}
	span.End()
	return o
}

func (w *Worker) try(ctx context.Context, d store.LeasedDelivery) store.Outcome {
	start := w.opts.Now()
	out := store.Outcome{DeliveryID: d.ID, LeaseToken: d.LeaseToken, Attempt: d.Attempt, StartedAt: start, Ordered: d.Ordered}
	dest, ok := (*w.dests.Load())[d.Destination]
	if !ok {
		// Removed from the config with deliveries pending: the lease goes
		// back uncounted. The holds hold the destination from now on, so
		// it is due at once when configured again; without them, it waits.
		out.Kind, out.NextAttemptAt = store.OutcomeReleased, start.Add(unconfiguredWait)
		if w.opts.Unconfigured != nil {
			w.opts.Unconfigured(d.Destination)
			out.NextAttemptAt = start
		}
		w.log.Debug("held: the destination is not configured", "source", d.Source, "key", d.Key, "destination", d.Destination)
		return out
	}
	if d.Attempt > dest.Retry.MaxAttempts {
		// The lease counted attempts that never reported: their worker
		// died mid-attempt, or they ran past their lease. They count, or a
		// delivery that crashes its worker would be retried forever.
		out.Kind, out.Attempt = store.OutcomeDead, d.Attempt-1
		out.Error = fmt.Sprintf("gave up after %d attempts (the last never reported an outcome: a worker crashed or an attempt outlived its lease)", d.Attempt-1)
		w.opts.Metrics.Attempt(dest.Name, metrics.Dead)
		w.logAttempt(slog.LevelWarn, d, "dead letter", "reason", out.Error)
		return out
	}
	// An attempt ends before its lease does (less the margin to record it),
	// whatever the destination's timeout: past the lease, another worker may
	// already be delivering the same event.
	timeout := dest.Timeout
	if !d.LeaseExpiresAt.IsZero() && !dest.OwnLease {
		timeout = min(timeout, d.LeaseExpiresAt.Add(-lease.AttemptMargin(w.opts.Lease)).Sub(start))
	}
	if timeout <= 0 {
		out.Kind, out.NextAttemptAt = store.OutcomeReleased, start
		return out
	}
	if w.opts.Gate != nil {
		// The attempt may wait for its send slot as long as the rest of
		// its lease still covers the destination's whole timeout.
		var latest time.Time
		if !d.LeaseExpiresAt.IsZero() {
			latest = d.LeaseExpiresAt.Add(-lease.AttemptMargin(w.opts.Lease) - dest.Timeout)
			if dest.OwnLease {
				latest = d.LeaseExpiresAt.Add(-lease.AttemptMargin(w.opts.Lease))
			}
		}
		waitCtx, stop := w.admitting(ctx)
		ok, at := w.opts.Gate.Admit(waitCtx, dest.Name, latest)
		stop()
		if !ok {
			// Held (its rate's slots are taken, its breaker is open): the
			// lease goes back uncounted, due when the hold ends.
			out.Kind, out.NextAttemptAt = store.OutcomeReleased, at
			return out
		}
		if !d.LeaseExpiresAt.IsZero() && !dest.OwnLease {
			timeout = min(dest.Timeout, d.LeaseExpiresAt.Add(-lease.AttemptMargin(w.opts.Lease)).Sub(w.opts.Now()))
		}
	}
	msg := w.message(ctx, dest, d)
	if dest.Transform != nil {
		if done := w.transform(ctx, dest, d, msg, &out); done {
			if w.opts.Gate != nil {
				// Admitted, and nothing sent: the destination's breaker counts neither.
				w.opts.Gate.Report(ctx, dest.Name, GateOutcome{})
			}
			out.Duration = w.opts.Now().Sub(start)
			return out
		}
	}
	msg.StoreID, msg.LeaseToken = d.ID, d.LeaseToken
	sendCtx, cancel := context.WithTimeout(ctx, timeout)
	res := dest.Sender.Send(sendCtx, msg)
	timedOut := res.Kind == Retry && errors.Is(sendCtx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
	cancel()
	if res.Kind != Delivered && ctx.Err() != nil {
		// Shutdown cut the attempt: give the lease back, uncounted, due now.
		res.Kind = Released
	}
	if timedOut {
		res.Error = fmt.Sprintf("timed out after %s", timeout)
	}
	dest.Statuses.Apply(&res)
	if dest.DeliveryControl && res.Control != "" && res.Kind != Released {
		w.control(ctx, dest, &res)
	}
	return w.settle(ctx, dest, d, msg, res, out)
}

// Record records the outcome of d's attempt that a consumer acked
// through this gateway where another one handed it out (a pull
// destination's, its lease in the store under res.LeaseToken): the same
// outcome, retry policy and breaker count as the attempts this worker
// makes. The store records it only while that lease still holds.
//
// It returns the result's kind as the destination's retry_on and final_on
// make it (what the consumer is answered), and false when the destination
// is no longer configured here (its lease then expires, and it is held).
func (w *Worker) Record(ctx context.Context, d store.LeasedDelivery, started time.Time, res Result) (ResultKind, bool) {
	dest, ok := (*w.dests.Load())[d.Destination]
	if !ok {
		return res.Kind, false
	}
	dest.Statuses.Apply(&res)
	out := store.Outcome{DeliveryID: d.ID, LeaseToken: d.LeaseToken, Attempt: d.Attempt, StartedAt: started, Ordered: d.Ordered}
	w.writer.Complete(w.settle(ctx, dest, d, &Message{Header: http.Header{}}, res, out))
	return res.Kind, true
}

// settle is the outcome of d's attempt that ended with res: what the
// destination said, made fit to store, classified under its retry
// policy, counted and reported to the gate. An attempt that ended under
// another lease than the worker took (a pull consumer's) is recorded
// under that one.
func (w *Worker) settle(ctx context.Context, dest *Destination, d store.LeasedDelivery, msg *Message, res Result, out store.Outcome) store.Outcome {
	if res.LeaseToken != "" {
		out.LeaseToken = res.LeaseToken
	}
	start := out.StartedAt
	// One place makes what any destination sent back fit to store and show:
	// without the secrets it was sent with, which an answer may quote
	// (an API that says which URL it refused), then cut to size.
	res.Response, res.Error = hideSecrets(dest, msg, res.Response), hideSecrets(dest, msg, res.Error)
	res.Response, res.Error = storable(res.Response, responseSnippet), storable(res.Error, 1024)
	if w.opts.Gate != nil {
		defer func() { w.opts.Gate.Report(ctx, dest.Name, gateOutcome(res)) }()
	}
	end := w.opts.Now()
	out.Duration = end.Sub(start)
	out.StatusCode, out.Response = res.Status, res.Response
	switch res.Kind {
	case Released:
		out.Kind = store.OutcomeReleased
		out.NextAttemptAt = end
		return out
	case Delivered:
		out.Kind = store.OutcomeDelivered
		w.opts.Metrics.Latency(dest.Name, end.Sub(d.ReceivedAt))
	case Permanent:
		out.Kind, out.Error = store.OutcomeDead, res.Error
	default:
		out.Error = res.Error
		if d.Attempt >= dest.Retry.MaxAttempts {
			out.Kind = store.OutcomeDead
			out.Error = fmt.Sprintf("gave up after %d attempts: %s", d.Attempt, out.Error)
			break
		}
		out.Kind = store.OutcomeRetry
		delay := dest.Retry.Backoff(d.Attempt, w.opts.Jitter)
		if res.After >= 0 {
			// Retry-After is honoured, within the destination's own bounds:
			// a day-long Retry-After does not park a delivery past max_delay.
			delay = min(max(res.After, dest.Retry.BaseDelay), dest.Retry.MaxDelay)
		}
		out.NextAttemptAt = w.opts.Now().Add(delay)
		w.logAttempt(slog.LevelInfo, d, "delivery failed; will retry", "status", res.Status, "err", out.Error, "retry_in", delay.Round(time.Millisecond))
	}
	switch out.Kind {
	case store.OutcomeDelivered:
		w.opts.Metrics.Attempt(dest.Name, metrics.Delivered)
		if w.log.Enabled(context.Background(), slog.LevelDebug) { // or the duration is boxed for nothing, every delivery
			w.logAttempt(slog.LevelDebug, d, "delivered", "status", res.Status, "duration", out.Duration)
		}
	case store.OutcomeDead:
		w.opts.Metrics.Attempt(dest.Name, metrics.Dead)
		w.logAttempt(slog.LevelWarn, d, "dead letter", "status", res.Status, "reason", out.Error)
	case store.OutcomeRetry:
		w.opts.Metrics.Attempt(dest.Name, metrics.Retry)
	}
	return out
}

// control honours the receiver's webhook-delivery header (Standard
// Webhooks, as Svix does): abort-message ends a failed delivery here, a
// dead letter (a delivered one stays delivered); disable pauses the
// destination, audited, its deliveries held until an operator resumes it,
// this one too (it is retried, then waits under the pause).
func (w *Worker) control(ctx context.Context, dest *Destination, res *Result) {
	switch strings.ToLower(strings.TrimSpace(res.Control)) {
	case "abort-message":
		if res.Kind == Retry {
			res.Kind = Permanent
			res.Error = withReason(res.Error, fmt.Sprintf("aborted by the receiver (webhook-delivery: abort-message, HTTP %d)", res.Status), res.Status)
		}
	case "disable":
		if w.opts.Disable == nil {
			return
		}
		why := fmt.Sprintf("the receiver answered webhook-delivery: disable (HTTP %d)", res.Status)
		if err := w.opts.Disable(ctx, dest.Name, why); err != nil {
			w.log.Error("destination not paused as its receiver asked", "destination", dest.Name, "err", err)
			return
		}
		w.log.Warn("destination paused: "+why, "destination", dest.Name)
	}
}

// admitting is the context an attempt under ctx waits for its send slot
// in: ctx, ended too when a shutdown begins (waitCtx). An untraced
// attempt runs under attemptCtx itself, which waitCtx is a child of:
// then waitCtx is that context already, and nothing is made per attempt.
func (w *Worker) admitting(ctx context.Context) (context.Context, func()) {
	if ctx == w.attemptCtx {
		return w.waitCtx, func() {}
	}
	waitCtx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(w.waitCtx, cancel)
	return waitCtx, func() { stop(); cancel() }
}

// transform runs the destination's transformation on msg, in place. It
// reports done when the attempt ends here: skipped by the script (the
// delivery is done, recorded as skipped), failed in it (the event's
// problem, whatever the attempt: a dead letter with the script's error and
// line), or cut by shutdown (released). out gets the digests of the
// script's version and of what is sent, recorded with the attempt.
func (w *Worker) transform(ctx context.Context, dest *Destination, d store.LeasedDelivery, msg *Message, out *store.Outcome) (done bool) {
	out.ScriptDigest = dest.Transform.Digest()
	res, err := Transform(ctx, dest, msg)
	var se *transform.Error
	switch {
	case errors.As(err, &se):
		out.Kind, out.Error = store.OutcomeDead, storable("transformation: "+se.Error(), 1024)
		w.opts.Metrics.Attempt(dest.Name, metrics.Dead)
		w.logAttempt(slog.LevelWarn, d, "dead letter: the transformation failed", "reason", out.Error)
		return true
	case err != nil && ctx.Err() != nil:
		out.Kind, out.NextAttemptAt = store.OutcomeReleased, w.opts.Now()
		return true
	case err != nil:
		// The sandbox itself could not run (no runtime could be made): the
		// gateway's problem, not the event's; tried again later.
		out.Error = storable("transformation: "+err.Error(), 1024)
		out.Kind, out.NextAttemptAt = store.OutcomeRetry, w.opts.Now().Add(dest.Retry.Backoff(d.Attempt, w.opts.Jitter))
		counted := metrics.Retry
		if d.Attempt >= dest.Retry.MaxAttempts {
			out.Kind, out.Error = store.OutcomeDead, fmt.Sprintf("gave up after %d attempts: %s", d.Attempt, out.Error)
			counted = metrics.Dead
		}
		w.opts.Metrics.Attempt(dest.Name, counted)
		w.logAttempt(slog.LevelError, d, "the transformation could not run", "err", err)
		return true
	}
	if res.Skip {
		// Nothing is sent: the attempt records the script's version, and
		// no digest of a request that never left.
		out.Kind, out.Error = store.OutcomeSkipped, "skipped by the transformation"
		w.opts.Metrics.Attempt(dest.Name, metrics.Skipped)
		w.logAttempt(slog.LevelDebug, d, "skipped by the transformation")
		return true
	}
	out.SentDigest = res.Digest()
	for _, h := range res.Dropped {
		w.droppedHeader(dest.Name, h)
	}
	return false
}

// droppedHeader logs, once, that dest's transformation set a header that
// is not its to set: the event was sent without it.
func (w *Worker) droppedHeader(dest string, h transform.Dropped) {
	if w.droppedCount.Load() >= maxDroppedLogged {
		return
	}
	if _, seen := w.dropped.LoadOrStore(dest+"\x00"+h.Header, true); seen {
		return
	}
	w.droppedCount.Add(1)
	w.log.Warn("the transformation sets a header that is not its to set: events are sent without its value (once per destination and header)",
		"destination", dest, "header", h.Header, "why", h.Why)
}

// Transform runs dest's transformation on m and, unless the script skipped
// the event (Output.Skip), makes m what it asked to send: headers, body,
// content type, path and query. The error is a *transform.Error when the
// script failed or went past a bound (the event's problem).
func Transform(ctx context.Context, dest *Destination, m *Message) (*transform.Output, error) {
	var u *url.URL
	if dest.URL != "" {
		u, _ = url.Parse(dest.URL) // validated with the config
	}
	res, err := dest.Transform.Run(ctx, transform.Request{URL: u, Header: m.Header, ContentType: m.ContentType, Body: m.Body},
		transform.Event{Source: m.Source, Key: m.Key, Type: m.Type, Destination: m.Destination, Attempt: m.Attempt, ReceivedAt: m.ReceivedAt})
	if err != nil || res.Skip {
		return res, err
	}
	m.Header, m.Body, m.ContentType, m.Path, m.Query = res.Header, res.Body, res.ContentType, res.Path, res.Query
	return res, nil
}

// gateOutcome is how flow control counts an attempt: delivered a success;
// what is retried (5xx, 429, a timeout, a connection error, a broker that
// nacked or is gone) a failure; a permanent answer or a shutdown neither.
func gateOutcome(res Result) GateOutcome {
	var o GateOutcome
	switch res.Kind {
	case Delivered:
		o.Success = true
	case Retry:
		o.Failure, o.Reason = true, res.Error
		if res.Status == http.StatusTooManyRequests && res.After > 0 {
			o.RetryAfter = res.After
		}
	}
	return o
}

// logAttempt logs about one attempt with its identity. It builds nothing
// when the level is off: a success is logged at debug, on the hot path.
func (w *Worker) logAttempt(level slog.Level, d store.LeasedDelivery, msg string, args ...any) {
	if !w.log.Enabled(context.Background(), level) {
		return
	}
	w.log.Log(context.Background(), level, msg, append([]any{"source", d.Source, "key", d.Key,
		"destination", d.Destination, "attempt", d.Attempt}, args...)...)
}

// storable makes text a destination sent back (its answer, a Location, an
// error that quotes either) fit to store and show: cut to at most limit
// bytes at a character's boundary, invalid UTF-8 and NUL (which no
// PostgreSQL text column holds) replaced by U+FFFD. It is the one place
// for both backends: one destination's bytes must never make the store
// refuse its outcome (invariant 13).
func storable(s string, limit int) string {
	cut := ""
	if len(s) > limit {
		s, cut = s[:limit], "…"
		// Drop a character the cut split in two, rather than replace it.
		for i := 0; i < utf8.UTFMax && len(s) > 0; i++ {
			if r, size := utf8.DecodeLastRuneInString(s); r != utf8.RuneError || size != 1 {
				break
			}
			s = s[:len(s)-1]
		}
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	}
	return s + cut
}

// hideSecrets masks in text what dest's URL and headers carry that
// redact.URL and redact.Header hide, and what msg carried besides, when a
// transformation set its query or headers, with the values of its env.
func hideSecrets(dest *Destination, msg *Message, text string) string {
	if text == "" {
		return text
	}
	text = dest.secrets.Hide(text)
	if dest.Transform != nil {
		if u, err := url.Parse(dest.URL); err == nil {
			text = redact.SecretsOf(TargetURL(u, msg), msg.Header).Hide(text)
		}
		// Its env's values, wherever the script put them (a header
		// that is not a credential's by name, the body).
		text = dest.Transform.Hide(text)
	}
	return text
}

// headerOf is a destination's headers as an http.Header's map.
func headerOf(h map[string]string) map[string][]string {
	out := make(map[string][]string, len(h))
	for k, v := range h {
		out[k] = []string{v}
	}
	return out
}

// responseSnippet is how much of a destination's answer is kept with the
// attempt, for the operator.
const responseSnippet = 256

// message is what an attempt of d sends to dest: the event and what
// travels with it, whatever the destination's kind.
func (w *Worker) message(ctx context.Context, dest *Destination, d store.LeasedDelivery) *Message {
	m := NewMessage(dest, d)
	if w.opts.Tracer != nil && !dest.NoTraceparent {
		// The attempt's span: the destination continues the trace.
		tracing.Propagator.Inject(ctx, propagation.HeaderCarrier(m.Header))
	}
	return m
}

// NewMessage is what an attempt of d sends to dest, as the worker builds it
// (less the traceparent of a traced attempt, which the worker adds):
// `oncehook transform test` shows what a transformation makes of it.
func NewMessage(dest *Destination, d store.LeasedDelivery) *Message {
	m := &Message{
		Source: d.Source, Key: d.Key, Type: d.Type, Destination: d.Destination, Attempt: d.Attempt,
		IdempotencyKey: IdempotencyKey(d.Source, d.Key), ContentType: d.ContentType, Body: d.Body,
		ReceivedAt: d.ReceivedAt, Entity: d.Entity,
		Header: make(http.Header, len(d.Header)+len(dest.Headers)+7),
	}
	h := m.Header
	for k, v := range d.Header { // the provider's routing headers, as received
		h[k] = v
	}
	for k, v := range dest.Headers {
		h.Set(k, v)
	}
	// oncehook's own, as Set would put them (their names are canonical),
	// their values in one array rather than one each.
	own := ownHeaders{h: h, vals: make([]string, 0, 7)}
	own.set("Idempotency-Key", m.IdempotencyKey)
	own.set(DeliveryIDHeader, DeliveryID(d.Source, d.Key, d.Destination))
	own.set("X-Oncehook-Source", d.Source)
	if d.Type != "" {
		own.set("X-Oncehook-Type", headerSafe(d.Type))
	}
	own.set("X-Oncehook-Attempt", strconv.Itoa(d.Attempt))
	if d.Stale {
		// Older than what this destination already has for the entity:
		// sent because the source asks for stale events (on_stale:
		// deliver), so the destination can tell.
		own.set(StaleHeader, "true")
		own.set(CurrentVersionHeader, headerSafe(d.CurrentVersion))
	}
	return m
}

// ownHeaders sets headers under canonical names, each value a slice of
// one shared array: one allocation for all of them. Each slice's
// capacity is its length, so that appending to one (Header.Add) copies
// it rather than writing over the next.
type ownHeaders struct {
	h    http.Header
	vals []string
}

func (o *ownHeaders) set(canonical, v string) {
	o.vals = append(o.vals, v)
	n := len(o.vals)
	o.h[canonical] = o.vals[n-1 : n : n]
}
