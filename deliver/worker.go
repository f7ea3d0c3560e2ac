// Package deliver hands stored events to their destinations: it leases due
// deliveries from the store, POSTs each one with the event's key as
// Idempotency-Key, and writes back the outcome (delivered, retry at a later
// time, or dead letter). A worker that dies leaves leases behind that expire,
// so another worker (or the same one restarted) takes the deliveries over:
// everything stored is delivered at least once, and the key lets the
// destination make it exactly once.
package deliver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/oncehook/oncehook/internal/metrics"
	"github.com/oncehook/oncehook/provider"
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
}

// LeaseMargin is how long before its lease expires an attempt is cut, at
// most: the outcome must be written while the lease still holds, or another
// worker takes the delivery over and delivers it a second time, at once.
const LeaseMargin = 5 * time.Second

// AttemptMargin is the margin for a lease of the given length: LeaseMargin,
// or a fifth of a short lease. A lease must be at least the longest
// destination timeout plus this margin (the config checks it); an attempt
// is bounded by both.
func AttemptMargin(lease time.Duration) time.Duration { return min(LeaseMargin, lease/5) }

// Options configure a Worker.
type Options struct {
	Destinations []Destination
	// Concurrency is how many attempts run at once.
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
	// Now and Jitter are injected so tests can control time and randomness.
	Now    func() time.Time
	Jitter func(n int64) int64
	Client *http.Client
}

// Worker delivers events. Create it with New, start it with Run, and wake it
// with Notify whenever new deliveries were committed.
type Worker struct {
	store  store.Store
	dests  map[string]*Destination
	opts   Options
	client *http.Client
	log    *slog.Logger
	wake   chan struct{}
	done   chan store.Outcome
}

// New creates a Worker.
func New(s store.Store, opts Options) *Worker {
	if opts.Concurrency <= 0 {
		opts.Concurrency = 64
	}
	if opts.Lease <= 0 {
		opts.Lease = time.Minute
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
		client = &http.Client{
			Transport: &http.Transport{
				Proxy:               http.ProxyFromEnvironment,
				MaxIdleConns:        opts.Concurrency * 2,
				MaxIdleConnsPerHost: opts.Concurrency,
				IdleConnTimeout:     90 * time.Second,
			},
			// A redirect is the destination's misconfiguration: report it
			// as a failed attempt rather than POST the event elsewhere.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	w := &Worker{
		store:  s,
		dests:  map[string]*Destination{},
		opts:   opts,
		client: client,
		log:    opts.Logger,
		wake:   make(chan struct{}, 1),
		done:   make(chan store.Outcome, opts.Concurrency),
	}
	for i := range opts.Destinations {
		d := opts.Destinations[i]
		w.dests[d.Name] = &d
	}
	return w
}

// Notify wakes the worker to look for due deliveries now. It never blocks.
func (w *Worker) Notify() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Run delivers until ctx ends, then lets in-flight attempts finish (up to
// ShutdownGrace), records their outcomes and returns.
func (w *Worker) Run(ctx context.Context) {
	// Attempts run under their own context so that a shutdown lets them
	// finish; it is cut only when the grace period is over.
	attemptCtx, cutAttempts := context.WithCancel(context.Background())
	defer cutAttempts()

	var completing sync.WaitGroup
	completing.Add(1)
	go func() {
		defer completing.Done()
		w.complete()
	}()

	slots := make(chan struct{}, w.opts.Concurrency)
	var inflight sync.WaitGroup
	freed := make(chan struct{}, 1)
	backoff := time.Duration(0)

	for ctx.Err() == nil {
		// Lease in batches: waiting until a quarter of the slots are free
		// keeps each lease transaction (and its fsync) worth its cost,
		// while an idle worker still leases a single new event at once.
		free := cap(slots) - len(slots)
		if free == 0 || (free < cap(slots)/4 && len(slots) > 0) {
			select {
			case <-ctx.Done():
			case <-freed:
			}
			continue
		}
		ds, err := w.store.LeaseDeliveries(ctx, w.opts.Now(), w.opts.Lease, min(free, 256))
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			backoff = min(max(2*backoff, 100*time.Millisecond), 5*time.Second)
			w.log.Error("lease deliveries", "err", err, "retry_in", backoff)
			w.sleep(ctx, backoff)
			continue
		}
		backoff = 0
		for _, d := range ds {
			slots <- struct{}{}
			inflight.Add(1)
			go func() {
				defer inflight.Done()
				w.done <- w.attempt(attemptCtx, d)
				<-slots
				select {
				case freed <- struct{}{}:
				default:
				}
			}()
		}
		if len(ds) == min(free, 256) {
			continue // there may be more due right now
		}
		// Nothing more is due: sleep until woken by a commit, a freed slot,
		// or the next due time.
		wait := w.opts.IdlePoll
		if next, ok, err := w.store.NextDue(ctx); err != nil {
			wait = min(wait, time.Second)
		} else if ok {
			wait = min(wait, max(next.Sub(w.opts.Now()), time.Millisecond))
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-w.wake:
		case <-freed:
		case <-timer.C:
		}
		timer.Stop()
	}

	grace := time.AfterFunc(w.opts.ShutdownGrace, cutAttempts)
	inflight.Wait()
	grace.Stop()
	close(w.done)
	completing.Wait()
}

func (w *Worker) sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// complete writes outcomes back in batches: one transaction (one fsync) for
// every outcome that is ready, as the group committer does for intake.
func (w *Worker) complete() {
	batch := make([]store.Outcome, 0, 256)
	for o := range w.done {
		batch = append(batch[:0], o)
	gather:
		for len(batch) < 256 {
			select {
			case o, ok := <-w.done:
				if !ok {
					break gather
				}
				batch = append(batch, o)
			default:
				break gather
			}
		}
		w.write(batch)
	}
}

func (w *Worker) write(batch []store.Outcome) {
	retried := false
	for try := 0; ; try++ {
		err := w.store.CompleteDeliveries(context.Background(), batch)
		if err == nil {
			break
		}
		if try == 4 {
			// The leases will expire and the deliveries be attempted again:
			// at least once still holds, and Idempotency-Key lets the
			// destination drop the repeat.
			w.log.Error("record delivery outcomes; deliveries will be retried after their leases expire", "err", err, "outcomes", len(batch))
			return
		}
		time.Sleep(time.Duration(100<<try) * time.Millisecond)
	}
	for _, o := range batch {
		if o.Kind == store.OutcomeRetry || o.Kind == store.OutcomeReleased {
			retried = true
		}
	}
	if retried {
		w.Notify() // the next due time may have moved earlier
	}
}

// IdempotencyKey is what every delivery of an event carries: stable across
// attempts and replays, and the same value the provider's key gave.
func IdempotencyKey(source, key string) string { return source + ":" + key }

// MessageID is the Standard Webhooks webhook-id of an event's deliveries. It
// is derived from the key (which may contain dots the spec forbids in ids)
// so it too is stable across attempts and replays.
func MessageID(source, key string) string {
	sum := sha256.Sum256([]byte(IdempotencyKey(source, key)))
	return "msg_" + hex.EncodeToString(sum[:16])
}

func (w *Worker) attempt(ctx context.Context, d store.LeasedDelivery) store.Outcome {
	start := w.opts.Now()
	out := store.Outcome{DeliveryID: d.ID, LeaseToken: d.LeaseToken, Attempt: d.Attempt, StartedAt: start}
	dest, ok := w.dests[d.Destination]
	if !ok {
		out.Kind = store.OutcomeDead
		out.Error = fmt.Sprintf("destination %q is not configured", d.Destination)
		w.log.Warn("dead letter", "source", d.Source, "key", d.Key, "destination", d.Destination, "reason", out.Error)
		return out
	}
	if d.Attempt > dest.Retry.MaxAttempts {
		// The lease counted attempts that never reported: their worker
		// died mid-attempt, or they ran past their lease. They count, or a
		// delivery that crashes its worker would be retried forever.
		out.Kind, out.Attempt = store.OutcomeDead, d.Attempt-1
		out.Error = fmt.Sprintf("gave up after %d attempts (the last never reported an outcome: a worker crashed or an attempt outlived its lease)", d.Attempt-1)
		w.opts.Metrics.Attempts.WithLabelValues(dest.Name, "dead").Inc()
		w.logAttempt(slog.LevelWarn, d, "dead letter", "reason", out.Error)
		return out
	}
	// An attempt ends before its lease does (less the margin to record it),
	// whatever the destination's timeout: past the lease, another worker may
	// already be delivering the same event.
	timeout := dest.Timeout
	if !d.LeaseExpiresAt.IsZero() {
		timeout = min(timeout, d.LeaseExpiresAt.Add(-AttemptMargin(w.opts.Lease)).Sub(start))
	}
	if timeout <= 0 {
		out.Kind, out.NextAttemptAt = store.OutcomeReleased, start
		return out
	}
	status, after, location, err := w.post(ctx, dest, d, timeout)
	out.Duration = w.opts.Now().Sub(start)
	out.StatusCode = status
	switch {
	case err != nil && ctx.Err() != nil:
		// Shutdown cut the attempt: give the lease back, uncounted, due now.
		out.Kind = store.OutcomeReleased
		out.NextAttemptAt = w.opts.Now()
		return out
	case err == nil && status >= 200 && status < 300:
		out.Kind = store.OutcomeDelivered
		w.opts.Metrics.DeliveryLatency.WithLabelValues(dest.Name).Observe(w.opts.Now().Sub(d.ReceivedAt).Seconds())
	case err == nil && IsPermanent(status):
		out.Kind = store.OutcomeDead
		out.Error = fmt.Sprintf("permanent failure: HTTP %d", status)
	case err == nil && status >= 300 && status < 400:
		// A redirect is the destination's misconfiguration (a wrong URL, a
		// missing slash, http to https): no retry fixes it, and following
		// it would POST the event somewhere nobody configured.
		out.Kind = store.OutcomeDead
		out.Error = fmt.Sprintf("redirected (HTTP %d to %q): fix the destination's url", status, bounded(location))
	default:
		if err != nil {
			out.Error = err.Error()
		} else {
			out.Error = fmt.Sprintf("HTTP %d", status)
		}
		if d.Attempt >= dest.Retry.MaxAttempts {
			out.Kind = store.OutcomeDead
			out.Error = fmt.Sprintf("gave up after %d attempts: %s", d.Attempt, out.Error)
			break
		}
		out.Kind = store.OutcomeRetry
		delay := dest.Retry.Backoff(d.Attempt, w.opts.Jitter)
		if after >= 0 {
			// Retry-After is honoured, within the destination's own bounds:
			// a day-long Retry-After does not park a delivery past max_delay.
			delay = min(max(after, dest.Retry.BaseDelay), dest.Retry.MaxDelay)
		}
		out.NextAttemptAt = w.opts.Now().Add(delay)
		w.logAttempt(slog.LevelInfo, d, "delivery failed; will retry", "status", status, "err", out.Error, "retry_in", delay.Round(time.Millisecond))
	}
	switch out.Kind {
	case store.OutcomeDelivered:
		w.opts.Metrics.Attempts.WithLabelValues(dest.Name, "delivered").Inc()
		w.logAttempt(slog.LevelDebug, d, "delivered", "status", status, "duration", out.Duration)
	case store.OutcomeDead:
		w.opts.Metrics.Attempts.WithLabelValues(dest.Name, "dead").Inc()
		w.logAttempt(slog.LevelWarn, d, "dead letter", "status", status, "reason", out.Error)
	case store.OutcomeRetry:
		w.opts.Metrics.Attempts.WithLabelValues(dest.Name, "retry").Inc()
	}
	return out
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

// bounded cuts a value a destination sent back (a Location) before it is
// stored or logged.
func bounded(s string) string {
	if len(s) > 256 {
		return s[:256] + "…"
	}
	return s
}

// post makes one HTTP attempt, bounded by timeout. It returns the status (0
// without an answer), the Retry-After delay to honour (-1 when none), the
// Location of a redirect, and a transport error.
func (w *Worker) post(ctx context.Context, dest *Destination, d store.LeasedDelivery, timeout time.Duration) (int, time.Duration, string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, dest.URL, bytes.NewReader(d.Body))
	if err != nil {
		return 0, -1, "", err
	}
	h := req.Header
	for k, v := range d.Header { // the provider's routing headers, as received
		h[k] = v
	}
	for k, v := range dest.Headers {
		h.Set(k, v)
	}
	if d.ContentType != "" {
		h.Set("Content-Type", d.ContentType)
	}
	h.Set("User-Agent", "oncehook")
	h.Set("Idempotency-Key", IdempotencyKey(d.Source, d.Key))
	h.Set("X-Oncehook-Source", d.Source)
	h.Set("X-Oncehook-Attempt", strconv.Itoa(d.Attempt))
	if dest.SigningKey != nil {
		id := MessageID(d.Source, d.Key)
		now := w.opts.Now()
		h.Set("webhook-id", id)
		h.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
		h.Set("webhook-signature", provider.SignStandard(dest.SigningKey, id, now, d.Body))
	}
	resp, err := w.client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("timed out after %s", timeout)
		}
		return 0, -1, "", err
	}
	defer resp.Body.Close()
	// Drain a little so the connection can be reused; the body is not ours.
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	after := time.Duration(-1)
	if ra, ok := retryAfter(resp, w.opts.Now()); ok {
		after = ra
	}
	return resp.StatusCode, after, resp.Header.Get("Location"), nil
}
