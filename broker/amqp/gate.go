package amqp

import (
	"context"
	"encoding/binary"
	"net"
	"sync/atomic"
	"time"

	"github.com/oncehook/oncehook/broker"
)

// A RabbitMQ consumer cannot bound by bytes what its broker sends it: the
// broker pushes up to prefetch messages, whatever their size (basic.qos's
// prefetch_size is not implemented), and amqp091-go reads every frame as it
// comes and queues the deliveries, without limit, until the consumer takes
// them. 256 messages of 4 MiB were a gigabyte in the client's queue, far
// past max_inflight_bytes, before the consumer saw the first one's size.
//
// So the consumer's connection is read through a gate. It follows the
// AMQP frames as they pass (type, channel, size, payload, frame end), and
// before it hands amqp091-go the bytes of a message's body it reserves them
// in intake's in-flight budget (broker.Stream), as HTTP intake reserves a
// request's body as it arrives: while there is no room, it stops reading.
// Then TCP's flow control stops the broker, which keeps the rest of the
// queue; nothing is nacked, refused or lost for it. Each delivery takes its
// body's bytes from the stream when the consumer takes it, and gives them
// back once it is answered, so what the consumer holds, read or in Accept,
// stays within its source's share of max_inflight_bytes (with at most one
// read's worth, a frame, beside it).
//
// The gate sits above TLS (conn.go makes the TLS connection itself for
// amqps://), where the frames are plain. It counts only the bodies of
// messages Accept would take (broker.Stream.Fits: at most max_body_size): a
// larger one, which Accept refuses, is read unbounded, as any client reads
// it (the broker's own max_message_size bounds it), since it could never
// fit. The consumer's connection carries nothing else with a body (no
// publish, no basic.get). Bytes the gate cannot follow as frames (a
// broker speaking something else) are let through uncounted.

// AMQP 0-9-1 frames.
const (
	frameMethod    = 1
	frameHeader    = 2
	frameBody      = 3
	frameHeartbeat = 8
	frameEnd       = 0xCE
	// frameHead is type (1), channel (2) and payload size (4).
	frameHead = 7
	// headerBodySize is where a content header's payload holds the body's
	// size: after class id (2) and weight (2), 8 bytes.
	headerBodySize = 4
)

// gate is the consumer's connection, read through intake's budget.
type gate struct {
	net.Conn
	// ctx bounds the waits for room: when the session ends, the gate lets
	// every byte through, so that the broker's last answers (cancel-ok,
	// close-ok) are read.
	ctx    context.Context
	stream *broker.Stream

	// The frame being read: its head, as far as it came; the payload
	// bytes still to come, plus its frame end (0: a head is next).
	head     [frameHead]byte
	headN    int
	typ      byte
	left     int64
	payloadN int64 // payload bytes of this frame read so far
	// size collects a content header's body size.
	size  [headerBodySize + 8]byte
	count bool // the current message's body is counted
	lost  bool // the bytes are not frames as the gate knows them: it only passes them on

	// span is how far ahead the last read deadline was set (the client's
	// heartbeat check): after a wait for room, the deadline is set again
	// that far from now, so that the time the gate held the reads is not
	// taken for a silent broker.
	span atomic.Int64
}

func newGate(conn net.Conn, ctx context.Context, stream *broker.Stream) *gate {
	return &gate{Conn: conn, ctx: ctx, stream: stream}
}

// Read reads from the connection and, before handing over the bytes of a
// counted body among them, reserves them, waiting for room.
func (g *gate) Read(p []byte) (int, error) {
	n, err := g.Conn.Read(p)
	if n > 0 && !g.lost && g.ctx.Err() == nil {
		if body := g.scan(p[:n]); body > 0 {
			start := time.Now()
			if g.stream.Grow(g.ctx, body) == nil && time.Since(start) > time.Second {
				if span := time.Duration(g.span.Load()); span > 0 {
					g.Conn.SetReadDeadline(time.Now().Add(span))
				}
			}
		}
	}
	return n, err
}

// SetReadDeadline is the client's heartbeat check: kept as a span too.
func (g *gate) SetReadDeadline(t time.Time) error {
	g.keep(t)
	return g.Conn.SetReadDeadline(t)
}

// SetDeadline: as SetReadDeadline (the client clears its handshake's
// deadline with it).
func (g *gate) SetDeadline(t time.Time) error {
	g.keep(t)
	return g.Conn.SetDeadline(t)
}

func (g *gate) keep(t time.Time) {
	if t.IsZero() {
		g.span.Store(0)
		return
	}
	g.span.Store(int64(time.Until(t)))
}

// scan follows the frames through b, the next bytes read, and says how
// many of them are a counted body's.
func (g *gate) scan(b []byte) (body int) {
	for len(b) > 0 && !g.lost {
		if g.left == 0 {
			k := copy(g.head[g.headN:], b)
			g.headN += k
			b = b[k:]
			if g.headN < frameHead {
				return body
			}
			g.headN = 0
			g.typ = g.head[0]
			size := binary.BigEndian.Uint32(g.head[3:])
			switch g.typ {
			case frameMethod, frameHeader, frameBody, frameHeartbeat:
			default:
				g.lost = true
				return body
			}
			g.left, g.payloadN = int64(size)+1, 0
			if g.typ == frameHeader {
				g.count = false // until its body's size is read
			}
			continue
		}
		k := int(min(g.left, int64(len(b))))
		chunk := b[:k]
		payload := chunk
		if int64(k) == g.left {
			payload = chunk[:k-1] // the frame end is the chunk's last byte
			if chunk[k-1] != frameEnd {
				g.lost = true
				return body
			}
		}
		switch g.typ {
		case frameHeader:
			if g.payloadN < int64(len(g.size)) {
				c := copy(g.size[g.payloadN:], payload)
				if g.payloadN+int64(c) == int64(len(g.size)) {
					size := binary.BigEndian.Uint64(g.size[headerBodySize:])
					g.count = size <= 1<<31 && g.stream.Fits(int(size))
				}
			}
		case frameBody:
			if g.count {
				body += len(payload)
			}
		}
		g.payloadN += int64(len(payload))
		g.left -= int64(k)
		b = b[k:]
	}
	return body
}
