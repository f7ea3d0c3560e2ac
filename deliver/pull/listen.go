package pull

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Listener is `oncehook listen`: it pulls a destination's deliveries,
// forwards each to a local URL with the same headers and bytes, prints a
// line for each, and acks it with the local outcome, so the backlog and
// the retries stay in the gateway. Stopped (or killed) and started again,
// it gets what was not acked.
type Listener struct {
	Client      *Client
	Destination string
	// ForwardTo is the local app's URL.
	ForwardTo string
	// HTTP forwards (nil: a client with a 30s timeout, no redirects).
	HTTP *http.Client
	// Out gets one line per delivery, and the connection's news.
	Out io.Writer
	// Types, when set, are the event types forwarded (a trailing * is a
	// prefix): the others are acked as delivered, not forwarded.
	Types []string
	// FromNow skips the backlog: what arrived before Run started is acked
	// as delivered, not forwarded.
	FromNow   bool
	PrintBody bool
	// Batch is a pull's max (default 16); Lease, each delivery's lease
	// (default 30s); Parallel, how many are forwarded at once (default 8:
	// a FIFO entity is never twice in one batch, so order holds).
	Batch    int
	Lease    time.Duration
	Parallel int
	// Consumer names this listener in the attempts (e.g. host/pid).
	Consumer string
	// Journal, when set, is a file that keeps the outcome of each
	// delivery forwarded and not yet acked: after a kill, a delivery the
	// app already answered is acked with that answer when it comes back,
	// not forwarded again.
	Journal string

	mu      sync.Mutex // Out, journal, down
	journal *journal
	down    bool // the gateway did not answer: said once, until it does
	started time.Time
}

// Run listens until ctx ends. It returns an error only for what no retry
// fixes (the token may not pull, the destination does not exist).
func (l *Listener) Run(ctx context.Context) error {
	if l.Batch <= 0 {
		l.Batch = 16
	}
	if l.Lease <= 0 {
		l.Lease = DefaultLease
	}
	if l.Parallel <= 0 {
		l.Parallel = 8
	}
	if l.HTTP == nil {
		l.HTTP = &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	l.started = time.Now()
	if l.Journal != "" {
		j, err := openJournal(l.Journal)
		if err != nil {
			return err
		}
		defer j.close()
		l.journal = j
	}
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		ds, err := l.Client.Pull(ctx, l.Destination, PullBody{Max: l.Batch, Lease: l.Lease.String(), Wait: "20s", Consumer: l.Consumer})
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			if untrusted(err) {
				// No retry fixes it: say so, rather than retry for ever.
				return fmt.Errorf("%w: %w", ErrUntrusted, err)
			}
			var api *APIError
			if errors.As(err, &api) && api.Status != http.StatusServiceUnavailable && api.Status != http.StatusBadGateway &&
				api.Status != http.StatusGatewayTimeout && api.Status != http.StatusTooManyRequests {
				return err
			}
			backoff = min(max(backoff*2, 500*time.Millisecond), 10*time.Second)
			l.lost(err, backoff)
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			continue
		}
		l.found()
		backoff = 0
		l.forwardBatch(ctx, ds)
	}
	return nil
}

// ErrUntrusted: the gateway's TLS certificate is not one this machine
// trusts (a private CA not given, a name it is not for, expired): Run
// returns it at once, for a retry would fail the same way.
var ErrUntrusted = errors.New("the gateway's TLS certificate is not trusted")

func untrusted(err error) bool {
	var verify *tls.CertificateVerificationError
	var authority x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	return errors.As(err, &verify) || errors.As(err, &authority) || errors.As(err, &host) || errors.As(err, &invalid)
}

// forwardBatch forwards and acks ds, Parallel at a time.
func (l *Listener) forwardBatch(ctx context.Context, ds []WireDelivery) {
	sem := make(chan struct{}, l.Parallel)
	var wg sync.WaitGroup
	for _, d := range ds {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			l.handle(ctx, d)
		})
	}
	wg.Wait()
}

// handle forwards d (unless it is skipped, or its outcome is journaled
// from before a restart) and acks it with what the app answered.
func (l *Listener) handle(ctx context.Context, d WireDelivery) {
	var ack AckBody
	note := ""
	switch {
	case l.FromNow && d.ReceivedAt.Before(l.started):
		ack, note = AckBody{Status: http.StatusOK, Response: "not forwarded: older than listen --from-now"}, "skipped (--from-now)"
	case !l.wants(d.Type):
		ack, note = AckBody{Status: http.StatusOK, Response: "not forwarded: listen --type"}, "skipped (--type)"
	default:
		if j, ok := l.journaled(d); ok {
			ack, note = j, "answered before a restart: acked, not forwarded again"
		} else {
			// An outcome kept for another attempt is stale (its ack
			// landed; the delivery lives on, replayed): drop it before it
			// can answer this delivery's next attempt.
			l.forget(d.ID)
			ack = l.forward(ctx, d)
			if ack.Status >= 200 && ack.Status < 300 || ack.Status >= 400 && ack.Status < 500 {
				l.remember(d, ack)
			}
		}
	}
	ack.Token = d.Token
	l.line(d, ack, note)
	// Acked until it is, or its lease is over (then it comes back, and
	// the journal answers it).
	for wait := 200 * time.Millisecond; ; wait = min(wait*2, 5*time.Second) {
		_, err := l.Client.Ack(ctx, d.ID, ack)
		var api *APIError
		switch {
		case err == nil:
			l.found()
			l.forget(d.ID)
			return
		case errors.As(err, &api) && api.Status == http.StatusConflict:
			l.say("%s: the ack came too late (%s): the gateway hands it out again", d.ID, api.Body.Reason)
			return
		case ctx.Err() != nil || time.Now().Add(wait).After(d.LeaseExpiresAt):
			return
		}
		if !errors.As(err, &api) {
			l.lost(err, wait)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// forward POSTs d to the local app: the same headers and bytes, at the
// path and query a transformation gave it.
func (l *Listener) forward(ctx context.Context, d WireDelivery) AckBody {
	base, err := url.Parse(l.ForwardTo)
	if err != nil {
		return AckBody{Error: err.Error()}
	}
	// A transformation's path and query, as an HTTP destination's URL
	// would have them.
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.ForwardURL(base).String(), bytes.NewReader(d.Body))
	if err != nil {
		return AckBody{Error: err.Error()}
	}
	for k, vs := range d.Headers {
		if k == "Content-Length" || k == "Host" || k == "Connection" {
			continue
		}
		req.Header[k] = vs
	}
	start := time.Now()
	resp, err := l.HTTP.Do(req)
	latency := time.Since(start)
	if err != nil {
		return AckBody{Error: err.Error(), Latency: latency.String()}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	a := AckBody{Status: resp.StatusCode, Latency: latency.String(), Response: string(b)}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		a.RetryAfter = (time.Duration(s) * time.Second).String()
	}
	return a
}

func (l *Listener) wants(typ string) bool {
	if len(l.Types) == 0 {
		return true
	}
	for _, t := range l.Types {
		if ok, _ := path.Match(t, typ); ok || t == typ || strings.HasSuffix(t, "*") && strings.HasPrefix(typ, strings.TrimSuffix(t, "*")) {
			return true
		}
	}
	return false
}

// line prints one delivery as the Stripe CLI does: when, source, type,
// key, attempt, the local status (or error) and latency.
func (l *Listener) line(d WireDelivery, a AckBody, note string) {
	outcome := fmt.Sprintf("[%d]", a.Status)
	if a.Status == 0 {
		outcome = "[ERR] " + a.Error
	}
	if note != "" {
		outcome += " " + note
	}
	typ := d.Type
	if typ == "" {
		typ = "-"
	}
	latency := a.Latency
	if latency == "" {
		latency = "-"
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.Out, "%s  %s  %s  %s  attempt %d  %s %s\n", time.Now().Format("2006-01-02 15:04:05"), d.Source, typ, d.Key, d.Attempt, outcome, latency)
	if l.PrintBody {
		fmt.Fprintf(l.Out, "%s\n", d.Body)
	}
}

// lost says, once an outage, that the gateway does not answer.
func (l *Listener) lost(err error, retry time.Duration) {
	l.mu.Lock()
	was := l.down
	l.down = true
	l.mu.Unlock()
	if !was {
		l.say("lost the gateway (%v); reconnecting with backoff (next try in %s)", err, retry)
	}
}

// found says the gateway answers again, after an outage.
func (l *Listener) found() {
	l.mu.Lock()
	was := l.down
	l.down = false
	l.mu.Unlock()
	if was {
		l.say("reconnected: pulling from %s again", l.Destination)
	}
}

func (l *Listener) say(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.Out, "%s  %s\n", time.Now().Format("2006-01-02 15:04:05"), fmt.Sprintf(format, args...))
}

func (l *Listener) journaled(d WireDelivery) (AckBody, bool) {
	if l.journal == nil {
		return AckBody{}, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.journal.answer(d.ID, d.Attempt)
}

func (l *Listener) remember(d WireDelivery, a AckBody) {
	if l.journal == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.journal.add(d.ID, d.Attempt, a)
}

func (l *Listener) forget(id string) {
	if l.journal == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.journal.done(id)
}
