package broker

import (
	"context"
	"errors"
	"log/slog"

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
	// Share is how many bytes a source's messages may hold at once.
	Share(source string) int64
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
	return in.accept.Hold(ctx, in.source, n)
}

// Take hands env to Accept with the room Reserve gave it (split batches
// are counted there too), gives the room back once Accept has answered,
// and says how to answer the broker.
func (in *Intake) Take(ctx context.Context, held *receive.Held, env receive.Envelope) Outcome {
	defer held.Release()
	env.Reserve = held.Reserve
	_, err := in.accept.Accept(ctx, in.source, env)
	return Decide(err)
}
