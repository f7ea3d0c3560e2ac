package deliver

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// RetryPolicy says how often and how patiently a destination is retried.
type RetryPolicy struct {
	MaxAttempts int
	BaseDelay   time.Duration
	MaxDelay    time.Duration
}

// Backoff returns the delay after the attempt-th failed attempt (from 1):
// a ceiling that doubles from BaseDelay up to MaxDelay, and a delay drawn
// between half the ceiling and the ceiling. Every retry is jittered, the
// first one too, so that deliveries that failed together (a destination
// that was down) do not all come back at the same instant. jitter(n)
// returns a number in [0, n).
func (p RetryPolicy) Backoff(attempt int, jitter func(n int64) int64) time.Duration {
	ceiling := p.BaseDelay
	for i := 1; i < attempt && ceiling < p.MaxDelay; i++ {
		ceiling *= 2
	}
	ceiling = min(ceiling, p.MaxDelay)
	half := ceiling / 2
	if ceiling-half <= 0 {
		return ceiling
	}
	return half + time.Duration(jitter(int64(ceiling-half)+1))
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
// cannot park a delivery for years. The worker then caps it again at the
// destination's max_delay.
const maxRetryAfter = 24 * time.Hour

// retryAfter reads a Retry-After header (seconds or an HTTP date) on 429 and
// 503 answers. It returns false when there is none to honour. Seconds are
// capped before they are multiplied: 9300000000 would overflow to nothing.
func retryAfter(resp *http.Response, now time.Time) (time.Duration, bool) {
	if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable {
		return 0, false
	}
	v := strings.TrimSpace(resp.Header.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	var d time.Duration
	if secs, err := strconv.ParseUint(v, 10, 64); err == nil {
		d = time.Duration(min(secs, uint64(maxRetryAfter/time.Second))) * time.Second
	} else if errors.Is(err, strconv.ErrRange) {
		d = maxRetryAfter // digits beyond any number: as long as allowed
	} else if at, err := http.ParseTime(v); err == nil {
		d = at.Sub(now)
	} else {
		return 0, false
	}
	return min(max(d, 0), maxRetryAfter), true
}
