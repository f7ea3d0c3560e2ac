package deliver

import (
	"net/http"
	"strconv"
	"time"
)

// RetryPolicy says how often and how patiently a destination is retried.
type RetryPolicy struct {
	MaxAttempts int
	BaseDelay   time.Duration
	MaxDelay    time.Duration
}

// Backoff returns the delay after the attempt-th failed attempt (from 1):
// exponential growth from BaseDelay, capped at MaxDelay, with full jitter
// between BaseDelay and the cap so that a crowd of failed deliveries does not
// come back at the same instant. jitter(n) returns a number in [0, n).
func (p RetryPolicy) Backoff(attempt int, jitter func(n int64) int64) time.Duration {
	ceiling := p.BaseDelay
	for i := 1; i < attempt && ceiling < p.MaxDelay; i++ {
		ceiling *= 2
	}
	ceiling = min(ceiling, p.MaxDelay)
	spread := int64(ceiling - p.BaseDelay)
	if spread <= 0 {
		return p.BaseDelay
	}
	return p.BaseDelay + time.Duration(jitter(spread+1))
}

// permanent lists destination answers that no retry will fix.
var permanent = map[int]bool{
	http.StatusBadRequest:          true,
	http.StatusUnauthorized:        true,
	http.StatusForbidden:           true,
	http.StatusNotFound:            true,
	http.StatusGone:                true,
	http.StatusUnprocessableEntity: true,
}

// IsPermanent reports whether status is a failure not worth retrying.
func IsPermanent(status int) bool { return permanent[status] }

// maxRetryAfter bounds what a destination can ask for, so that a bogus header
// cannot park a delivery for years.
const maxRetryAfter = 24 * time.Hour

// retryAfter reads a Retry-After header (seconds or an HTTP date) on 429 and
// 503 answers. It returns false when there is none to honour.
func retryAfter(resp *http.Response, now time.Time) (time.Duration, bool) {
	if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable {
		return 0, false
	}
	v := resp.Header.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	var d time.Duration
	if secs, err := strconv.Atoi(v); err == nil {
		d = time.Duration(secs) * time.Second
	} else if at, err := http.ParseTime(v); err == nil {
		d = at.Sub(now)
	} else {
		return 0, false
	}
	return min(max(d, 0), maxRetryAfter), true
}
