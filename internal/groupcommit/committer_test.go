package groupcommit_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/groupcommit"
	"github.com/oncehook/oncehook/store"
	"github.com/oncehook/oncehook/store/sqlite"
)

func ev(key string) store.NewEvent {
	return store.NewEvent{Source: "s", Key: key, Body: []byte("{}"), ReceivedAt: time.Now(), ExpiresAt: time.Now().Add(time.Hour), Destinations: []string{"d"}}
}

// openStore opens a SQLite store in the test's temp dir, closed when the
// test ends (after the committer the test defers closing).
func openStore(t *testing.T) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "gc.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Concurrent callers share transactions, and each still gets its own
// verdicts, in order.
func TestConcurrentClaimsShareCommitsAndGetTheirOwnVerdicts(t *testing.T) {
	s := openStore(t)
	var commits atomic.Int64
	c := groupcommit.New(func(ctx context.Context, b store.Batch) (store.Committed, error) {
		commits.Add(1)
		return s.Commit(ctx, b)
	}, groupcommit.Options{})
	defer c.Close()

	const callers, perCaller = 64, 20
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range perCaller {
				// Every caller claims its own key and one shared with all.
				mine, shared := fmt.Sprintf("c%d-%d", i, j), fmt.Sprintf("shared-%d", j)
				claims, err := c.Claim(context.Background(), []store.NewEvent{ev(mine), ev(shared)})
				if err != nil {
					errs <- err
					return
				}
				if len(claims) != 2 || claims[0].Duplicate {
					errs <- fmt.Errorf("%s: claims %+v", mine, claims)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	st, _ := s.Stats(context.Background())
	if want := int64(callers*perCaller + perCaller); st.Events != want || st.Pending != want {
		t.Fatalf("stored %d, %d deliveries; want %d", st.Events, st.Pending, want)
	}
	if n := commits.Load(); n >= callers*perCaller {
		t.Fatalf("%d commits for %d claims: nothing was shared", n, callers*perCaller)
	}
	t.Logf("%d claims in %d commits", callers*perCaller, commits.Load())
}

// Lingering is for load: a lone request after a quiet spell is committed
// at once, not after the linger.
func TestALoneClaimDoesNotLinger(t *testing.T) {
	var commits atomic.Int64
	c := groupcommit.New(func(_ context.Context, b store.Batch) (store.Committed, error) {
		commits.Add(1)
		return store.Committed{Claims: make([]store.Claim, len(b.Events))}, nil
	}, groupcommit.Options{Linger: time.Hour})
	defer c.Close()
	for i := range 3 {
		start := time.Now()
		if _, err := c.Claim(context.Background(), []store.NewEvent{ev(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took > time.Second {
			t.Fatalf("claim %d took %s: a lone request lingered", i, took)
		}
	}
	if commits.Load() != 3 {
		t.Fatalf("%d commits, want 3", commits.Load())
	}
}

func TestFailedCommitFailsEveryCallerInIt(t *testing.T) {
	boom := errors.New("disk on fire")
	c := groupcommit.New(func(context.Context, store.Batch) (store.Committed, error) { return store.Committed{}, boom }, groupcommit.Options{})
	defer c.Close()
	if _, err := c.Claim(context.Background(), []store.NewEvent{ev("a")}); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
}

func TestClaimAfterCloseFails(t *testing.T) {
	c := groupcommit.New(func(_ context.Context, b store.Batch) (store.Committed, error) {
		return store.Committed{Claims: make([]store.Claim, len(b.Events))}, nil
	}, groupcommit.Options{})
	c.Close()
	if _, err := c.Claim(context.Background(), []store.NewEvent{ev("a")}); !errors.Is(err, groupcommit.ErrClosed) {
		t.Fatalf("err = %v", err)
	}
}

// Close commits what is already queued: a caller waiting when shutdown
// begins still gets its verdict.
func TestCloseCommitsWhatIsQueued(t *testing.T) {
	release := make(chan struct{})
	var committed atomic.Int64
	c := groupcommit.New(func(_ context.Context, b store.Batch) (store.Committed, error) {
		<-release
		committed.Add(int64(len(b.Events)))
		return store.Committed{Claims: make([]store.Claim, len(b.Events))}, nil
	}, groupcommit.Options{})
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := c.Claim(context.Background(), []store.NewEvent{ev(fmt.Sprint(i))})
			errs <- err
		}()
	}
	time.Sleep(50 * time.Millisecond) // all ten queued or in the first commit
	go func() { time.Sleep(20 * time.Millisecond); close(release) }()
	c.Close()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if committed.Load() != 10 {
		t.Fatalf("committed %d of 10", committed.Load())
	}
}

// Invariant 13: one request that carries what the store refuses (here a
// source whose destinations repeat a name, which breaks UNIQUE(event_id,
// destination)) fails alone; the 180 healthy requests committed in the same
// batches still get their verdicts. Before, 168 of them got its error.
func TestOneBadRequestFailsOnlyItself(t *testing.T) {
	s := openStore(t)
	var outcomes, failures atomic.Int64
	c := groupcommit.New(s.Commit, groupcommit.Options{Linger: 5 * time.Millisecond, Outcome: func(err error) {
		outcomes.Add(1)
		if err != nil {
			failures.Add(1)
		}
	}})
	defer c.Close()
	const requests = 200
	var wg sync.WaitGroup
	errs := make([]error, requests)
	start := make(chan struct{})
	for i := range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := ev(fmt.Sprintf("k%d", i))
			if i%10 == 0 {
				e.Destinations = []string{"app", "app"}
			}
			<-start
			_, errs[i] = c.Claim(context.Background(), []store.NewEvent{e})
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		bad := i%10 == 0
		if bad && !errors.Is(err, store.ErrRejected) {
			t.Errorf("bad request %d: %v, want ErrRejected", i, err)
		}
		if !bad && err != nil {
			t.Errorf("healthy request %d: %v", i, err)
		}
	}
	if st, _ := s.Stats(context.Background()); st.Events != requests-requests/10 {
		t.Fatalf("stored %d events, want %d", st.Events, requests-requests/10)
	}
	if failures.Load() != requests/10 {
		t.Errorf("%d of %d commits failed, want exactly the %d bad requests", failures.Load(), outcomes.Load(), requests/10)
	}
}

// Batches are bounded by bytes as well as events; a request larger than the
// bound still commits, alone.
func TestBatchesAreBoundedByBytes(t *testing.T) {
	var mu sync.Mutex
	var sizes []int
	release := make(chan struct{})
	c := groupcommit.New(func(_ context.Context, b store.Batch) (store.Committed, error) {
		<-release
		n := 0
		for _, e := range b.Events {
			n += len(e.Body)
		}
		mu.Lock()
		sizes = append(sizes, n)
		mu.Unlock()
		return store.Committed{Claims: make([]store.Claim, len(b.Events))}, nil
	}, groupcommit.Options{MaxBatchBytes: 1000})
	defer c.Close()
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := ev(fmt.Sprint(i))
			e.Body = make([]byte, 300)
			if i == 11 {
				e.Body = make([]byte, 5000) // over the bound on its own
			}
			if _, err := c.Claim(context.Background(), []store.NewEvent{e}); err != nil {
				t.Error(err)
			}
		}()
	}
	time.Sleep(50 * time.Millisecond) // all queued behind the first commit
	close(release)
	wg.Wait()
	total := 0
	for _, n := range sizes {
		total += n
		if n > 1000 && n != 5000 && n != 5300 {
			t.Errorf("a batch of %d bytes", n)
		}
	}
	if total != 11*300+5000 {
		t.Fatalf("committed %d bytes in %v", total, sizes)
	}
}

// A commit that hangs (a dead connection) fails its requests with 503
// after CommitTimeout instead of holding intake forever, and Close is
// bounded too.
func TestHungCommitTimesOutAndCloseIsBounded(t *testing.T) {
	c := groupcommit.New(func(ctx context.Context, _ store.Batch) (store.Committed, error) {
		<-ctx.Done()
		return store.Committed{}, ctx.Err()
	}, groupcommit.Options{CommitTimeout: 100 * time.Millisecond, CloseTimeout: 100 * time.Millisecond})
	start := time.Now()
	_, err := c.Claim(context.Background(), []store.NewEvent{ev("a")})
	if !errors.Is(err, groupcommit.ErrTimeout) || !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrTimeout (unavailable)", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the timeout took %s", took)
	}
	c.Close()

	hung := groupcommit.New(func(ctx context.Context, _ store.Batch) (store.Committed, error) {
		<-ctx.Done()
		return store.Committed{}, ctx.Err()
	}, groupcommit.Options{CommitTimeout: time.Hour, CloseTimeout: 100 * time.Millisecond})
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := hung.Claim(context.Background(), []store.NewEvent{ev("b")})
			errs <- err
		}()
	}
	time.Sleep(50 * time.Millisecond)
	start = time.Now()
	hung.Close()
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("Close took %s with a hung commit", took)
	}
	for range 3 {
		if err := <-errs; !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("a request cut at shutdown: %v, want unavailable (503)", err)
		}
	}
}

// CommitTimeout bounds a request's whole wait, from the moment it asks, as
// the README's table of answers says (503 after 30 s): not the wait for its
// own commit after the writer was free. With the store hung (a network that
// drops packets), a request that came while the writer was stuck on an
// earlier commit waited for that one to time out and then for its own: 59 s
// on PostgreSQL for the documented 30.
func TestARequestWaitsAtMostCommitTimeoutInAll(t *testing.T) {
	const timeout = time.Second
	c := groupcommit.New(func(ctx context.Context, _ store.Batch) (store.Committed, error) {
		<-ctx.Done()
		return store.Committed{}, ctx.Err()
	}, groupcommit.Options{CommitTimeout: timeout, CloseTimeout: 100 * time.Millisecond})
	defer c.Close()
	first := make(chan error, 1)
	go func() {
		_, err := c.Claim(context.Background(), []store.NewEvent{ev("a")})
		first <- err
	}()
	time.Sleep(600 * time.Millisecond) // the writer is stuck on a's commit
	start := time.Now()
	_, err := c.Claim(context.Background(), []store.NewEvent{ev("b")})
	took := time.Since(start)
	if !errors.Is(err, groupcommit.ErrTimeout) || !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrTimeout (unavailable: 503)", err)
	}
	if took > timeout+250*time.Millisecond {
		t.Fatalf("the request was answered after %s, over CommitTimeout (%s)", took.Round(time.Millisecond), timeout)
	}
	if err := <-first; !errors.Is(err, groupcommit.ErrTimeout) {
		t.Fatalf("the first request: %v", err)
	}
}

// fakeWorker is a Receiver with a fixed amount of room.
type fakeWorker struct {
	mu     sync.Mutex
	room   int
	handed []store.LeasedDelivery
}

func (w *fakeWorker) Reserve(n int) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := min(n, w.room)
	w.room -= k
	return k
}

func (w *fakeWorker) Hand(ds []store.LeasedDelivery, reserved int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.handed = append(w.handed, ds...)
	w.room += reserved - len(ds)
}

func (w *fakeWorker) take() []store.LeasedDelivery {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.handed
	w.handed = nil
	w.room += len(out)
	return out
}

// The hand-off is bounded by the worker's room: of 5 new deliveries, the 2
// it has room for are handed over with their bodies; the other 3 wait in the
// store, unleased and due, and are leased (read back) once it has room.
func TestHandOffIsBoundedByTheWorkersRoom(t *testing.T) {
	s := openStore(t)
	c := groupcommit.New(s.Commit, groupcommit.Options{})
	defer c.Close()
	w := &fakeWorker{room: 2}
	c.Attach(w)
	evs := make([]store.NewEvent, 5)
	for i := range evs {
		evs[i] = ev(fmt.Sprint("k", i))
	}
	if _, err := c.Claim(context.Background(), evs); err != nil {
		t.Fatal(err)
	}
	first := w.take()
	if len(first) != 2 || string(first[0].Body) != "{}" || first[0].Attempt != 1 {
		t.Fatalf("handed %+v, want 2 deliveries with their bodies", first)
	}
	st, _ := s.Stats(context.Background())
	if st.Pending != 5 {
		t.Fatalf("stats %+v", st)
	}
	// The worker finishes both: their outcomes free room, and the next
	// commit records them and leases the rest.
	for _, d := range first {
		c.Complete(store.Outcome{DeliveryID: d.ID, LeaseToken: d.LeaseToken, Kind: store.OutcomeDelivered, Attempt: 1})
	}
	got := 0
	if !testenvWaitFor(5*time.Second, func() bool {
		for _, d := range w.take() {
			got++
			if string(d.Body) != "{}" {
				t.Errorf("leased later without its body: %+v", d)
			}
			c.Complete(store.Outcome{DeliveryID: d.ID, LeaseToken: d.LeaseToken, Kind: store.OutcomeDelivered, Attempt: 1})
		}
		return got == 3
	}) {
		t.Fatalf("the 3 deliveries without room were not leased later (%d)", got)
	}
	if !testenvWaitFor(5*time.Second, func() bool { st, _ := s.Stats(context.Background()); return st.Delivered == 5 }) {
		st, _ := s.Stats(context.Background())
		t.Fatalf("stats %+v: want all 5 delivered", st)
	}
}

// An outcome is not worth a commit of its own: it rides the next commit
// intake makes, or one OutcomeDelay later.
func TestOutcomesRideIntakesCommits(t *testing.T) {
	s := openStore(t)
	var batches []store.Batch
	var mu sync.Mutex
	c := groupcommit.New(func(ctx context.Context, b store.Batch) (store.Committed, error) {
		mu.Lock()
		batches = append(batches, b)
		mu.Unlock()
		return s.Commit(ctx, b)
	}, groupcommit.Options{OutcomeDelay: time.Hour})
	defer c.Close()
	w := &fakeWorker{room: 10}
	c.Attach(w)
	time.Sleep(50 * time.Millisecond) // the tick Attach asks for (due deliveries) is over
	if _, err := c.Claim(context.Background(), []store.NewEvent{ev("a")}); err != nil {
		t.Fatal(err)
	}
	d := w.take()[0]
	c.Complete(store.Outcome{DeliveryID: d.ID, LeaseToken: d.LeaseToken, Kind: store.OutcomeDelivered, Attempt: 1})
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	n := len(batches)
	mu.Unlock()
	if _, err := c.Claim(context.Background(), []store.NewEvent{ev("b")}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	last := batches[len(batches)-1]
	if len(batches) != n+1 || len(last.Events) != 1 || len(last.Outcomes) != 1 {
		t.Fatalf("the outcome was committed on its own (%d commits; last %d events, %d outcomes)", len(batches)-n, len(last.Events), len(last.Outcomes))
	}
	if st, _ := s.Stats(context.Background()); st.Delivered != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func testenvWaitFor(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return cond()
}

// Invariant 13 for outcomes: one outcome the store refuses fails only
// itself. With 20 outcomes in one tick, the one the store refuses (here an
// outcome kind it does not know) is the only one not recorded; the 19
// others are recorded, each once, and nothing is committed again and again.
// It holds whether the tick carries claims or not. Before, the split
// dropped the 19 with it (sent again when their leases expired), and a tick
// of outcomes alone was retried as a whole every second, holding every
// destination's outcomes and leases.
func TestARefusedOutcomeFailsOnlyItself(t *testing.T) {
	for _, withClaim := range []bool{false, true} {
		t.Run(fmt.Sprintf("with a claim %v", withClaim), func(t *testing.T) {
			s := openStore(t)
			var mu sync.Mutex
			committed := map[int64]int{} // delivery: commits that recorded its outcome
			var bad int64
			var tried atomic.Int64 // commits that carried the refused outcome
			c := groupcommit.New(func(ctx context.Context, b store.Batch) (store.Committed, error) {
				mu.Lock()
				for _, o := range b.Outcomes {
					if o.DeliveryID == bad {
						tried.Add(1)
					}
				}
				mu.Unlock()
				res, err := s.Commit(ctx, b)
				if err == nil {
					mu.Lock()
					for _, o := range b.Outcomes {
						committed[o.DeliveryID]++
					}
					mu.Unlock()
				}
				return res, err
			}, groupcommit.Options{OutcomeDelay: time.Hour, MaxLease: 64})
			defer c.Close()
			w := &fakeWorker{room: 64}
			c.Attach(w)
			const n = 20
			events := make([]store.NewEvent, n)
			for i := range events {
				events[i] = ev(fmt.Sprintf("k%d", i))
			}
			if _, err := c.Claim(context.Background(), events); err != nil {
				t.Fatal(err)
			}
			ds := w.take()
			if len(ds) != n {
				t.Fatalf("handed %d deliveries, want %d", len(ds), n)
			}
			mu.Lock()
			bad = ds[n/2].ID
			mu.Unlock()
			outcomes := make([]store.Outcome, n)
			for i, d := range ds {
				outcomes[i] = store.Outcome{DeliveryID: d.ID, LeaseToken: d.LeaseToken, Kind: store.OutcomeDelivered, Attempt: 1, StartedAt: time.Now()}
				if d.ID == bad {
					outcomes[i].Kind = store.OutcomeKind(99)
				}
			}
			c.Complete(outcomes...)
			if withClaim {
				if _, err := c.Claim(context.Background(), []store.NewEvent{ev("other")}); err != nil {
					t.Fatalf("a claim in the tick of a refused outcome: %v", err)
				}
			} else {
				c.WantDue() // a tick of outcomes alone
			}
			if !testenvWaitFor(5*time.Second, func() bool {
				st, _ := s.Stats(context.Background())
				return st.Delivered == n-1
			}) {
				st, _ := s.Stats(context.Background())
				t.Fatalf("delivered %d, want the %d outcomes the store accepts", st.Delivered, n-1)
			}
			time.Sleep(2500 * time.Millisecond) // a tick retried after failures would show by now
			mu.Lock()
			defer mu.Unlock()
			for _, d := range ds {
				if want := map[bool]int{true: 0, false: 1}[d.ID == bad]; committed[d.ID] != want {
					t.Errorf("delivery %d: its outcome committed %d times, want %d", d.ID, committed[d.ID], want)
				}
			}
			// The tick, its worker's side, then halves down to the refused
			// outcome alone: 7 commits carry it (20, 10, 5, 2, 1), and no
			// more come after.
			if n := tried.Load(); n > 7 {
				t.Errorf("%d commits carried the refused outcome, want at most 7: it is retried", n)
			}
		})
	}
}
