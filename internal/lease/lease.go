// Package lease holds what a delivery's lease must cover, in one place:
// its default, and the margin the worker cuts an attempt by, which the
// config checks a lease against. Config, worker and writer import it;
// none imports another for it.
package lease

import "time"

// Margin is how long before its lease expires an attempt is cut, at
// most: the outcome must be written while the lease still holds, or another
// worker takes the delivery over and delivers it a second time, at once.
const Margin = 5 * time.Second

// AttemptMargin is the margin for a lease of the given length: Margin,
// or a fifth of a short lease. A lease must be at least the longest
// destination timeout plus this margin (the config checks it); an attempt
// is bounded by both.
func AttemptMargin(lease time.Duration) time.Duration { return min(Margin, lease/5) }

// MinLease is the shortest lease that covers an attempt of timeout plus
// its margin (lease >= timeout + AttemptMargin(lease)), rounded up to a
// whole second: what the config advises when a lease is too short.
func MinLease(timeout time.Duration) time.Duration {
	l := timeout + Margin
	if timeout < 4*Margin {
		l = (timeout*5 + 3) / 4 // lease - lease/5 >= timeout
	}
	l = (l + time.Second - 1).Truncate(time.Second)
	for l < timeout+AttemptMargin(l) { // integer rounding
		l += time.Second
	}
	return l
}

// Default is the lease a delivery gets when none is configured: the
// longest destination timeout plus 30 s (30 s with none known). The
// config, the worker and the writer all take it from here.
func Default(longestTimeout time.Duration) time.Duration { return longestTimeout + 30*time.Second }
