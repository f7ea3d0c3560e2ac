package broker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/oncehook/oncehook/receive"
)

// Accepter is intake's core as a consumer uses it: receive.Handler is one.
type Accepter interface {
	// Accept takes an envelope for a source and answers after the
	// durable commit (see receive.Handler.Accept).
	Accept(ctx context.Context, source string, env receive.Envelope) (receive.Response, error)
	// Hold reserves a message's bytes in intake's in-flight budget,
	// waiting for room while ctx lasts (see receive.Handler.Hold).
	Hold(ctx context.Context, source string, n int) (*receive.Held, error)
	// Stream reserves, as a connection reads them, the bytes of the
	// bodies it has not handed over yet (see receive.Handler.Stream).
	Stream(source string) *receive.Held
	// Share is how many bytes a source's messages may hold at once.
	Share(source string) int64
}

// refuser is an Accepter that counts a transport's own refusals
// (receive.Handler's Core.Refuse): a consumer's test double may not.
type refuser interface {
	Refuse(ctx context.Context, source, client string, status int, reason, detail string) *receive.Rejection
}

// Verdict is how a consumer answers its broker for one message.
type Verdict int

const (
	// Ack: the message's events are committed (accepted, or duplicates).
	// An ack that is lost is a redelivery, and that is a duplicate.
	Ack Verdict = iota
	// Retry: not taken now (the store could not commit, memory was
	// short, the running config has no such source): left for the broker
	// to hand out again later (a nak with a delay, a requeue after a
	// hold, an offset not committed), never dropped.
	Retry
	// Poison: no retry would make it acceptable (no key, not JSON where
	// the key needs it, over the size limit, a bad signature with verify
	// on): acked, or dead-lettered where the broker has a place for it,
	// so that it never stalls its queue. Accept counted it by reason.
	Poison
)

// Outcome is the verdict on one message and what Accept said of it.
type Outcome struct {
	Verdict Verdict
	// Err is Accept's error (nil for Ack).
	Err error
	// Rejection says why, for Poison.
	Rejection *receive.Rejection
}

// Decide is the verdict on Accept's answer: the one place every consumer
// learns what to answer its broker. A Rejection that is not Temporary is
// poison, except an unknown source: the message is fine, the config is
// what lacks its source (a consumer's source is bound at start, so only a
// race with a reload's swap can see that), and a message is never thrown
// away for the config's state.
func Decide(err error) Outcome {
	if err == nil {
		return Outcome{Verdict: Ack}
	}
	var rej *receive.Rejection
	if errors.As(err, &rej) && !rej.Temporary() && rej.Reason != receive.ReasonUnknownSource {
		return Outcome{Verdict: Poison, Err: err, Rejection: rej}
	}
	return Outcome{Verdict: Retry, Err: err}
}

// Intake is what every consumer shares between its broker and intake's
// core: a message's bytes are counted in intake's in-flight budget
// (max_inflight_bytes) from when the consumer takes it until its answer,
// Accept takes it, and Decide says what to answer. A consumer takes its
// messages through one Intake, and answers its broker as the Outcome says
// in the broker's own terms.
type Intake struct {
	source string
	accept Accepter
	log    *slog.Logger
	// held is the bytes the source's messages hold of the budget, for
	// Status.InFlightBytes.
	held atomic.Int64
}

// NewIntake is src's Intake.
func NewIntake(src Source) *Intake {
	return &Intake{source: src.Name, accept: src.Accept, log: Log(src.Logger)}
}

// Source is the source's name.
func (in *Intake) Source() string { return in.source }

// Room is how many bytes the source's messages may hold at once: a
// consumer whose client buffers what it fetched bounds that buffer by it.
func (in *Intake) Room() int64 { return in.accept.Share(in.source) }

// Reserve waits, while ctx lasts, for room for a message of n bytes in
// intake's in-flight budget. A consumer reserves before it starts on a
// message (in the loop that takes them from its broker, where it can),
// so that a full budget stops it taking more; Take gives the room back.
// The error is ctx's.
func (in *Intake) Reserve(ctx context.Context, n int) (*receive.Held, error) {
	held, err := in.accept.Hold(ctx, in.source, n)
	if err == nil {
		in.held.Add(int64(held.Size()))
	}
	return held, err
}

// HeldBytes is what the source's messages hold of intake's budget now:
// Status.InFlightBytes.
func (in *Intake) HeldBytes() int64 { return in.held.Load() }

// Take hands env to Accept with the room Reserve gave it (split batches
// are counted there too), gives the room back once Accept has answered,
// and says how to answer the broker.
func (in *Intake) Take(ctx context.Context, held *receive.Held, env receive.Envelope) Outcome {
	defer in.Release(held)
	return in.Try(ctx, held, env)
}

// Try is Take keeping the room: for a consumer that keeps the message in
// memory after Accept's answer (until its broker has the nack, while it
// waits to try again), and whose bytes count until then. Release gives it
// back.
func (in *Intake) Try(ctx context.Context, held *receive.Held, env receive.Envelope) Outcome {
	env.Reserve = held.Reserve
	_, err := in.accept.Accept(ctx, in.source, env)
	return Decide(err)
}

// Refuse is the verdict on a message the consumer cannot even hand to
// Accept (a table row whose headers column is not a JSON object): counted
// under the source by reason and logged as Accept's own rejections are,
// and poison, as they would be.
func (in *Intake) Refuse(ctx context.Context, client string, status int, reason, detail string) Outcome {
	if r, ok := in.accept.(refuser); ok {
		return Decide(r.Refuse(ctx, in.source, client, status, reason, detail))
	}
	return Decide(&receive.Rejection{Status: status, Reason: reason, Detail: detail})
}

// Release gives back the room held has (Reserve's or a Stream's).
func (in *Intake) Release(held *receive.Held) {
	in.held.Add(-int64(held.Size()))
	held.Release()
}

// Stream is what one connection of a consumer holds of intake's budget
// for the bodies it has read off the wire and not yet handed over: a
// consumer whose broker pushes messages (RabbitMQ sends up to its
// prefetch, whatever their size, and its client buffers them all) reserves
// their bytes as they are read, waiting while there is no room, so that
// it stops reading and its broker keeps the rest; each message then takes
// its body's bytes from the Stream (Take) and gives them back as Reserve's
// would. Close gives back what is left when the connection ends.
type Stream struct {
	in   *Intake
	held *receive.Held
	mu   sync.Mutex
	// n is what the stream holds (for HeldBytes); closed, that it was
	// given back.
	n      int64
	closed bool
}

// Stream starts a connection's Stream.
func (in *Intake) Stream() *Stream {
	return &Stream{in: in, held: in.accept.Stream(in.source)}
}

// Fits reports whether the bytes of a message of n bytes are counted: a
// body the stream grows by as it is read, and Take takes for the message,
// must be one by the same rule on both sides.
func (s *Stream) Fits(n int) bool { return s.held.Fits(n) }

// Grow reserves n more bytes read off the wire, waiting for room while
// ctx lasts. The error is ctx's.
func (s *Stream) Grow(ctx context.Context, n int) error {
	if err := s.held.Grow(ctx, n); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		// The connection ended while it waited: nothing holds these.
		s.held.Release()
		return context.Canceled
	}
	s.n += int64(n)
	s.in.held.Add(int64(n))
	return nil
}

// Take hands a message of n bytes its body's room (when Fits(n)): the
// Held that Take, Try and Release use as Reserve's.
func (s *Stream) Take(n int) *receive.Held {
	if !s.Fits(n) {
		return &receive.Held{}
	}
	h := s.held.Split(n)
	s.mu.Lock()
	s.n -= int64(h.Size())
	s.mu.Unlock()
	return h
}

// Close gives back what the stream still holds: the bodies read and never
// handed over (their broker delivers them again).
func (s *Stream) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	s.in.held.Add(-s.n)
	s.n = 0
	s.held.Release()
}
