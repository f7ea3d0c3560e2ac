// Package pull is the destination kind whose deliveries wait to be taken:
// a laptop behind NAT (`oncehook listen`), a service with no inbound port.
//
// It is a deliver.Sender like HTTP's POST, so the worker decides what is
// due exactly as it does for any destination: it leases, holds (pause,
// rate, the breaker, its share of the worker's concurrency), keeps each
// FIFO entity to one delivery in flight, builds the attempt's message
// (headers, transformation, traceparent) and records the classified
// outcome (retries with backoff, dead letters). Only the last step
// differs: Send offers the message to the destination's consumers and
// returns when one acks it (its local outcome, classified as an HTTP
// status is), when the consumer's lease on it expires (a retry: the next
// attempt, same key), or when nobody takes it (released: no attempt
// spent).
//
// A destination nobody is pulling from is held (Hub.Idle, which the
// gateway adds to the holds): the worker leases nothing for it, so a
// backlog waits in the store, not in memory, and survives restarts.
// A pull makes it wanted and wakes the worker; it stays wanted for
// Linger after the last pull ends, so a consumer's next pull finds the
// deliveries already offered.
//
// A lease is kept in the store as well as in the process that handed it
// out (Options.Store): the worker's lease on the delivery passes to the
// consumer's token and expiry. An ack that reaches that process ends its
// Send at once; one that reaches another replica is checked against the
// store and recorded there by that replica's worker (Options.Record),
// under the consumer's token, which the store fences as any outcome; the
// process that handed it out finds it recorded when the lease ends. A
// lease whose gateway died is due in the store at its expiry, and any
// replica's worker leases it again, as its next attempt, same key.
package pull

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oncehook/oncehook/deliver"
	"github.com/oncehook/oncehook/store"
)

// Linger is how long a destination stays wanted after its last pull
// ended: a consumer forwarding its batch pulls again within it.
const Linger = 3 * time.Second

// gather is how long after its first delivery a pull waits for more, to
// fill its batch with what the worker is leasing at that moment.
const gather = 5 * time.Millisecond

// minLease is the shortest lease handed out: an attempt with less time
// left is given back (released) rather than handed to a consumer that
// could not ack it in time.
const minLease = time.Second

// The limits of one pull.
const (
	MaxBatch     = 1000
	MaxWait      = 60 * time.Second
	DefaultLease = 30 * time.Second
)

// Named errors of Take and Ack, which the API answers by reason.
var (
	// ErrUnknown: no pull destination has that name.
	ErrUnknown = errors.New("no such pull destination")
	// ErrNoLease: the delivery is leased to nobody here (its lease
	// expired, it was acked already, or another gateway handed it out).
	ErrNoLease = errors.New("the delivery is not leased: its lease expired, it was acked, or another gateway handed it out")
	// ErrStaleToken: the delivery is leased, under another token (it was
	// handed out again after this token's lease expired).
	ErrStaleToken = errors.New("the lease token is not the delivery's current one: the lease expired and it was handed out again")
	// ErrInvalid: the ack says no outcome (neither a status nor an error).
	ErrInvalid = errors.New("invalid ack")
	// ErrForbidden: the caller's token may not pull from the delivery's
	// destination.
	ErrForbidden = errors.New("the token may not pull from this delivery's destination")
	// ErrUnavailable: the store could not be reached to hand a lease out
	// or to check one.
	ErrUnavailable = errors.New("the store is unavailable")
)

// storeTimeout bounds a pull's or an ack's call to the store.
const storeTimeout = 5 * time.Second

// recheck is how often a lease kept in the store is looked up while it
// runs, for an ack another replica took: the attempt then ends here, its
// slot freed, rather than when the lease would have ended.
const recheck = 2 * time.Second

// Hub holds a gateway's pull destinations: the offers the worker makes
// and the leases consumers hold.
type Hub struct {
	now    func() time.Time
	wake   func()
	paused func() []string
	store  store.Pulls
	record func(context.Context, store.LeasedDelivery, time.Time, deliver.Result) (deliver.ResultKind, bool)
	queues atomic.Pointer[map[string]*queue]
	mu     sync.Mutex // Configure

	// acked are the tokens acked here whose outcomes the writer may not
	// have committed yet, until their leases' ends: a second ack is
	// refused as it was before the store kept leases.
	ackedMu sync.Mutex
	acked   map[string]time.Time
	pruned  time.Time
}

// ack notes token as acked, its lease ending at end.
func (h *Hub) ack(token string, end time.Time) {
	h.ackedMu.Lock()
	defer h.ackedMu.Unlock()
	if h.acked == nil {
		h.acked = map[string]time.Time{}
	}
	now := h.now()
	if len(h.acked) >= 1024 && now.Sub(h.pruned) >= time.Second {
		h.pruned = now
		for t, e := range h.acked {
			if !e.After(now) {
				delete(h.acked, t)
			}
		}
	}
	h.acked[token] = end
}

func (h *Hub) wasAcked(token string) bool {
	h.ackedMu.Lock()
	defer h.ackedMu.Unlock()
	end, ok := h.acked[token]
	return ok && end.After(h.now())
}

// Options configure a Hub.
type Options struct {
	// Wake is called when a destination becomes wanted (a pull came): the
	// worker should lease its due deliveries now.
	Wake func()
	// Paused names the destinations an operator paused: a pull hands
	// nothing of theirs out, not even what was offered before the pause.
	// (Flow control, the rate and the breaker, admitted each offer
	// before it was made.)
	Paused func() []string
	Now    func() time.Time
	// Store, when set, keeps each lease handed out (store.Pulls), so that
	// an ack is taken on any replica; Record then records an ack taken
	// here for a lease another replica handed out (deliver.Worker.Record).
	// Record answers the kind the destination's retry rules make of r,
	// and false when the destination is not configured there. Without
	// them, leases live in this process alone.
	Store  store.Pulls
	Record func(ctx context.Context, d store.LeasedDelivery, started time.Time, r deliver.Result) (deliver.ResultKind, bool)
}

// New returns an empty Hub: Configure names its destinations.
func New(opts Options) *Hub {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Wake == nil {
		opts.Wake = func() {}
	}
	if opts.Paused == nil {
		opts.Paused = func() []string { return nil }
	}
	h := &Hub{now: opts.Now, wake: opts.Wake, paused: opts.Paused, store: opts.Store, record: opts.Record}
	if h.store == nil || h.record == nil {
		h.store, h.record = nil, nil
	}
	h.queues.Store(&map[string]*queue{})
	return h
}

// queue is one pull destination: offers wait on the unbuffered channel
// until a pull takes them; leased, by delivery id, are those a consumer
// holds.
type queue struct {
	name   string
	offers chan *offer

	mu       sync.Mutex
	pulling  int       // pulls waiting now
	lastPull time.Time // when the last one ended
	leased   map[string]*offer
}

// offer is one attempt offered to the consumers: Send waits on done for
// its outcome.
type offer struct {
	m        *deliver.Message
	id       string
	deadline time.Time
	done     chan deliver.Result  // one result, buffered
	statuses *deliver.StatusRules // the destination's retry_on, final_on

	// Set under the queue's lock once a pull takes it.
	token    string
	consumer string
	expiry   *time.Timer
	ends     time.Time
	// stored: the store holds the lease under token (store.Pulls): the
	// attempt's outcome is recorded under it.
	stored bool
}

// Configure names the pull destinations (a start, a reload): one that
// stays keeps its offers and leases; one removed is forgotten (its
// offers and leases end with their attempts' deadlines).
func (h *Hub) Configure(names []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	old := *h.queues.Load()
	next := make(map[string]*queue, len(names))
	for _, n := range names {
		if q := old[n]; q != nil {
			next[n] = q
			continue
		}
		next[n] = &queue{name: n, offers: make(chan *offer), leased: map[string]*offer{}}
	}
	h.queues.Store(&next)
}

// Idle names the pull destinations nobody is pulling from, nor has
// within Linger: held, so that their backlog waits in the store. It is
// called on every commit: without pull destinations it costs one load.
func (h *Hub) Idle() []string {
	qs := *h.queues.Load()
	if len(qs) == 0 {
		return nil
	}
	now := h.now()
	var out []string
	for name, q := range qs {
		if !q.wanted(now) {
			out = append(out, name)
		}
	}
	return out
}

// Held adds the idle pull destinations to held (sorted, as the holds
// give them): what the worker and the writer must not lease now.
func (h *Hub) Held(held []string) []string {
	idle := h.Idle()
	if len(idle) == 0 {
		return held
	}
	out := slices.Clone(held)
	for _, d := range idle {
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out
}

func (q *queue) wanted(now time.Time) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.pulling > 0 || now.Sub(q.lastPull) < Linger
}

func (h *Hub) queue(name string) *queue { return (*h.queues.Load())[name] }

func (h *Hub) isPaused(name string) bool { return slices.Contains(h.paused(), name) }

// Sender is destination name's deliver.Sender: each attempt is signed
// with signingKey (nil: unsigned), as an HTTP destination's POST is, and
// offered to its consumers.
func (h *Hub) Sender(name string, signingKey []byte) deliver.Sender {
	return h.SenderWith(name, signingKey, nil)
}

// SenderWith is Sender for a destination with retry_on and final_on
// (statuses): an ack's answer says the outcome they make of its status,
// the one the worker records.
func (h *Hub) SenderWith(name string, signingKey []byte, statuses *deliver.StatusRules) deliver.Sender {
	return &sender{hub: h, name: name, key: signingKey, statuses: statuses}
}

type sender struct {
	hub      *Hub
	name     string
	key      []byte
	statuses *deliver.StatusRules
}

func (s *sender) Close() error { return nil }

// Send offers m to the destination's consumers and returns its outcome:
// the consumer's ack, classified; a retry when the consumer's lease
// expired unacked, or the attempt's deadline passed; released (no
// attempt spent) when nobody took it, because nobody is pulling or the
// destination is held.
func (s *sender) Send(ctx context.Context, m *deliver.Message) deliver.Result {
	q := s.hub.queue(s.name)
	if q == nil {
		return deliver.Result{Kind: deliver.Released, After: -1}
	}
	if m.Header == nil {
		m.Header = http.Header{}
	}
	// The headers and signature HTTP's POST would carry, on the same bytes.
	deliver.SignHeader(m.Header, m, s.key, s.hub.now)
	o := &offer{m: m, id: deliver.DeliveryID(m.Source, m.Key, m.Destination), done: make(chan deliver.Result, 1), statuses: s.statuses}
	if dl, ok := ctx.Deadline(); ok {
		o.deadline = dl
	}
	check := time.NewTimer(Linger)
	defer check.Stop()
	for taken := false; !taken; {
		select {
		case q.offers <- o:
			taken = true
		case <-ctx.Done():
			return deliver.Result{Kind: deliver.Released, After: -1}
		case <-check.C:
			if !q.wanted(s.hub.now()) || s.hub.isPaused(s.name) {
				return deliver.Result{Kind: deliver.Released, After: -1}
			}
			check.Reset(Linger)
		}
	}
	select {
	case r := <-o.done:
		return r
	case <-ctx.Done():
		// The attempt's deadline came before the lease's end (they are
		// bounded to fit, so this is a shutdown or a clock's jump): the
		// consumer's ack is refused from now on.
		q.forget(o)
		select {
		case r := <-o.done: // acked meanwhile
			return r
		default:
		}
		return deliver.Result{Kind: deliver.Retry, After: -1, Error: "not acked before the attempt's deadline (consumer " + o.consumerName() + ")",
			LeaseToken: q.storedToken(o)}
	}
}

// storedToken is the token the store holds o's lease under, "" when it
// holds the worker's.
func (q *queue) storedToken(o *offer) string {
	q.mu.Lock()
	defer q.mu.Unlock()
	if o.stored {
		return o.token
	}
	return ""
}

func (o *offer) consumerName() string {
	if o.consumer == "" {
		return "unknown"
	}
	return o.consumer
}

// forget drops o's lease, if it still holds one.
func (q *queue) forget(o *offer) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.leased[o.id] == o {
		delete(q.leased, o.id)
		if o.expiry != nil {
			o.expiry.Stop()
		}
	}
}

// Request is one pull: how many deliveries at most, how long each is
// leased, and how long to wait for the first (a long poll).
type Request struct {
	Max   int
	Lease time.Duration
	Wait  time.Duration
	// Consumer names who pulls (the token's name, and what the consumer
	// says of itself): the attempts record it.
	Consumer string
}

// Delivery is one attempt handed to a consumer: everything a push
// delivery carries, and the lease to ack it under.
type Delivery struct {
	ID          string
	Source, Key string
	Type        string
	Attempt     int
	Header      http.Header
	Body        []byte
	Token       string
	LeaseExpiry time.Time
	ReceivedAt  time.Time
	// Path and Query, when the destination's transformation set them:
	// what an HTTP destination's URL would have had replaced, for the
	// consumer to apply to its own URL (listen's --forward-to).
	Path  string
	Query url.Values
}

// Take leases up to r.Max of destination's due deliveries, waiting up to
// r.Wait for the first (less if ctx ends first): each is leased to this
// consumer until its LeaseExpiry, then handed out again as its next
// attempt if not acked. A paused destination hands nothing out; its rate
// and its breaker admitted each offer before it was made.
func (h *Hub) Take(ctx context.Context, destination string, r Request) ([]Delivery, error) {
	q := h.queue(destination)
	if q == nil {
		return nil, ErrUnknown
	}
	r.Max = min(max(r.Max, 1), MaxBatch)
	r.Wait = min(max(r.Wait, 0), MaxWait)
	if r.Lease <= 0 {
		r.Lease = DefaultLease
	}
	q.mu.Lock()
	q.pulling++
	q.mu.Unlock()
	defer func() {
		q.mu.Lock()
		q.pulling--
		q.lastPull = h.now()
		q.mu.Unlock()
	}()
	h.wake()
	wait := time.NewTimer(r.Wait)
	defer wait.Stop()
	if h.isPaused(destination) {
		// Nothing goes out; the consumer waits as a long poll does.
		select {
		case <-wait.C:
		case <-ctx.Done():
		}
		return nil, nil
	}
	var out []Delivery
	var taken []*offer
	var o *offer
	select {
	case o = <-q.offers:
	case <-wait.C:
		return nil, nil
	case <-ctx.Done():
		return nil, nil
	}
	// The batch fills with what is offered within gather of the first:
	// the worker leases a commit's worth at once.
	gap := time.NewTimer(gather)
	defer gap.Stop()
	for o != nil {
		if d, ok := q.lease(o, r, h.now(), h.store != nil); ok {
			out, taken = append(out, d), append(taken, o)
		}
		o = nil
		if len(out) >= r.Max {
			break
		}
		select {
		case o = <-q.offers:
		case <-gap.C:
		case <-ctx.Done():
		}
	}
	return h.handOut(q, taken, out)
}

// handOut keeps the leases of a pull's batch in the store, and then arms
// their expiries: what the store did not take (the worker's lease ended
// meanwhile) goes back to its worker, and all of it when the store is
// unreachable, for none was written.
func (h *Hub) handOut(q *queue, os []*offer, ds []Delivery) ([]Delivery, error) {
	var held []bool
	var err error
	if h.store != nil && len(os) > 0 {
		hs := make([]store.HandOut, len(os))
		for i, o := range os {
			hs[i] = store.HandOut{DeliveryID: o.m.StoreID, Token: o.m.LeaseToken, ConsumerToken: ds[i].Token, Expires: ds[i].LeaseExpiry}
		}
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		held, err = h.store.HandOut(ctx, hs)
		cancel()
	}
	out := ds[:0]
	for i, o := range os {
		if err != nil || (held != nil && !held[i]) {
			q.forget(o)
			o.done <- deliver.Result{Kind: deliver.Released, After: -1}
			continue
		}
		q.arm(h, o, ds[i].LeaseExpiry, h.store != nil)
		out = append(out, ds[i])
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return out, nil
}

// arm starts o's lease clock, to expire at expiry; stored says the store
// holds the lease under o's token.
func (q *queue) arm(h *Hub, o *offer, expiry time.Time, stored bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.leased[o.id] != o {
		return
	}
	token := o.token
	o.stored, o.ends = stored, expiry
	wait := expiry.Sub(h.now())
	if stored {
		wait = min(wait, recheck)
	}
	o.expiry = time.AfterFunc(wait, func() { h.tick(q, o, token) })
}

// lease hands o to the pulling consumer until its lease ends (r.Lease,
// cut to end before the attempt's deadline); handOut arms its expiry. An
// attempt without time left for minLease is given back, uncounted. A
// token kept in the store starts with the delivery's row id, so that any
// replica finds the lease an ack names.
func (q *queue) lease(o *offer, r Request, now time.Time, stored bool) (Delivery, bool) {
	d := r.Lease
	if !o.deadline.IsZero() {
		d = min(d, o.deadline.Sub(now)-o.deadline.Sub(now)/10)
	}
	if d < minLease {
		o.done <- deliver.Result{Kind: deliver.Released, After: -1}
		return Delivery{}, false
	}
	var b [16]byte
	rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	if stored {
		token = strconv.FormatInt(o.m.StoreID, 10) + "." + token
	}
	q.mu.Lock()
	o.token, o.consumer = token, r.Consumer
	q.leased[o.id] = o
	q.mu.Unlock()
	m := o.m
	return Delivery{
		ID: o.id, Source: m.Source, Key: m.Key, Type: m.Type, Attempt: m.Attempt,
		Header: m.Header, Body: m.Body, Token: token, LeaseExpiry: now.Add(d), ReceivedAt: m.ReceivedAt,
		Path: m.Path, Query: m.Query,
	}, true
}

// tick looks at o's lease under token while it runs unacked here: when
// the store says another replica took its ack (the lease is no longer
// token's), the attempt ends with that outcome standing (the lease goes
// back, which the store ignores); at the lease's end, it is a retry, the
// next attempt after the destination's backoff. Otherwise it looks again
// within recheck.
func (h *Hub) tick(q *queue, o *offer, token string) {
	q.mu.Lock()
	if q.leased[o.id] != o || o.token != token {
		q.mu.Unlock()
		return
	}
	stored, ends := o.stored, o.ends
	q.mu.Unlock()
	elsewhere := false
	if stored {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		d, err := h.store.Leased(ctx, o.m.StoreID)
		cancel()
		elsewhere = errors.Is(err, store.ErrNotFound) || (err == nil && d.LeaseToken != token)
	}
	now := h.now()
	q.mu.Lock()
	if q.leased[o.id] != o || o.token != token { // acked here meanwhile
		q.mu.Unlock()
		return
	}
	if stored && !elsewhere && now.Before(ends) {
		o.expiry = time.AfterFunc(min(ends.Sub(now), recheck), func() { h.tick(q, o, token) })
		q.mu.Unlock()
		return
	}
	delete(q.leased, o.id)
	q.mu.Unlock()
	r := deliver.Result{Kind: deliver.Retry, After: -1, Error: fmt.Sprintf("consumer %s did not ack before its lease ended", o.consumerName())}
	if stored {
		r.LeaseToken = token
	}
	if elsewhere {
		r = deliver.Result{Kind: deliver.Released, After: -1, LeaseToken: token}
	}
	o.done <- r
}

// Outcome is what a consumer says of one delivery: its local app's
// answer (Status, with Retry-After on a 429 or a 503) or why there was
// none (Error: a refused connection, a timeout), and how long it took.
type Outcome struct {
	Status     int
	RetryAfter time.Duration // -1 or 0: none
	Latency    time.Duration
	Error      string
	Response   string
}

// Ack ends the lease of delivery id under token with the consumer's
// outcome, which the worker records as the attempt's: a 2xx delivered;
// 400, 401, 403, 404, 410, 422 or a redirect permanent (a dead letter);
// anything else, or an error without a status, retried with backoff
// (Retry-After honoured on 429 and 503), as an HTTP destination's answer
// is.
func (h *Hub) Ack(destination, id, token string, out Outcome) (deliver.ResultKind, error) {
	q := h.queue(destination)
	if q == nil {
		return 0, ErrUnknown
	}
	if err := out.check(); err != nil {
		return 0, err
	}
	q.mu.Lock()
	o := q.leased[id]
	switch {
	case o == nil:
		q.mu.Unlock()
		return 0, ErrNoLease
	case o.token != token:
		q.mu.Unlock()
		return 0, ErrStaleToken
	}
	delete(q.leased, id)
	if o.expiry != nil {
		o.expiry.Stop()
	}
	stored, ends := o.stored, o.ends
	q.mu.Unlock()
	r := Classify(o.consumerName(), out)
	o.statuses.Apply(&r)
	if stored {
		r.LeaseToken = token
		h.ack(token, ends)
	}
	o.done <- r
	return r.Kind, nil
}

func (out Outcome) check() error {
	if out.Status == 0 && out.Error == "" {
		return fmt.Errorf("%w: give the local status, or the error when there was no answer", ErrInvalid)
	}
	if out.Status != 0 && (out.Status < 100 || out.Status > 599) {
		return fmt.Errorf("%w: status %d is not an HTTP status", ErrInvalid, out.Status)
	}
	return nil
}

// AckStored takes an ack of delivery id whose lease no queue here holds:
// one another replica handed out, checked against the store (the token
// names the delivery's row) and recorded by this gateway's worker under
// the consumer's token. may says whether the caller may pull from the
// delivery's destination. A token the store no longer holds is refused
// as it is where the lease was handed out.
func (h *Hub) AckStored(ctx context.Context, may func(destination string) bool, consumer, id, token string, out Outcome) (deliver.ResultKind, error) {
	if err := out.check(); err != nil {
		return 0, err
	}
	row, ok := rowOf(token)
	if h.store == nil || !ok || h.wasAcked(token) {
		return 0, ErrNoLease
	}
	sctx, cancel := context.WithTimeout(ctx, storeTimeout)
	d, err := h.store.Leased(sctx, row)
	cancel()
	switch {
	case errors.Is(err, store.ErrNotFound):
		return 0, ErrNoLease
	case err != nil:
		return 0, fmt.Errorf("%w: %w", ErrUnavailable, err)
	case h.queue(d.Destination) == nil || deliver.DeliveryID(d.Source, d.Key, d.Destination) != id:
		return 0, ErrNoLease
	case !may(d.Destination):
		return 0, ErrForbidden
	case d.LeaseToken == "" || !d.LeaseExpiresAt.After(h.now()):
		return 0, ErrNoLease
	case d.LeaseToken != token:
		return 0, ErrStaleToken
	}
	r := Classify(consumer, out)
	r.LeaseToken, d.LeaseToken = token, token
	kind, ok := h.record(ctx, d, h.now().Add(-out.Latency), r)
	if !ok {
		return 0, ErrNoLease
	}
	h.ack(token, d.LeaseExpiresAt)
	return kind, nil
}

// rowOf is the delivery row a stored lease's token names.
func rowOf(token string) (int64, bool) {
	row, _, ok := strings.Cut(token, ".")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(row, 10, 64)
	return n, err == nil && n > 0
}

// Classify is a consumer's outcome as the worker records it: its status
// classified as an HTTP destination's (deliver.ClassifyStatus), or a
// retry for an error without a status; the response says which consumer
// answered, in what time.
func Classify(consumer string, out Outcome) deliver.Result {
	var r deliver.Result
	if out.Status == 0 {
		r = deliver.Result{Kind: deliver.Retry, After: -1}
	} else {
		after := out.RetryAfter
		if after <= 0 {
			after = -1
		}
		r = deliver.ClassifyStatus(out.Status, after, "")
	}
	if out.Error != "" {
		if r.Error != "" {
			r.Error += ": "
		}
		r.Error += out.Error
	}
	if r.Error != "" {
		r.Error = "consumer " + consumer + ": " + r.Error
	}
	r.Response = fmt.Sprintf("[consumer %s, %s] %s", consumer, out.Latency.Round(time.Millisecond), out.Response)
	return r
}

// Destination names the pull destination a delivery id is leased from,
// for an ack that names only the delivery: "" when none here holds it.
func (h *Hub) Destination(id string) string {
	for name, q := range *h.queues.Load() {
		q.mu.Lock()
		_, ok := q.leased[id]
		q.mu.Unlock()
		if ok {
			return name
		}
	}
	return ""
}
