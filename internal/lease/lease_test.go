package lease

import (
	"testing"
	"time"
)

// MinLease is a lease that covers timeout plus its margin, and a second
// less would not.
func TestMinLeaseIsTheSmallestWholeSecondThatCovers(t *testing.T) {
	for _, timeout := range []time.Duration{time.Second, 9 * time.Second, 10 * time.Second, 19 * time.Second, 20 * time.Second, 30 * time.Second, 1500 * time.Millisecond} {
		l := MinLease(timeout)
		if l < timeout+AttemptMargin(l) {
			t.Errorf("MinLease(%s) = %s does not cover it", timeout, l)
		}
		if shorter := l - time.Second; shorter >= timeout+AttemptMargin(shorter) {
			t.Errorf("MinLease(%s) = %s, but %s covers it too", timeout, l, shorter)
		}
	}
}
