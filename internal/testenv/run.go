package testenv

import (
	"context"
	"sync"
	"testing"
	"time"
)

// Runner is anything a test runs until its context ends: a queue source's
// consumer (broker.Consumer).
type Runner interface {
	Run(ctx context.Context) error
}

// Run starts r and stops it when the test ends, or when stop is called:
// its context ends, and Run must then return nil within within (a
// consumer waits for the Accepts it handed out, and must not hang).
func Run(t testing.TB, r Runner, within time.Duration) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(within):
				t.Errorf("Run did not return %s after its context ended", within)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// ShutdownWaits checks that stop (from Run) waits for the work r has in
// flight, as a consumer must for the Accepts it handed out: stop has not
// returned after hold, and returns within within once release lets that
// work answer.
func ShutdownWaits(t testing.TB, stop, release func(), hold, within time.Duration) {
	t.Helper()
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("Run returned while work was still in flight")
	case <-time.After(hold):
	}
	release()
	select {
	case <-stopped:
	case <-time.After(within):
		t.Fatalf("Run did not return within %s once the work in flight answered", within)
	}
}
