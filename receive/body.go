package receive

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"golang.org/x/sync/semaphore"

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

var (
	// errSlowBody is a body whose pace fell below the floor.
	errSlowBody = errors.New("the body arrives too slowly")
	// errOverloaded is a request that could not get memory in time.
	errOverloaded = errors.New("too many request bytes in flight")
)

// budget bounds the request bytes held in memory: one semaphore for the
// whole of intake and one per source, so that a flood on one source's URL
// (which anybody who knows it can send, signed or not, since the signature
// can only be checked once the body is in) cannot take the memory every
// other source needs.
type budget struct {
	all     *semaphore.Weighted
	total   int64
	maxBody int64
	wait    time.Duration
}

// shares are the per-source semaphores of one set of sources. A reload
// makes new shares; a request keeps the share it started with (its hold
// releases what it took there), so the sizes never drift.
type shares struct {
	sources map[string]*semaphore.Weighted
	size    int64 // each source's semaphore's size
}

func newBudget(total, maxBody int64, wait time.Duration) *budget {
	total = max(total, maxBody)
	return &budget{all: semaphore.NewWeighted(total), total: total, maxBody: maxBody, wait: wait}
}

// split gives each of sources at most half of the budget (but always one
// whole body) when there are several. A source old already had a share
// for keeps it when its size is unchanged, with what its requests hold.
func (b *budget) split(sources []string, old *shares) *shares {
	size := b.total
	if len(sources) > 1 {
		size = max(b.total/2, b.maxBody)
	}
	s := &shares{sources: make(map[string]*semaphore.Weighted, len(sources)), size: size}
	for _, name := range sources {
		if old != nil && old.size == size && old.sources[name] != nil {
			s.sources[name] = old.sources[name]
			continue
		}
		s.sources[name] = semaphore.NewWeighted(size)
	}
	return s
}

// hold is what one request has reserved of a budget.
type hold struct {
	b      *budget
	source *semaphore.Weighted
	size   int64 // the source semaphore's
	n      int64
}

func (b *budget) hold(s *shares, source string) *hold {
	return &hold{b: b, source: s.sources[source], size: s.size}
}

// acquire reserves n more bytes, waiting up to the budget's wait for them.
func (h *hold) acquire(ctx context.Context, n int64) error {
	if n <= 0 {
		return nil
	}
	if !h.source.TryAcquire(n) {
		wctx, cancel := context.WithTimeout(ctx, h.b.wait)
		err := h.source.Acquire(wctx, n)
		cancel()
		if err != nil {
			return errOverloaded
		}
	}
	if !h.b.all.TryAcquire(n) {
		wctx, cancel := context.WithTimeout(ctx, h.b.wait)
		err := h.b.all.Acquire(wctx, n)
		cancel()
		if err != nil {
			h.source.Release(n)
			return errOverloaded
		}
	}
	h.n += n
	return nil
}

// give returns n of the reserved bytes.
func (h *hold) give(n int64) {
	if n <= 0 {
		return
	}
	h.source.Release(n)
	h.b.all.Release(n)
	h.n -= n
}

// room is the most this request could still reserve: asking for more
// could never succeed.
func (h *hold) room() int64 { return h.size - h.n }

// release returns everything the request holds.
func (h *hold) release() { h.give(h.n) }

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

// apisShare names the user's APIs' share of the in-flight budget: all
// of them together, beside intake's sources.
const apisShare = "apis"

// apiShare is the user's APIs' share: half of the budget (but always one
// whole body), as one source of several gets.
func (b *budget) apiShare() *shares {
	size := max(b.total/2, b.maxBody)
	return &shares{sources: map[string]*semaphore.Weighted{apisShare: semaphore.NewWeighted(size)}, size: size}
}

// Refusals of ReadBody.
var (
	// ErrSlowBody is a body whose pace fell below the floor (408).
	ErrSlowBody = errSlowBody
	// ErrOverloaded is a request that could not get memory in time (503).
	ErrOverloaded = errOverloaded
)

// ReadBody reads the body of a request to one of the user's APIs behind
// the Idempotency-Key proxy, which must hold it whole (its fingerprint,
// the upstream's retry), on intake's terms: up to limit bytes, reserved as
// they arrive against intake's in-flight budget (the APIs together get at
// most half of it, as one source of several would), at intake's pace
// floor. done gives the memory back; call it once the request is over.
// Its refusals: *http.MaxBytesError, ErrOverloaded, ErrSlowBody.
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
func readBody(ctx context.Context, w http.ResponseWriter, r *http.Request, limit int64, h *hold, p pace) ([]byte, error) {
	rd := http.MaxBytesReader(w, r.Body, limit)
	rc := http.NewResponseController(w)
	defer rc.SetReadDeadline(time.Time{})
	start := time.Now()
	ceiling := limit
	if r.ContentLength >= 0 {
		ceiling = min(r.ContentLength, limit)
	}
	body := []byte{}
	for {
		rc.SetReadDeadline(p.deadline(start, len(body)))
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
				return nil, readError(err)
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
		n, err := rd.Read(body[len(body):cap(body)])
		body = body[:len(body)+n]
		if errors.Is(err, io.EOF) {
			return body, nil
		}
		if err != nil {
			return nil, readError(err)
		}
	}
}

func readError(err error) error {
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
