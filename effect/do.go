package effect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
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
//     Permanent.
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
	go func() {
		defer close(renewed)
		t := time.NewTicker(lease / 3)
		defer t.Stop()
		for {
			select {
			case <-work.Done():
				return
			case <-t.C:
				if _, err := l.Renew(work, key, c.Token, lease); err != nil && work.Err() == nil {
					stop(fmt.Errorf("effect %q: lease lost: %w", key, err))
					return
				}
			}
		}
	}()
	res, fnErr := fn(work, c)
	lost := context.Cause(work)
	stop(nil)
	<-renewed
	if lost != nil && !errors.Is(lost, context.Canceled) {
		return nil, false, lost
	}
	// The outcome is recorded even when ctx ends now: a result that was
	// produced must not be lost for a cancelled caller.
	done := context.WithoutCancel(ctx)
	switch {
	case fnErr == nil:
		if err := l.Complete(done, key, c.Token, res); err != nil {
			return nil, false, err
		}
		return res, false, nil
	case IsPermanent(fnErr):
		if err := l.Fail(done, key, c.Token, truncate(fnErr.Error())); err != nil {
			return nil, false, errors.Join(fnErr, err)
		}
	default:
		if err := l.Release(done, key, c.Token, truncate(fnErr.Error())); err != nil {
			return nil, false, errors.Join(fnErr, err)
		}
	}
	return nil, false, fnErr
}

func truncate(s string) string {
	if len(s) > MaxReason {
		return s[:MaxReason]
	}
	return s
}
