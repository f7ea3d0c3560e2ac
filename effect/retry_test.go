package effect_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/oncehook/oncehook/effect"
)

func TestRetryRunsUntilSuccessAndHonoursRetryAfter(t *testing.T) {
	p := effect.Retry{MaxAttempts: 5, Base: time.Millisecond, Max: 4 * time.Millisecond, Total: time.Second}
	var at []time.Time
	res, err := p.Run(context.Background(), func(_ context.Context, attempt int) (json.RawMessage, error) {
		at = append(at, time.Now())
		switch attempt {
		case 1:
			return nil, effect.AfterError(errors.New("HTTP 429"), 80*time.Millisecond)
		case 2:
			return nil, errors.New("HTTP 500")
		}
		return json.RawMessage(`"ok"`), nil
	})
	if err != nil || string(res) != `"ok"` || len(at) != 3 {
		t.Fatalf("%s %v after %d attempts", res, err, len(at))
	}
	if wait := at[1].Sub(at[0]); wait < 80*time.Millisecond {
		t.Fatalf("retried %s after a Retry-After of 80ms", wait)
	}
	if wait := at[2].Sub(at[1]); wait > 50*time.Millisecond {
		t.Fatalf("backoff after a 500 was %s, want at most a few ms", wait)
	}
}

func TestRetryStopsOnPermanentAttemptsAndTime(t *testing.T) {
	calls := 0
	_, err := effect.Retry{MaxAttempts: 5, Base: time.Millisecond}.Run(context.Background(), func(context.Context, int) (json.RawMessage, error) {
		calls++
		return nil, effect.Permanent(errors.New("HTTP 400: bad prompt"))
	})
	if calls != 1 || !effect.IsPermanent(err) {
		t.Fatalf("a permanent error: %d calls, %v", calls, err)
	}
	calls = 0
	_, err = effect.Retry{MaxAttempts: 3, Base: time.Millisecond, Max: time.Millisecond}.Run(context.Background(), func(context.Context, int) (json.RawMessage, error) {
		calls++
		return nil, errors.New("HTTP 503")
	})
	if calls != 3 || err == nil {
		t.Fatalf("attempts: %d calls, %v", calls, err)
	}
	calls = 0
	start := time.Now()
	_, err = effect.Retry{MaxAttempts: 100, Base: 40 * time.Millisecond, Max: 40 * time.Millisecond, Total: 100 * time.Millisecond}.Run(context.Background(),
		func(context.Context, int) (json.RawMessage, error) {
			calls++
			return nil, effect.AfterError(errors.New("429"), 60*time.Millisecond)
		})
	if err == nil || time.Since(start) > 200*time.Millisecond || calls > 3 {
		t.Fatalf("total time: %d calls in %s, %v", calls, time.Since(start), err)
	}
}
