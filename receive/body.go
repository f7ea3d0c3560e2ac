package receive

import (
	"cmp"
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/oncehook/oncehook/provider"
)

// Limits resolves the body limits as New applies them to what the config
// (or Options) sets: zero takes DefaultMaxBodySize, and an in-flight
// budget of max(DefaultMaxInflightBytes, the body limit). A budget below
// the body limit is refused: one request could never be taken in.
func Limits(maxBody, inflight int64) (int64, int64, error) {
	if maxBody <= 0 {
		maxBody = DefaultMaxBodySize
	}
	if inflight <= 0 {
		inflight = max(DefaultMaxInflightBytes, maxBody)
	}
	if inflight < maxBody {
		return maxBody, inflight, fmt.Errorf("%d bytes is below max_body_size (%d): one request could never be taken in", inflight, maxBody)
	}
	return maxBody, inflight, nil
}

// Defaults of the body's limits and pace.
const (
	DefaultMaxBodySize      = 5 << 20
	DefaultMaxInflightBytes = 64 << 20
	// DefaultBodyGrace is how long any body may take, whatever its size,
	// before the rate floor applies: a small body on a slow link is fine.
	DefaultBodyGrace = 10 * time.Second
	// DefaultMinBodyRate is the average data rate below which a body is
	// cut once the grace is over. A provider's datacentre sends far
	// faster; a client that trickles a byte every few seconds to hold a
	// connection (and its share of memory) does not.
	DefaultMinBodyRate = 16 << 10 // bytes per second
)

// readChunk is the most one read may add to a body's buffer: memory is
// reserved a chunk at a time as bytes arrive, never for what a request
// merely announces.
const readChunk = 32 << 10

// staleBody is how long a body may arrive before any request that needs
// room may cut it, whatever it holds: a provider's datacentre sends a body
// in milliseconds.
const staleBody = time.Second

// lastByteWait is how long a body's last byte may take, once all the
// others are in: that read is never cut (see readBody), and a provider
// sends its body's last byte with the rest.
const lastByteWait = time.Second

var (
	// errSlowBody is a body whose pace fell below the floor.
	errSlowBody = errors.New("the body arrives too slowly")
	// errOverloaded is a request that could not get memory in time.
	errOverloaded = errors.New("too many request bytes in flight")
	// errEvicted is a body cut while it arrived, to make room for a
	// younger one (see budget).
	errEvicted = errors.New("the body was cut to make room for others")
)

// budget bounds the request bytes held in memory: one total for the whole
// of intake and one share per source, so that a flood on one source's URL
// (which anybody who knows it can send, signed or not, since the signature
// can only be checked once the body is in) cannot take the memory every
// other source needs.
//
// Bytes no signature has vouched for must never hold the room a signed
// request needs (invariant 17), and a body cannot be verified before it is
// all in. What tells an attacker's bodies from a provider's is time: a
// provider's datacentre sends a body in milliseconds, while bytes that hold
// memory for long must arrive slowly (the pace floor only bounds how
// slowly). So when a request finds no room, the bodies still arriving that
// began before its own are cut, oldest first, until what they hold makes
// room for it (they get 503 and Retry-After; a provider's retry comes back
// fast). A body once read is never cut: it is verified at once, and then
// either released (401) or vouched for. This holds however many
// connections and addresses the attacker has: each new connection of
// theirs cuts their own oldest, and a signed request is cut only if every
// body that began before it is cut first, while it is read.
type budget struct {
	mu       sync.Mutex
	total    int64
	used     int64
	evicting int64 // held by cut bodies, not yet given back
	owed     int64 // promised to requests whose cuts made room
	maxBody  int64
	wait     time.Duration
	// arriving are the holds whose bodies are being read, oldest first.
	arriving list.List
	// freed is closed whenever room may have been made: the requests
	// waiting for it look again. It is made by the first to wait (nil:
	// nobody waits), so that the many releases nobody waits for make no
	// channel each.
	freed chan struct{}
}

// share is one source's part of the budget, guarded by budget.mu.
type share struct {
	size, used, evicting, owed int64
}

// shares are the per-source shares of one set of sources. A reload makes
// new shares; a request keeps the share it started with (its hold releases
// what it took there), so the sizes never drift.
type shares struct {
	sources map[string]*share
	size    int64 // each source's share's size
}

func newBudget(total, maxBody int64, wait time.Duration) *budget {
	total = max(total, maxBody)
	return &budget{total: total, maxBody: maxBody, wait: wait}
}

// split gives each of sources at most half of the budget (but always one
// whole body) when there are several. A source old already had a share
// for keeps it when its size is unchanged, with what its requests hold.
func (b *budget) split(sources []string, old *shares) *shares {
	size := b.total
	if len(sources) > 1 {
		size = max(b.total/2, b.maxBody)
	}
	s := &shares{sources: make(map[string]*share, len(sources)), size: size}
	for _, name := range sources {
		if old != nil && old.size == size && old.sources[name] != nil {
			s.sources[name] = old.sources[name]
			continue
		}
		s.sources[name] = &share{size: size}
	}
	return s
}

// wake tells every waiting request to look for room again. b.mu is held.
func (b *budget) wake() {
	if b.freed != nil {
		close(b.freed)
		b.freed = nil
	}
}

// hold is what one request has reserved of a budget.
type hold struct {
	b     *budget
	share *share
	n     int64
	// Guarded by b.mu:
	owed     int64                    // promised to it while it waits (see acquire)
	arriving *list.Element            // in b.arriving while the body is read
	start    time.Time                // when the body began to arrive
	rc       *http.ResponseController // cut ends the body's read at once through it
	evicted  bool
}

func (b *budget) hold(s *shares, source string) *hold {
	return &hold{b: b, share: s.sources[source]}
}

// acquire reserves n more bytes, waiting up to the budget's wait for them,
// and cutting bodies still arriving to make room (see budget). The room a
// request's cuts make is promised to it (owed) until it takes it or gives
// up: the bodies it cut for must not be refilled by others waiting.
func (h *hold) acquire(ctx context.Context, n int64) error {
	if n <= 0 {
		return nil
	}
	b := h.b
	var timeout <-chan time.Time
	b.mu.Lock()
	defer b.mu.Unlock()
	defer h.settle()
	for {
		if h.evicted {
			return errEvicted
		}
		if h.share.used+h.share.owed-h.owed+n <= h.share.size && b.used+b.owed-h.owed+n <= b.total {
			h.share.used += n
			b.used += n
			h.n += n
			return nil
		}
		if b.evictFor(h, n) && h.owed == 0 {
			// The room that cut bodies will give back covers h: it is
			// kept for h, not taken by whoever looks first.
			h.owed = n
			h.share.owed += n
			b.owed += n
		}
		if b.freed == nil {
			b.freed = make(chan struct{})
		}
		freed := b.freed
		b.mu.Unlock()
		if timeout == nil {
			t := time.NewTimer(b.wait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-freed:
		case <-timeout:
			b.mu.Lock()
			return errOverloaded
		case <-ctx.Done():
			b.mu.Lock()
			return errOverloaded
		}
		b.mu.Lock()
	}
}

// settle drops what h is owed. b.mu is held.
func (h *hold) settle() {
	h.share.owed -= h.owed
	h.b.owed -= h.owed
	h.owed = 0
}

// evictFor cuts bodies still arriving until what they hold (with what
// earlier cuts will give back, less what is owed to others) makes room for
// n more bytes of h's, and reports whether that room is coming: whether
// cut bodies, once they give back what they hold, leave room for h. A body
// may be cut for h when it holds at least what h will, or when it has been
// arriving for longer than staleBody; the largest go first, the oldest
// first among equals. b.mu is held.
func (b *budget) evictFor(h *hold, n int64) bool {
	needShare := h.share.used + h.share.owed - h.owed + n - h.share.size - h.share.evicting
	needAll := b.used + b.owed - h.owed + n - b.total - b.evicting
	if needShare <= 0 && needAll <= 0 {
		return true
	}
	now := time.Now()
	var victims []*hold
	for e := b.arriving.Front(); e != nil; e = e.Next() {
		v := e.Value.(*hold)
		if v == h || v.evicted || v.n == 0 || (needAll <= 0 && v.share != h.share) {
			continue
		}
		if v.n >= h.n+n || now.Sub(v.start) > staleBody {
			victims = append(victims, v)
		}
	}
	slices.SortStableFunc(victims, func(x, y *hold) int { return cmp.Compare(y.n, x.n) })
	cut := false
	for _, v := range victims {
		if needShare <= 0 && needAll <= 0 {
			break
		}
		if needAll <= 0 && v.share != h.share {
			continue
		}
		v.evicted = true
		v.share.evicting += v.n
		b.evicting += v.n
		v.cut()
		cut = true
		if v.share == h.share {
			needShare -= v.n
		}
		needAll -= v.n
	}
	if cut {
		b.wake() // a cut body waiting for room learns it at once
	}
	return needShare <= 0 && needAll <= 0
}

// give returns n of the reserved bytes.
func (h *hold) give(n int64) {
	if n <= 0 {
		return
	}
	b := h.b
	b.mu.Lock()
	h.share.used -= n
	b.used -= n
	if h.evicted {
		h.share.evicting -= n
		b.evicting -= n
	}
	h.n -= n
	b.wake()
	b.mu.Unlock()
}

// room is the most this request could still reserve: asking for more
// could never succeed.
func (h *hold) room() int64 { return h.share.size - h.n }

// release returns everything the request holds.
func (h *hold) release() { h.give(h.n) }

// arrive marks the body as arriving, so that it may be cut (by a read
// deadline in the past, through rc) while it is; read ends that.
func (h *hold) arrive(rc *http.ResponseController) {
	h.b.mu.Lock()
	h.rc = rc
	h.start = time.Now()
	h.arriving = h.b.arriving.PushBack(h)
	h.b.mu.Unlock()
}

// cut ends the body's read at once.
func (h *hold) cut() { h.rc.SetReadDeadline(time.Unix(1, 0)) }

// read marks the body as all in (or about to be, or given up): it is no
// longer cut. It reports whether it was cut before.
func (h *hold) read() bool {
	h.b.mu.Lock()
	defer h.b.mu.Unlock()
	if h.arriving != nil {
		h.b.arriving.Remove(h.arriving)
		h.arriving = nil
	}
	return h.evicted
}

// setDeadline sets the body's read deadline unless the body was cut (whose
// deadline, in the past, must stay).
func (h *hold) setDeadline(rc *http.ResponseController, d time.Time) error {
	h.b.mu.Lock()
	defer h.b.mu.Unlock()
	if h.evicted {
		return errEvicted
	}
	rc.SetReadDeadline(d)
	return nil
}

// pace is the floor a body's data rate must keep, as nginx's
// client_body_timeout does between reads, but on the average: the body
// may take grace plus the time its bytes so far would take at minRate.
type pace struct {
	grace   time.Duration
	minRate int64
}

func (p pace) deadline(start time.Time, received int) time.Time {
	return start.Add(p.grace + time.Duration(float64(received)/float64(p.minRate)*float64(time.Second)))
}

// apisShare names the user's APIs' share of the in-flight budget (the
// upstreams: behind the Idempotency-Key proxy, all of them together),
// beside intake's sources.
const apisShare = "upstreams"

// apiShare is the user's APIs' share: half of the budget (but always one
// whole body), as one source of several gets.
func (b *budget) apiShare() *shares {
	size := max(b.total/2, b.maxBody)
	return &shares{sources: map[string]*share{apisShare: {size: size}}, size: size}
}

// Refusals of ReadBody.
var (
	// ErrSlowBody is a body whose pace fell below the floor (408).
	ErrSlowBody = errSlowBody
	// ErrOverloaded is a request that could not get memory in time (503).
	ErrOverloaded = errOverloaded
	// ErrEvicted is a body cut while it arrived, to make room for a
	// younger one (503, as ErrOverloaded).
	ErrEvicted = errEvicted
)

// MaxBodySize is the largest body intake takes (max_body_size, or its
// default): the outbox's publish endpoint takes no more.
func (h *Handler) MaxBodySize() int64 { return h.maxBody }

// ReadBody reads the body of a request to one of the user's APIs behind
// the Idempotency-Key proxy, which must hold it whole (its fingerprint,
// the upstream's retry), on intake's terms: up to limit bytes, reserved as
// they arrive against intake's in-flight budget (the APIs together get at
// most half of it, as one source of several would), at intake's pace
// floor. done gives the memory back; call it once the request is over.
// Its refusals: *http.MaxBytesError, ErrOverloaded, ErrEvicted, ErrSlowBody.
func (h *Handler) ReadBody(w http.ResponseWriter, r *http.Request, limit int64) (body []byte, done func(), err error) {
	limit = min(limit, h.apis.size)
	if r.ContentLength > limit {
		return nil, nil, &http.MaxBytesError{Limit: limit}
	}
	held := h.inflight.hold(h.apis, apisShare)
	body, err = readBody(r.Context(), w, r, limit, held, h.pace)
	if err != nil {
		held.release()
		return nil, nil, err
	}
	return body, held.release, nil
}

// readBody reads the whole body, up to limit bytes. Its buffer grows by
// doubling from one chunk up to the announced length (never past it), and
// the hold reserves each growth before it is made, so memory follows the
// bytes that actually arrived (a body of up to 32 KiB is one allocation); a liar's Content-Length costs nothing it
// has not sent. A body that falls below the pace is cut (errSlowBody).
func readBody(ctx context.Context, w http.ResponseWriter, r *http.Request, limit int64, h *hold, p pace) (body []byte, err error) {
	rd := http.MaxBytesReader(w, r.Body, limit)
	rc := http.NewResponseController(w)
	// Deferred in this order: once the body is read it can no longer be
	// cut, and only then is its deadline cleared (a cut's deadline left
	// in the past would end the connection's background read, and cancel
	// the request while its events are claimed). A body given up keeps a
	// deadline in the past: after the answer the server would otherwise
	// wait, with no deadline, for up to 256 KiB more of it to reuse the
	// connection, which a client that stalls holds open for ever.
	defer func() {
		if err != nil {
			rc.SetReadDeadline(time.Unix(1, 0))
		} else {
			rc.SetReadDeadline(time.Time{})
		}
	}()
	h.arrive(rc)
	defer h.read()
	start := time.Now()
	ceiling := limit
	if r.ContentLength >= 0 {
		ceiling = min(r.ContentLength, limit)
	}
	// announced: the body's end is known, so the read that takes its last
	// byte is known too.
	announced := r.ContentLength >= 0 && r.ContentLength <= limit
	body = []byte{}
	for {
		if err := h.setDeadline(rc, p.deadline(start, len(body))); err != nil {
			return nil, err
		}
		if len(body) == cap(body) {
			if int64(len(body)) >= ceiling {
				// All that may come has come: one more read sees the end,
				// or that the body goes on past the limit.
				var one [1]byte
				n, err := rd.Read(one[:])
				switch {
				case n > 0:
					return nil, &http.MaxBytesError{Limit: limit}
				case err == nil:
					continue
				case errors.Is(err, io.EOF):
					return body, nil
				}
				return nil, h.readError(err)
			}
			old := int64(cap(body))
			grow := min(max(old, readChunk), ceiling-old)
			// The hold counts the new buffer; the old one is garbage
			// once copied, so its moment beside the new one is not held
			// against the budget (a request never needs more than one
			// body's worth of it).
			if err := h.acquire(ctx, grow); err != nil {
				return nil, err
			}
			next := make([]byte, len(body), old+grow)
			copy(next, body)
			body = next
		}
		to := cap(body)
		if announced && int64(to) >= ceiling {
			if int64(len(body)) < ceiling-1 {
				to = int(ceiling - 1) // the last byte comes alone (below)
			} else {
				// The last byte: the read that takes it ends the body, and
				// the server then watches the connection with its deadline,
				// so the body must no longer be cut (a cut deadline would
				// end the watch and cancel the request). Stalling here to
				// hold memory buys at most lastByteWait.
				if h.read() {
					return nil, errEvicted
				}
				d := p.deadline(start, len(body))
				if last := time.Now().Add(lastByteWait); last.Before(d) {
					d = last
				}
				rc.SetReadDeadline(d)
			}
		}
		n, err := rd.Read(body[len(body):to])
		body = body[:len(body)+n]
		if errors.Is(err, io.EOF) {
			return body, nil
		}
		if err != nil {
			return nil, h.readError(err)
		}
	}
}

func (h *hold) readError(err error) error {
	h.b.mu.Lock()
	evicted := h.evicted
	h.b.mu.Unlock()
	if evicted {
		return errEvicted
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return errSlowBody
	}
	return err
}

// Bounds on what splitting a batch may produce.
const (
	// maxExpansion times the request, plus expansionSlack, is the most the
	// items of one split request may add up to. Each item repeats a small
	// envelope (Meta's object, entry id, field, metadata) around its own
	// update; no provider's real batch comes near it, and one that would
	// is refused (413) rather than multiplied into memory and the store.
	maxExpansion   = 4
	expansionSlack = 64 << 10
)

// splitBytes is what the items hold beyond the request's own body: the
// bytes of every item that is not the body itself.
func splitBytes(body []byte, items []provider.Item) int64 {
	var n int64
	for _, it := range items {
		if b := it.Body; len(b) > 0 && len(body) > 0 && &b[0] == &body[0] {
			continue // the body itself, already held
		}
		n += int64(len(it.Body))
	}
	return n
}

// Held is what one message a transport already holds in memory (a
// queue's) has reserved of intake's in-flight budget: its body, and what a
// batch's split adds beside it. The zero Held reserves nothing.
type Held struct {
	hold *hold
	n    int
}

// Hold reserves n bytes of source's share of the in-flight budget
// (max_inflight_bytes) for a message of that size a transport took from
// its broker, waiting for room while ctx lasts: a queue's consumer that
// waits here stops taking messages, so its broker holds the backlog, not
// this process's memory. The bytes are counted as a request's body is,
// against the same total, so queues and HTTP intake together stay within
// it. A message over max_body_size reserves nothing (Accept refuses it),
// nor one for a source the running config does not have. The error is
// ctx's, when it ended first.
func (h *Handler) Hold(ctx context.Context, source string, n int) (*Held, error) {
	s := h.table.Load().shares
	if s.sources[source] == nil || int64(n) > h.maxBody {
		return &Held{}, nil
	}
	held := h.inflight.hold(s, source)
	for {
		err := held.acquire(ctx, int64(n))
		if err == nil {
			return &Held{hold: held, n: n}, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// Not in the budget's wait: a message is never refused for it,
		// it waits on (and its broker keeps the rest).
	}
}

// Stream reserves nothing yet of source's share: it is what a transport
// that reads its messages off a connection holds of the budget for the
// bodies it has read and not yet handed over, reserved as their bytes
// arrive (Grow), as a request's body is, and handed to each message as it
// is (Split). A transport that waits in Grow stops reading, and its
// broker keeps the rest: memory follows what was read, not what a broker
// may send before the transport sees a message's size. For a source the
// running config does not have it reserves nothing.
func (h *Handler) Stream(source string) *Held {
	s := h.table.Load().shares
	if s.sources[source] == nil {
		return &Held{}
	}
	return &Held{hold: h.inflight.hold(s, source)}
}

// Fits reports whether a message of n bytes is one Hold and a Stream
// reserve for: not empty, and at most max_body_size (a larger one is
// refused by Accept, and could never fit in the budget).
func (m *Held) Fits(n int) bool { return m.hold != nil && n > 0 && int64(n) <= m.hold.b.maxBody }

// Grow reserves n more bytes for a Stream, waiting for room while ctx
// lasts, as Hold does. The error is ctx's.
func (m *Held) Grow(ctx context.Context, n int) error {
	if m.hold == nil || n <= 0 {
		return nil
	}
	for {
		err := m.hold.acquire(ctx, int64(n))
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// Split moves n of a Stream's bytes to a Held of their own: one message's
// body, handed over, which Release gives back apart from the rest (and
// beside which Reserve takes its batch's split). It moves no more than the
// Stream holds.
func (m *Held) Split(n int) *Held {
	if m.hold == nil || n <= 0 {
		return &Held{}
	}
	b := m.hold.b
	b.mu.Lock()
	moved := min(int64(n), m.hold.n)
	m.hold.n -= moved
	b.mu.Unlock()
	return &Held{hold: &hold{b: b, share: m.hold.share, n: moved}, n: int(moved)}
}

// Reserve is Envelope.Reserve for the message: a batch's split is taken
// from its source's share, beside its body.
func (m *Held) Reserve(ctx context.Context, split int64) error {
	if m.hold == nil {
		return nil
	}
	return reserveBeside(m.hold, m.n)(ctx, split)
}

// Size is the message's bytes Hold reserved (0 when it reserved none).
func (m *Held) Size() int {
	if m.hold == nil {
		return 0
	}
	return m.n
}

// Release gives back everything the message holds.
func (m *Held) Release() {
	if m.hold != nil {
		m.hold.release()
	}
}

// Share is how many bytes source's messages and requests may hold at
// once: its share of max_inflight_bytes (0 for a source the running
// config does not have). A consumer bounds what its broker's client
// buffers by it.
func (h *Handler) Share(source string) int64 {
	if s := h.table.Load().shares; s.sources[source] != nil {
		return s.size
	}
	return 0
}
