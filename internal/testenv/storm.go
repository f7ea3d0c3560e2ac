package testenv

import "sync"

// Storm runs the concurrent requests of a test's storm: each Go on its own
// goroutine, at most limit at once. Go waits for a free slot before it
// starts the next one, as a client with limit connections would, so a
// loop of Go calls sends at the pace the gateway answers; Wait waits for
// every one to return.
type Storm struct {
	wg    sync.WaitGroup
	slots chan struct{}
}

// NewStorm returns a Storm of at most limit requests in flight.
func NewStorm(limit int) *Storm {
	return &Storm{slots: make(chan struct{}, limit)}
}

// Go runs f on its own goroutine once a slot is free.
func (s *Storm) Go(f func()) {
	s.wg.Add(1)
	s.slots <- struct{}{}
	go func() {
		defer s.wg.Done()
		defer func() { <-s.slots }()
		f()
	}()
}

// Wait waits for every f that Go started.
func (s *Storm) Wait() { s.wg.Wait() }
