// Package groupcommit is oncehook's writer: every write the gateway makes in
// its hot path goes through it, and many share one durable commit.
//
// A durable commit costs an fsync, and an fsync costs the same for one event
// as for two hundred. So nothing commits on its own. Intake hands its events
// to the Committer and waits; the delivery worker hands it the outcomes of
// its attempts and asks it for deliveries. Each tick, a writer takes
// everything queued and commits it as one store.Batch: the claims, the
// outcomes, and the leases of deliveries for the worker, in one transaction.
// Then it wakes each request with its own verdicts and hands the worker the
// deliveries leased to it, with their bodies: a new event's delivery is
// created already leased to this process (the hand-off), so it needs no
// lease transaction and no read of its own, and its outcome rides the next
// commit. Each request still waits for the commit that holds its events;
// only the cost is shared. Under light load a batch is a single request and
// nothing waits for company.
//
// The hand-off is bounded by the worker's free room (Receiver.Reserve): what
// the worker cannot take now is stored unleased and due, for any worker, so
// memory never grows with a backlog. The store stays the source of truth: a
// crash leaves leases that expire and are taken over.
package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/oncehook/oncehook/internal/lease"
	"github.com/oncehook/oncehook/store"
)

// ErrClosed is returned for claims submitted after Close.
var ErrClosed = errors.New("groupcommit: committer closed")

// ErrTimeout is returned, wrapping store.ErrUnavailable, when a commit did
// not finish within CommitTimeout: a hung connection must not hold intake
// (or shutdown) forever.
var ErrTimeout = fmt.Errorf("groupcommit: commit timed out: %w", store.ErrUnavailable)

// CommitFunc commits a batch: a store's Commit.
type CommitFunc func(ctx context.Context, b store.Batch) (store.Committed, error)

// Stats is an accumulator of hourly counters.
type Stats interface {
	Take() []store.StatDelta
	Restore([]store.StatDelta)
}

// Copies is an accumulator of duplicates per stored event; they ride the
// same commits as the Stats, at the same pace.
type Copies interface {
	Take() []store.Copy
	Restore([]store.Copy)
}

// Receiver is the delivery worker, as the writer sees it.
type Receiver interface {
	// Reserve reserves room for up to n deliveries and says how many it
	// reserved (0 when the worker is full or stopping).
	Reserve(n int) int
	// Hand gives the worker the deliveries a commit leased to it, and
	// gives back the part of the reservation they did not use.
	Hand(ds []store.LeasedDelivery, reserved int)
}

type request struct {
	events  []store.NewEvent
	effects []store.EffectOp
	bytes   int
	done    chan result
}

type result struct {
	claims  []store.Claim
	effects []store.EffectResult
	err     error
}

// Committer batches the gateway's writes into shared transactions.
type Committer struct {
	commitFn CommitFunc
	maxBatch int
	maxBytes int
	maxLease int
	timeout  time.Duration
	lease    time.Duration
	now      func() time.Time
	queue    chan *request
	observe  func(events int)
	outcome  func(err error)
	linger   time.Duration
	log      *slog.Logger

	// running holds the start of each commit in progress (one per
	// writer), for Stuck.
	runningMu sync.Mutex
	running   map[uint64]time.Time
	runs      uint64

	// What the delivery worker asked for, taken by the next tick.
	work     sync.Mutex
	outcomes []store.Outcome
	due      uint64 // incremented by WantDue: a tick clears "due" only if no new ask came meanwhile
	dueDone  uint64 // the due generation the last short lease satisfied
	holdTill time.Time
	lastWait time.Duration
	// outcomeTimer commits queued outcomes after outcomeDelay when no
	// claim has carried them by then.
	outcomeTimer *time.Timer
	outcomeDelay time.Duration
	stats        Stats
	copies       Copies
	statsEvery   time.Duration
	statsAt      time.Time // when a commit last took the stats (under work)
	shard        string
	flush        *time.Ticker
	held         func() []string
	receiver     Receiver
	dueTimer     *time.Timer
	dueAt        time.Time
	signal       chan struct{}

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
	Writers       int              // concurrent transactions (default 1: SQLite has one writer)
	Observe       func(events int) // optional: told each batch's size, for metrics
	// Linger is how long a writer under load waits for more requests
	// before committing (only after a commit that carried several). On a
	// CPU-bound machine, fewer and bigger commits leave more CPU for
	// requests: 300µs raised durable SQLite intake from 35% to 41% of bare
	// net/http (see BENCHMARKS.md). Zero: commit whatever is queued.
	Linger time.Duration
	// CommitTimeout bounds one commit (default 30s). A commit that takes
	// longer fails its requests with ErrTimeout (503): the transaction
	// itself is cancelled, so nothing it held is acknowledged.
	CommitTimeout time.Duration
	// CloseTimeout bounds how long Close lets queued commits run (default
	// 10s); then they are cancelled, and their requests fail (503).
	CloseTimeout time.Duration
	// Outcome, when set, is told the result of every commit: nil, or the
	// error its requests got. Readiness reads it: a store that answers
	// pings may still refuse commits.
	Outcome func(err error)
	// Lease is how long a delivery leased to the Receiver is its own
	// (default 1 minute); MaxLease, the most one commit leases (default 256).
	Lease    time.Duration
	MaxLease int
	// OutcomeDelay is the longest an outcome waits for a commit that
	// intake makes anyway (default 10ms).
	OutcomeDelay time.Duration
	// Stats, when set, is where the hourly rollups accumulate: the first
	// commit after StatsEvery (default 1s) takes what is there (and gives
	// it back if it fails), and a quiet writer commits them every
	// FlushEvery (default 10s). Taking them at most once a second keeps
	// their upserts off nearly every commit: a dozen counters per commit,
	// hundreds of commits a second, cost the single writer ≈5% of intake.
	// Shard names this process's rows; each writer adds its index.
	Stats      Stats
	Copies     Copies
	Shard      string
	StatsEvery time.Duration
	FlushEvery time.Duration
	// Held, when set, names the destinations whose deliveries wait now
	// (internal/hold decides): they are neither handed off nor leased.
	Held   func() []string
	Now    func() time.Time
	Logger *slog.Logger
}

// New starts a Committer's writers.
func New(commit CommitFunc, opts Options) *Committer {
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
	if opts.Lease <= 0 {
		opts.Lease = lease.Default(0) // the gateway gives the worker's
	}
	if opts.MaxLease <= 0 {
		opts.MaxLease = 256
	}
	if opts.OutcomeDelay <= 0 {
		opts.OutcomeDelay = 10 * time.Millisecond
	}
	if opts.StatsEvery <= 0 {
		opts.StatsEvery = time.Second
	}
	if opts.FlushEvery <= 0 {
		opts.FlushEvery = 10 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Committer{
		commitFn:     commit,
		maxBatch:     opts.MaxBatch,
		maxBytes:     opts.MaxBatchBytes,
		maxLease:     opts.MaxLease,
		timeout:      opts.CommitTimeout,
		lease:        opts.Lease,
		now:          opts.Now,
		queue:        make(chan *request, 4*opts.MaxBatch),
		observe:      opts.Observe,
		outcome:      opts.Outcome,
		linger:       opts.Linger,
		log:          opts.Logger,
		signal:       make(chan struct{}, 1),
		closeWait:    opts.CloseTimeout,
		outcomeDelay: opts.OutcomeDelay,
		stats:        opts.Stats,
		copies:       opts.Copies,
		statsEvery:   opts.StatsEvery,
		shard:        opts.Shard,
		held:         opts.Held,
	}
	c.stop, c.cancel = context.WithCancel(context.Background())
	for i := range opts.Writers {
		c.wg.Add(1)
		go c.write(fmt.Sprintf("%s/%d", c.shard, i))
	}
	if c.stats != nil || c.copies != nil {
		c.flush = time.NewTicker(opts.FlushEvery)
		go func() {
			for {
				select {
				case <-c.stop.Done():
					return
				case <-c.flush.C:
					c.wake()
				}
			}
		}()
	}
	return c
}

// Attach names the worker that commits lease deliveries to. Without one,
// nothing is leased and every delivery waits in the store.
func (c *Committer) Attach(r Receiver) {
	c.work.Lock()
	c.receiver = r
	c.work.Unlock()
	c.WantDue()
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
	r, err := c.submit(ctx, req)
	return r.claims, err
}

// Effects submits effects-ledger operations and waits for the commit that
// applies them, as Claim does: the ledger rides the same group commit as
// intake, one fsync for many claims and completions. If ctx ends first,
// the operations may still be committed.
func (c *Committer) Effects(ctx context.Context, ops []store.EffectOp) ([]store.EffectResult, error) {
	req := &request{effects: ops, done: make(chan result, 1)}
	for _, op := range ops {
		req.bytes += len(op.Result)
	}
	r, err := c.submit(ctx, req)
	return r.effects, err
}

// submit queues req and waits for its commit's answer, at most CommitTimeout
// in all: a request that comes while the writers are stuck on a hung store
// must not wait for their commits to time out and then for its own (59 s on
// PostgreSQL for the 30 s the answers promise). Timed out in the queue, req
// may still be committed later; its answer was 503, and the provider's
// retry is then a duplicate.
func (c *Committer) submit(ctx context.Context, req *request) (result, error) {
	deadline := time.NewTimer(c.timeout)
	defer deadline.Stop()
	c.mu.RLock()
	if c.closed {
		c.mu.RUnlock()
		return result{}, ErrClosed
	}
	select {
	case c.queue <- req:
		c.mu.RUnlock()
	case <-ctx.Done():
		c.mu.RUnlock()
		return result{}, ctx.Err()
	case <-deadline.C:
		c.mu.RUnlock()
		return result{}, fmt.Errorf("%w after %s: the writers are busy", ErrTimeout, c.timeout)
	}
	select {
	case r := <-req.done:
		return r, r.err
	case <-ctx.Done():
		return result{}, ctx.Err()
	case <-deadline.C:
		return result{}, fmt.Errorf("%w after %s", ErrTimeout, c.timeout)
	}
}

// Complete queues outcomes for the next commit. It never blocks. The worker
// sends each attempt's outcome here; until it commits, the delivery stays
// leased, so a crash in between only repeats that attempt.
//
// An outcome is not worth a commit of its own: nobody waits for it, and
// its lease holds it for a long while. So it rides the next commit intake
// makes anyway, or, when intake is quiet, a commit OutcomeDelay later (at
// once when many are queued). Measured: waking the writer for every outcome
// added a commit (an fsync) between intake's, and cost 10% of intake with a
// destination.
//
// An ordered outcome is waited for: its entity's next delivery goes only
// once it is committed, one at a time. It waits at most orderedDelay, so
// that one hot entity moves at a commit's pace, not OutcomeDelay's.
func (c *Committer) Complete(outcomes ...store.Outcome) {
	c.work.Lock()
	c.outcomes = append(c.outcomes, outcomes...)
	n := len(c.outcomes)
	delay := c.outcomeDelay
	if slices.ContainsFunc(outcomes, func(o store.Outcome) bool { return o.Ordered }) && delay > orderedDelay {
		delay = orderedDelay
		if c.outcomeTimer != nil && c.outcomeTimer.Stop() {
			c.outcomeTimer = nil // re-armed sooner below
		}
	}
	arm := c.outcomeTimer == nil && n < c.maxLease
	if arm {
		c.outcomeTimer = time.AfterFunc(delay, c.outcomesDue)
	}
	c.work.Unlock()
	if n >= c.maxLease {
		c.wake()
	}
}

// orderedDelay is the longest an ordered outcome waits for a commit.
const orderedDelay = time.Millisecond

func (c *Committer) outcomesDue() {
	c.work.Lock()
	c.outcomeTimer = nil
	c.work.Unlock()
	c.wake()
}

// WantDue asks the next commit to lease deliveries that are due in the
// store (a backlog, retries, replays, another replica's expired leases), as
// far as the worker has room.
func (c *Committer) WantDue() {
	c.work.Lock()
	c.due++
	c.work.Unlock()
	c.wake()
}

func (c *Committer) wake() {
	select {
	case c.signal <- struct{}{}:
	default:
	}
}

// wantDueAt asks for due deliveries at t: when a retry committed now falls
// due. One timer serves the earliest such time.
func (c *Committer) wantDueAt(t time.Time) {
	c.work.Lock()
	defer c.work.Unlock()
	if c.dueTimer != nil && !c.dueAt.After(t) {
		return
	}
	if c.dueTimer != nil {
		c.dueTimer.Stop()
	}
	c.dueAt = t
	c.dueTimer = time.AfterFunc(max(time.Until(t), 0), func() {
		c.work.Lock()
		c.dueTimer = nil
		c.work.Unlock()
		c.WantDue()
	})
}

// Close stops accepting claims, commits everything already queued (claims
// and outcomes), and waits for the writers to finish: at most CloseTimeout,
// after which the commits still running are cancelled and what is left
// fails fast. Stop the worker first: its last outcomes must commit here.
func (c *Committer) Close() {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.queue)
	}
	c.mu.Unlock()
	if c.flush != nil {
		c.flush.Stop()
	}
	c.work.Lock()
	c.receiver = nil
	if c.dueTimer != nil {
		c.dueTimer.Stop()
	}
	if c.outcomeTimer != nil {
		c.outcomeTimer.Stop()
	}
	c.work.Unlock()
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

// tick is what one commit carries besides claims.
type tick struct {
	outcomes []store.Outcome
	dueGen   uint64 // the due generation asked for; 0: no due lease
	receiver Receiver
	reserved int
	stats    []store.StatDelta
	copies   []store.Copy
	shard    string
	held     []string
}

// take collects the worker's side of a tick: its outcomes, whether it asked
// for due deliveries, and room reserved for what this commit leases: the
// deliveries its events may create, and more when due ones are asked for.
// (Reserving only that leaves room for a second writer's hand-off.)
func (c *Committer) take(events []store.NewEvent, final bool) tick {
	c.work.Lock()
	defer c.work.Unlock()
	var t tick
	if !final && c.now().Before(c.holdTill) {
		return t // backing off after failures; claims still go through
	}
	if now := c.now(); (c.stats != nil || c.copies != nil) && (final || now.Sub(c.statsAt) >= c.statsEvery) {
		if c.stats != nil {
			t.stats = c.stats.Take()
		}
		if c.copies != nil {
			t.copies = c.copies.Take()
		}
		c.statsAt = now
	}
	if c.held != nil {
		t.held = c.held()
	}
	t.outcomes, c.outcomes = c.outcomes, nil
	if c.receiver != nil && !final {
		want := 0
		for _, e := range events {
			want += len(e.Destinations)
		}
		// An ordered outcome frees its entity's next delivery in this very
		// commit: lease it there too, rather than in a commit of its own.
		if c.due != c.dueDone || slices.ContainsFunc(t.outcomes, func(o store.Outcome) bool { return o.Ordered }) {
			t.dueGen = c.due
			want = c.maxLease
		}
		if want > 0 {
			t.receiver = c.receiver
			t.reserved = c.receiver.Reserve(min(want, c.maxLease))
		}
	}
	return t
}

func (c *Committer) write(shard string) {
	defer c.wg.Done()
	batch := make([]*request, 0, 64)
	events := make([]store.NewEvent, 0, c.maxBatch)
	var effects []store.EffectOp
	lastRequests := 0
	var next *request // a request that did not fit the last batch
	for {
		first := next
		next = nil
		if first == nil {
			select {
			case req, ok := <-c.queue:
				if !ok {
					c.commit(nil, nil, nil, c.shardOf(c.take(nil, true), shard)) // the worker's last outcomes
					return
				}
				first = req
			case <-c.signal:
				// Woken for the worker: take claims already queued too,
				// rather than commit its outcomes on their own.
				select {
				case req, ok := <-c.queue:
					if ok {
						first = req
					} else {
						c.commit(nil, nil, nil, c.shardOf(c.take(nil, true), shard))
						return
					}
				default:
				}
			}
		}
		batch, events, effects = batch[:0], events[:0], effects[:0]
		if first != nil {
			batch = append(batch, first)
			events = append(events, first.events...)
			effects = append(effects, first.effects...)
			bytes := first.bytes
			// Under load, wait a moment for company: the previous commit
			// carried several requests, so more are on their way. A lone
			// request after a quiet spell commits at once.
			var linger *time.Timer
			if c.linger > 0 && lastRequests > 1 {
				linger = time.NewTimer(c.linger)
			}
		gather:
			for len(events)+len(effects) < c.maxBatch && bytes < c.maxBytes {
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
				effects = append(effects, req.effects...)
				bytes += req.bytes
			}
			if linger != nil {
				linger.Stop()
			}
		}
		lastRequests = len(batch)
		c.commit(batch, events, effects, c.shardOf(c.take(events, false), shard))
	}
}

func (c *Committer) shardOf(t tick, shard string) tick {
	t.shard = shard
	return t
}

// commit commits one tick and answers everyone in it.
func (c *Committer) commit(batch []*request, events []store.NewEvent, effects []store.EffectOp, t tick) {
	lease := store.Lease{Max: t.reserved, Due: t.dueGen != 0, Now: c.now(), For: c.lease, Held: t.held}
	if len(events) == 0 && len(effects) == 0 && len(t.outcomes) == 0 && len(t.stats) == 0 && len(t.copies) == 0 && (lease.Max == 0 || !lease.Due) {
		if t.receiver != nil {
			t.receiver.Hand(nil, t.reserved)
		}
		return
	}
	if c.observe != nil && len(events) > 0 {
		c.observe(len(events))
	}
	res, err := c.run(store.Batch{Events: events, Outcomes: t.outcomes, Lease: lease, Effects: effects, Stats: t.stats, Copies: t.copies, Shard: t.shard})
	// A refusal is split whenever the tick carried more than one request's
	// data: the worker's outcomes count as more, even with no request at
	// all (kept and retried as a whole, one refused outcome used to hold
	// every destination's outcomes and leases, retried each second).
	if errors.Is(err, store.ErrRejected) && (len(batch) > 1 || len(t.outcomes) > 0) {
		c.split(batch, t)
		return
	}
	if c.outcome != nil {
		c.outcome(err)
	}
	if err != nil {
		for _, req := range batch {
			req.done <- result{err: err}
		}
		if t.receiver != nil {
			t.receiver.Hand(nil, t.reserved)
		}
		c.failed(t, err)
		return
	}
	// The worker first: its attempts start while the requests are answered.
	if t.receiver != nil {
		t.receiver.Hand(res.Leased, t.reserved)
	}
	created := 0
	off, effOff := 0, 0
	for _, req := range batch {
		n, m := len(req.events), len(req.effects)
		mine := res.Claims[off : off+n : off+n]
		off += n
		for i, cl := range mine {
			// An ordered delivery is handed off only when its entity is
			// free: the store says what it left due (OrderedDue).
			if !cl.Duplicate && req.events[i].Order.Entity == "" {
				created += len(req.events[i].Destinations)
			}
		}
		var effs []store.EffectResult
		if m > 0 {
			effs = res.Effects[effOff : effOff+m : effOff+m]
			effOff += m
		}
		req.done <- result{claims: mine, effects: effs}
	}
	c.settled(t, created, res.OrderedDue, len(res.Leased))
}

// settled updates what the worker is owed after a commit: deliveries left
// unleased (more were created than it had room for) or maybe still due (a
// due lease came back full) keep "due" asked; retries the commit recorded
// ask again when they fall due.
//
// orderedDue is the store's word that ordered deliveries are due now that
// it did not lease (see store.Committed): "due" is asked again at once.
func (c *Committer) settled(t tick, created int, orderedDue bool, leased int) {
	handed := min(created, t.reserved)
	ordered := orderedDue
	c.work.Lock()
	c.holdTill = time.Time{}
	switch {
	case created > handed || ordered:
		c.due++ // deliveries wait in the store, due now
	case t.dueGen != 0 && leased < t.reserved:
		c.dueDone = t.dueGen // nothing more is due: unless asked again since
	}
	c.work.Unlock()
	if ordered {
		c.wake()
	}
	for _, o := range t.outcomes {
		switch o.Kind {
		case store.OutcomeRetry:
			c.wantDueAt(o.NextAttemptAt)
		case store.OutcomeReleased:
			c.wantDueAt(o.NextAttemptAt) // due again at once, or when shutdown said
		}
	}
}

// failed keeps a failed tick's outcomes for the next one, and backs off the
// worker's side of the ticks (not the claims, which must fail fast) so that
// a store that is down is not hammered.
func (c *Committer) failed(t tick, err error) {
	c.restoreCounts(t)
	c.work.Lock()
	defer c.work.Unlock()
	c.outcomes = append(t.outcomes, c.outcomes...)
	wait := 100 * time.Millisecond
	if !c.holdTill.IsZero() {
		wait = min(2*c.lastWait, time.Second)
	}
	c.lastWait = wait
	c.holdTill = c.now().Add(wait)
	if len(c.outcomes) > 0 || c.due != c.dueDone {
		time.AfterFunc(wait, c.wake)
	}
	c.log.Warn("commit failed; outcomes kept for the next commit", "err", err, "outcomes", len(c.outcomes), "retry_in", wait)
}

// split commits a batch the store refused piece by piece (invariant 13: one
// event fails only itself): the worker's side first, then each request on
// its own, so that only the request that carries the offending data gets
// the error. When the worker's side is refused too, its outcomes are the
// suspects: the lease and the counts commit without them, and the outcomes
// commit apart (outcomesApart), so that one refused outcome is the only one
// not recorded.
func (c *Committer) split(batch []*request, t tick) {
	if len(t.outcomes) > 0 || t.reserved > 0 || len(t.stats) > 0 || len(t.copies) > 0 {
		res, err := c.run(c.workerSide(t))
		suspects := t.outcomes
		if errors.Is(err, store.ErrRejected) && len(t.outcomes) > 0 {
			t.outcomes = nil
			if t.reserved > 0 || len(t.stats) > 0 || len(t.copies) > 0 {
				res, err = c.run(c.workerSide(t))
			} else {
				res, err = store.Committed{}, nil
			}
		} else {
			suspects = nil
		}
		switch {
		case errors.Is(err, store.ErrRejected):
			c.log.Error("the store refused a commit's rollups or copies; they are kept for a later commit", "err", err)
			c.restoreCounts(t)
			if t.receiver != nil {
				t.receiver.Hand(nil, t.reserved)
			}
		case err != nil:
			if t.receiver != nil {
				t.receiver.Hand(nil, t.reserved)
			}
			c.failed(t, err)
		default:
			c.settled(t, 0, res.OrderedDue, len(res.Leased))
			if t.receiver != nil {
				t.receiver.Hand(res.Leased, t.reserved)
			}
		}
		if len(suspects) > 0 {
			c.outcomesApart(suspects, t.shard)
		}
	}
	for _, req := range batch {
		c.commit([]*request{req}, req.events, req.effects, tick{shard: t.shard})
	}
}

// workerSide is a tick's batch without requests.
func (c *Committer) workerSide(t tick) store.Batch {
	return store.Batch{Outcomes: t.outcomes, Lease: store.Lease{Max: t.reserved, Due: t.dueGen != 0, Now: c.now(), For: c.lease, Held: t.held},
		Stats: t.stats, Copies: t.copies, Shard: t.shard}
}

// outcomesApart commits outcomes the store refused together, in halves,
// until the refused ones stand alone. A refused outcome alone is dropped
// and logged: its lease expires and its delivery is attempted again, under
// the same Idempotency-Key. The others are recorded once, here, and never
// sent again. (Refusals are rare, a value no column holds: a few commits
// more is their whole cost.)
func (c *Committer) outcomesApart(outcomes []store.Outcome, shard string) {
	t := tick{outcomes: outcomes, shard: shard}
	res, err := c.run(store.Batch{Outcomes: outcomes, Shard: shard})
	switch {
	case err == nil:
		c.settled(t, 0, res.OrderedDue, 0)
	case !errors.Is(err, store.ErrRejected):
		c.failed(t, err)
	case len(outcomes) == 1:
		o := outcomes[0]
		c.log.Error("the store refused a delivery outcome; the delivery will be attempted again when its lease expires",
			"err", err, "delivery", o.DeliveryID, "attempt", o.Attempt, "outcome", o.Kind.String())
	default:
		half := len(outcomes) / 2
		c.outcomesApart(outcomes[:half:half], shard)
		c.outcomesApart(outcomes[half:], shard)
	}
}

// run commits one batch. The transaction is not tied to any one request's
// context: a caller that gives up must not abort the commit the others are
// waiting for. It has a deadline of its own instead, and ends at a
// timed-out Close.
func (c *Committer) run(b store.Batch) (store.Committed, error) {
	ctx, cancel := context.WithTimeout(c.stop, c.timeout)
	defer cancel()
	c.runningMu.Lock()
	if c.running == nil {
		c.running = map[uint64]time.Time{}
	}
	c.runs++
	id := c.runs
	c.running[id] = time.Now()
	c.runningMu.Unlock()
	res, err := c.commitFn(ctx, b)
	c.runningMu.Lock()
	delete(c.running, id)
	c.runningMu.Unlock()
	if err != nil && ctx.Err() != nil {
		if c.stop.Err() != nil {
			return store.Committed{}, fmt.Errorf("groupcommit: cancelled at shutdown: %w: %w", store.ErrUnavailable, err)
		}
		return store.Committed{}, fmt.Errorf("%w after %s: %w", ErrTimeout, c.timeout, err)
	}
	if err == nil && (len(res.Claims) != len(b.Events) || len(res.Effects) != len(b.Effects)) {
		err = errors.New("groupcommit: store returned a wrong number of claims or effect results")
	}
	if err == nil && len(res.Deferred) > 0 && c.copies != nil {
		// Copies whose rows another transaction holds: counted by a
		// later commit, rather than this one waiting for it.
		c.copies.Restore(res.Deferred)
	}
	return res, err
}

// Stuck is how long the oldest commit in progress has waited for the
// store (0 when none is): a commit that neither succeeds nor fails (a
// lock held elsewhere, a database that stopped answering mid-statement)
// reports no outcome until its timeout, while the requests it carries,
// and those queued behind it, wait. Readiness reads it.
func (c *Committer) Stuck() time.Duration {
	c.runningMu.Lock()
	defer c.runningMu.Unlock()
	var oldest time.Time
	for _, at := range c.running {
		if oldest.IsZero() || at.Before(oldest) {
			oldest = at
		}
	}
	if oldest.IsZero() {
		return 0
	}
	return time.Since(oldest)
}

// restoreCounts gives a tick's rollups and copies back to their
// accumulators, for a later commit: a failed commit loses no count.
func (c *Committer) restoreCounts(t tick) {
	if c.stats != nil {
		c.stats.Restore(t.stats)
	}
	if c.copies != nil {
		c.copies.Restore(t.copies)
	}
}
