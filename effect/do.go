package effect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// permanent marks an error that no retry fixes.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// Permanent marks err as one no retry fixes (an invalid phone number, a
// refused card): Do then fails the key for good instead of releasing it.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanent{err}
}

// IsPermanent reports whether err was marked with Permanent.
func IsPermanent(err error) bool {
	var p permanent
	return errors.As(err, &p)
}

// Do runs fn at most once for key, however many times Do is called for it,
// by however many processes:
//
//   - it claims key; if key was done before, it returns the stored result
//     with alreadyDone set, and fn does not run;
//   - it runs fn while renewing the lease in the background (fn's context
//     ends if the lease is lost, so that fn stops acting as an owner);
//   - it completes key with fn's result, or, when fn fails, releases it
//     for a later retry, or fails it for good when fn's error is
//     Permanent. A ledger out of reach (a gateway restarting) is tried
//     again until the lease runs out (for 30 s at most), so that a
//     result is not lost to a blip; a result the ledger refuses (over its
//     result limit, or not JSON) fails the key for good, with the reason:
//     the work ran, and a pending key would be handed to the next claimer
//     to run it again.
//
// Another owner holding the lease is a *BusyError: call again after its
// RetryAfter. fn is told the claim: a Reclaimed claim means a previous owner
// stopped halfway, so fn should check whether the effect already happened
// (the downstream API, looked up by the same key) before doing it again.
func Do(ctx context.Context, l Ledger, key string, opts ClaimOptions, fn func(ctx context.Context, c Claim) (json.RawMessage, error)) (result json.RawMessage, alreadyDone bool, err error) {
	c, err := l.Claim(ctx, key, opts)
	if err != nil {
		return nil, false, err
	}
	if c.AlreadyDone {
		return c.Result, true, nil
	}
	lease := opts.Lease
	if lease <= 0 {
		lease = DefaultLease
	}
	work, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	renewed := make(chan struct{})
	until := c.LeaseExpiresAt // the lease's latest known expiry, read once the renewer is gone
	go func() {
		defer close(renewed)
		t := time.NewTicker(max(lease/3, time.Millisecond)) // a lease under 3ns would make a ticker panic
		defer t.Stop()
		for {
			select {
			case <-work.Done():
				return
			case <-t.C:
				exp, err := l.Renew(work, key, c.Token, lease)
				if err != nil && work.Err() == nil {
					stop(fmt.Errorf("effect %q: lease lost: %w", key, err))
					return
				}
				if err == nil {
					until = exp
				}
			}
		}
	}()
	res, fnErr := fn(work, c)
	lost := context.Cause(work)
	stop(nil)
	<-renewed
	if errors.Is(lost, context.Canceled) {
		lost = nil
	}
	// The outcome is recorded even when ctx ends now: a result that was
	// produced must not be lost for a cancelled caller. The token fences
	// every step, so recording is tried even when a renewal failed (the
	// ledger may only have been out of reach): a lease really taken over
	// answers ErrStaleToken.
	done := context.WithoutCancel(ctx)
	// A ledger gone for good (a gateway shut down) must not hold the
	// caller for an hour's lease.
	if limit := time.Now().Add(recordFor); until.After(limit) {
		until = limit
	}
	switch {
	case fnErr == nil:
		err := RecordOutcome(done, until, func() error { return l.Complete(done, key, c.Token, res) })
		if errors.Is(err, ErrInvalid) {
			// The work ran, but the ledger refuses its result (over the
			// ledger's result limit, or not JSON). Leaving the key pending
			// would hand it to the next claimer once the lease runs out, to
			// do the work again: fail it for good instead, saying why.
			reason := truncate("done, but its result could not be stored: " + err.Error())
			if ferr := RecordOutcome(done, until, func() error { return l.Fail(done, key, c.Token, reason) }); ferr != nil {
				return nil, false, errors.Join(err, ferr)
			}
			return nil, false, fmt.Errorf("effect %q: the work was done, but the ledger refused its result, so the key is failed for good: %w", key, err)
		}
		if err != nil {
			if lost != nil {
				return nil, false, errors.Join(lost, err)
			}
			return nil, false, err
		}
		return res, false, nil
	case lost != nil:
		return nil, false, lost
	case IsPermanent(fnErr):
		if err := RecordOutcome(done, until, func() error { return l.Fail(done, key, c.Token, truncate(fnErr.Error())) }); err != nil {
			return nil, false, errors.Join(fnErr, err)
		}
	default:
		if err := RecordOutcome(done, until, func() error { return l.Release(done, key, c.Token, truncate(fnErr.Error())) }); err != nil {
			return nil, false, errors.Join(fnErr, err)
		}
	}
	return nil, false, fnErr
}

// recordFor bounds how long Do tries to record an outcome.
var recordFor = 30 * time.Second

// RecordOutcome makes call, an owner's step that records an outcome (Complete,
// Fail, Release), again and again while it fails without an answer of the
// ledger (the ledger could not be reached: a gateway restarting, a network
// cut), backing off from 50 ms to 2 s, until until or ctx's end: an
// outcome not recorded leaves the key to the next claimer once the lease
// expires, to do the work again. An answer of the ledger (a stale token,
// a refused request) is final. Do and the idempotency middleware record
// with it; the token fences every try.
func RecordOutcome(ctx context.Context, until time.Time, call func() error) error {
	wait := 50 * time.Millisecond
	for {
		err := call()
		if err == nil || answered(err) || !time.Now().Add(wait).Before(until) || ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		wait = min(2*wait, 2*time.Second)
	}
}

// answered reports whether err is the ledger's answer, rather than a
// failure to reach it.
func answered(err error) bool {
	for _, e := range []error{ErrStaleToken, ErrInvalid, ErrNotFound, ErrConflict, ErrBusy, ErrFailed, ErrExpired, ErrFingerprint} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// truncate makes s a reason the ledger takes: valid UTF-8 without NUL,
// cut at a character's boundary to at most MaxReason bytes. A reason the
// ledger refused would leave the key pending instead of released or
// failed.
func truncate(s string) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
	if len(s) <= MaxReason {
		return s
	}
	cut := MaxReason
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
