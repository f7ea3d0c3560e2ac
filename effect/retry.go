package effect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Retry is how the call inside a side effect is retried while its owner
// holds the key (Do renews the lease meanwhile): exponential backoff with
// full jitter from Base up to Max, the callee's own Retry-After when it
// gave one (AfterError), no retry on a Permanent error, and at most
// MaxAttempts calls within Total.
type Retry struct {
	MaxAttempts int           // default 5
	Base        time.Duration // default 500ms
	Max         time.Duration // default 30s
	Total       time.Duration // default 2m
}

func (p *Retry) defaults() {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = 5
	}
	if p.Base <= 0 {
		p.Base = 500 * time.Millisecond
	}
	if p.Max <= 0 {
		p.Max = 30 * time.Second
	}
	if p.Total <= 0 {
		p.Total = 2 * time.Minute
	}
}

// afterError is a retryable error with the callee's Retry-After.
type afterError struct {
	err   error
	after time.Duration
}

func (e afterError) Error() string { return fmt.Sprintf("%v (retry after %s)", e.err, e.after) }
func (e afterError) Unwrap() error { return e.err }

// AfterError marks err as retryable no sooner than after: what a 429 or
// 503 with Retry-After means.
func AfterError(err error, after time.Duration) error { return afterError{err, after} }

// Run calls fn until it succeeds, fails permanently, or the policy's
// attempts or time run out; the last error is returned (Permanent ones
// as they are, so that Do fails the key for good).
func (p Retry) Run(ctx context.Context, fn func(ctx context.Context, attempt int) (json.RawMessage, error)) (json.RawMessage, error) {
	p.defaults()
	deadline := time.Now().Add(p.Total)
	var err error
	for attempt := 1; attempt <= p.MaxAttempts; attempt++ {
		var res json.RawMessage
		if res, err = fn(ctx, attempt); err == nil || IsPermanent(err) {
			return res, err
		}
		if attempt == p.MaxAttempts {
			break
		}
		wait := p.backoff(attempt)
		var after afterError
		if errors.As(err, &after) {
			wait = max(after.after, wait/2) // the callee said when; a little jitter keeps retries apart
		}
		if time.Now().Add(wait).After(deadline) {
			break
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, errors.Join(err, ctx.Err())
		case <-t.C:
		}
	}
	return nil, fmt.Errorf("gave up: %w", err)
}

// backoff is the wait after attempt: full jitter under a ceiling that
// doubles from Base up to Max.
func (p Retry) backoff(attempt int) time.Duration {
	ceiling := p.Base
	for i := 1; i < attempt && ceiling < p.Max; i++ {
		ceiling *= 2
	}
	ceiling = min(ceiling, p.Max)
	return time.Duration(rand.Int64N(int64(ceiling))) + time.Millisecond
}
