// Package groupcommit shares one durable commit among many concurrent
// requests.
//
// A durable commit costs an fsync, and an fsync costs the same for one event
// as for two hundred. So requests do not commit on their own: each hands its
// events to the Committer and waits. The writer takes everything queued
// (up to a batch limit), claims it all in one store transaction, and then
// wakes each request with its own verdicts. Each request still waits for the
// commit that holds its events; only the cost is shared. Under light load a
// batch is a single request and nothing waits for company.
package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/oncehook/oncehook/store"
)

// ErrClosed is returned for claims submitted after Close.
var ErrClosed = errors.New("groupcommit: committer closed")

// ErrTimeout is returned, wrapping store.ErrUnavailable, when a commit did
// not finish within CommitTimeout: a hung connection must not hold intake
// (or shutdown) forever.
var ErrTimeout = fmt.Errorf("groupcommit: commit timed out: %w", store.ErrUnavailable)

// ClaimFunc commits a batch of events and returns one claim per event.
type ClaimFunc func(ctx context.Context, events []store.NewEvent) ([]store.Claim, error)

type request struct {
	events []store.NewEvent
	bytes  int
	done   chan result
}

type result struct {
	claims []store.Claim
	err    error
}

// Committer batches claims from concurrent callers into shared transactions.
type Committer struct {
	claim     ClaimFunc
	maxBatch  int
	maxBytes  int
	timeout   time.Duration
	queue     chan *request
	committed func(deliveries int) // called after each commit that created deliveries
	observe   func(events int)     // called with the size of each batch
	outcome   func(err error)      // called after each commit, with its error
	linger    time.Duration

	// stop cancels the commits in progress once Close has waited
	// closeWait: a hung store must not hang shutdown.
	stop      context.Context
	cancel    context.CancelFunc
	closeWait time.Duration

	mu     sync.RWMutex
	closed bool
	wg     sync.WaitGroup
}

// Options tune a Committer.
type Options struct {
	MaxBatch int // most events in one transaction (default 256)
	// MaxBatchBytes bounds the bodies in one transaction (default 32 MiB):
	// a batch of large bodies stops growing there, and a request larger
	// than the bound commits alone. (210 bodies of 5 MiB in one batch went
	// over PostgreSQL's 1 GiB message limit and failed every one of them.)
	MaxBatchBytes int
	// CommitTimeout bounds one commit (default 30s). A commit that takes
	// longer fails its requests with ErrTimeout (503): the transaction
	// itself is cancelled, so nothing it held is acknowledged.
	CommitTimeout time.Duration
	// Outcome, when set, is told the result of every commit: nil, or the
	// error its requests got. Readiness reads it: a store that answers
	// pings may still refuse commits.
	Outcome func(err error)
	// CloseTimeout bounds how long Close lets queued commits run (default
	// 10s); then they are cancelled, and their requests fail (503).
	CloseTimeout time.Duration
	Writers      int                  // concurrent transactions (default 1: SQLite has one writer)
	Committed    func(deliveries int) // optional: told how many deliveries each commit created, to wake delivery
	Observe      func(events int)     // optional: told each batch's size, for metrics
	// Linger is how long a writer under load waits for more requests
	// before committing (only after a commit that carried several). On a
	// CPU-bound machine, fewer and bigger commits leave more CPU for
	// requests: 300µs raised durable SQLite intake from 35% to 41% of bare
	// net/http (see BENCHMARKS.md). Zero: commit whatever is queued.
	Linger time.Duration
}

// New starts a Committer's writers.
func New(claim ClaimFunc, opts Options) *Committer {
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 256
	}
	if opts.Writers <= 0 {
		opts.Writers = 1
	}
	if opts.MaxBatchBytes <= 0 {
		opts.MaxBatchBytes = 32 << 20
	}
	if opts.CommitTimeout <= 0 {
		opts.CommitTimeout = 30 * time.Second
	}
	if opts.CloseTimeout <= 0 {
		opts.CloseTimeout = 10 * time.Second
	}
	c := &Committer{
		claim:     claim,
		maxBatch:  opts.MaxBatch,
		maxBytes:  opts.MaxBatchBytes,
		timeout:   opts.CommitTimeout,
		queue:     make(chan *request, 4*opts.MaxBatch),
		committed: opts.Committed,
		observe:   opts.Observe,
		outcome:   opts.Outcome,
		linger:    opts.Linger,
		closeWait: opts.CloseTimeout,
	}
	c.stop, c.cancel = context.WithCancel(context.Background())
	for range opts.Writers {
		c.wg.Add(1)
		go c.write()
	}
	return c
}

// Claim submits events and waits until the transaction holding them has
// committed (or failed). If ctx ends first, Claim returns ctx's error, but the
// events may still be committed: the caller must not answer 200 and must
// not assume they were not stored.
func (c *Committer) Claim(ctx context.Context, events []store.NewEvent) ([]store.Claim, error) {
	req := &request{events: events, done: make(chan result, 1)}
	for _, e := range events {
		req.bytes += len(e.Body)
	}
	c.mu.RLock()
	if c.closed {
		c.mu.RUnlock()
		return nil, ErrClosed
	}
	select {
	case c.queue <- req:
		c.mu.RUnlock()
	case <-ctx.Done():
		c.mu.RUnlock()
		return nil, ctx.Err()
	}
	select {
	case r := <-req.done:
		return r.claims, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close stops accepting claims, commits everything already queued, and
// waits for the writers to finish: at most CloseTimeout, after which the
// commits still running are cancelled and what is left fails fast.
func (c *Committer) Close() {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.queue)
	}
	c.mu.Unlock()
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(c.closeWait):
		c.cancel()
		<-done
	}
	c.cancel()
}

func (c *Committer) write() {
	defer c.wg.Done()
	batch := make([]*request, 0, 64)
	events := make([]store.NewEvent, 0, c.maxBatch)
	lastRequests := 0
	var next *request // a request that did not fit the last batch
	for {
		first := next
		next = nil
		if first == nil {
			var ok bool
			if first, ok = <-c.queue; !ok {
				return
			}
		}
		batch = append(batch[:0], first)
		events = append(events[:0], first.events...)
		bytes := first.bytes
		// Under load, wait a moment for company: the previous commit
		// carried several requests, so more are on their way. A lone
		// request after a quiet spell commits at once.
		var linger *time.Timer
		if c.linger > 0 && lastRequests > 1 {
			linger = time.NewTimer(c.linger)
		}
	gather:
		for len(events) < c.maxBatch && bytes < c.maxBytes {
			var req *request
			var ok bool
			select {
			case req, ok = <-c.queue:
			default: // nothing queued: commit now, or linger for more
				if linger == nil {
					break gather
				}
				select {
				case req, ok = <-c.queue:
				case <-linger.C:
					break gather
				}
			}
			if !ok {
				break gather
			}
			if bytes+req.bytes > c.maxBytes {
				next = req // it opens the next batch (alone, if it is that large)
				break gather
			}
			batch = append(batch, req)
			events = append(events, req.events...)
			bytes += req.bytes
		}
		if linger != nil {
			linger.Stop()
		}
		lastRequests = len(batch)
		c.commit(batch, events)
	}
}

func (c *Committer) commit(batch []*request, events []store.NewEvent) {
	if c.observe != nil {
		c.observe(len(events))
	}
	claims, err := c.run(events)
	if errors.Is(err, store.ErrRejected) && len(batch) > 1 {
		// The store refused something one request carries (invariant 13:
		// one event fails only itself). Commit each request on its own, so
		// that only the request that carries it gets the error.
		for _, req := range batch {
			c.commit([]*request{req}, req.events)
		}
		return
	}
	if c.outcome != nil {
		c.outcome(err)
	}
	deliveries := 0
	off := 0
	for _, req := range batch {
		n := len(req.events)
		if err != nil {
			req.done <- result{err: err}
			continue
		}
		mine := claims[off : off+n : off+n]
		off += n
		for i, cl := range mine {
			if !cl.Duplicate {
				deliveries += len(req.events[i].Destinations)
			}
		}
		req.done <- result{claims: mine}
	}
	if deliveries > 0 && c.committed != nil {
		c.committed(deliveries)
	}
}

// run commits one batch. The transaction is not tied to any one request's
// context: a caller that gives up must not abort the commit the others are
// waiting for. It has a deadline of its own instead.
func (c *Committer) run(events []store.NewEvent) ([]store.Claim, error) {
	ctx, cancel := context.WithTimeout(c.stop, c.timeout)
	defer cancel()
	claims, err := c.claim(ctx, events)
	if err != nil && ctx.Err() != nil {
		if c.stop.Err() != nil {
			return nil, fmt.Errorf("groupcommit: cancelled at shutdown: %w: %w", store.ErrUnavailable, err)
		}
		return nil, fmt.Errorf("%w after %s: %w", ErrTimeout, c.timeout, err)
	}
	if err == nil && len(claims) != len(events) {
		err = errors.New("groupcommit: store returned a wrong number of claims")
	}
	return claims, err
}
