package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/oncehook/oncehook/broker"
	"github.com/oncehook/oncehook/receive"
)

const (
	defaultMaxInFlight = 1024
	// windowFactor × max_in_flight is how many offsets a partition keeps
	// behind its commit point before its fetching pauses.
	windowFactor = 4
	// commitEvery is how often the claimed prefixes are committed while
	// consuming (and always when a partition is let go, and at shutdown).
	commitEvery = time.Second
	// finalCommit bounds the commit at shutdown and the wait for the
	// Accepts in flight then.
	finalCommit = 10 * time.Second
	retryFirst  = 100 * time.Millisecond
	retryCap    = 10 * time.Second
)

// Consumer is a Kafka source: a consumer group member that claims each
// record through Accept and commits per partition only the claimed prefix
// (see the package doc).
type Consumer struct {
	source string
	topic  string
	group  string
	seeds  []string
	verify bool
	in     *broker.Intake
	log    *slog.Logger
	health *broker.Health

	maxInFlight int
	window      int
	session     time.Duration // 0: kgo's default
	commitEvery time.Duration
	// extra is added to the client's options (tests: a short session).
	extra []kgo.Opt

	mu       sync.Mutex
	parts    map[tp]*partition
	inFlight int           // records held: in Accept or waiting to retry
	waiting  int           // records polled that wait for room in intake's budget
	room     chan struct{} // pinged when inFlight or waiting goes down
	all      sync.WaitGroup

	commitMu sync.Mutex // one commit at a time, so none lands behind a later one
	lastErr  string     // the last fetch error logged (guarded by mu)
}

type tp struct {
	topic     string
	partition int32
}

// partition is one assigned partition's book: the records taken from it in
// offset order, which of them are done, and the commit point.
type partition struct {
	tp
	queue     []*entry // taken and not yet behind the commit point, in offset order
	head      int      // queue[head:] is live
	next      int64    // commit point: one past the last record of the done prefix (-1: none yet)
	epoch     int32    // that record's leader epoch
	committed int64    // the last point committed (-1: none)
	paused    bool
	stop      chan struct{} // closed when the partition is let go: no start, no retry
	running   sync.WaitGroup
}

type entry struct {
	offset int64
	epoch  int32
	done   bool
}

func (p *partition) held() int { return len(p.queue) - p.head }

// advance moves the commit point past the done records at the head.
func (p *partition) advance() {
	for p.head < len(p.queue) && p.queue[p.head].done {
		e := p.queue[p.head]
		p.next, p.epoch = e.offset+1, e.epoch
		p.queue[p.head] = nil
		p.head++
	}
	if p.head > 64 && p.head*2 >= len(p.queue) {
		p.queue = append(p.queue[:0], p.queue[p.head:]...)
		p.head = 0
	}
}

// NewConsumer is src's consumer, from its consume.kafka settings
// (checked), which name the brokers, topic and group. It does not dial:
// Run does.
func NewConsumer(src broker.Source, k ConsumeSettings) (*Consumer, error) {
	if len(k.Brokers) == 0 || k.Topic == "" {
		return nil, errors.New("brokers and topic are required")
	}
	group := k.Group
	if group == "" {
		group = "oncehook-" + src.Name
	}
	max := k.MaxInFlight
	if max <= 0 {
		max = defaultMaxInFlight
	}
	return &Consumer{
		source: src.Name, topic: k.Topic, group: group, seeds: k.Brokers, verify: src.Verify,
		in: broker.NewIntake(src), log: broker.Log(src.Logger),
		health:      broker.NewHealth(src.Name, "kafka", "topic "+k.Topic+" group "+group, time.Now()),
		maxInFlight: max, window: windowFactor * max, commitEvery: commitEvery, session: time.Duration(k.SessionTimeout),
		parts: map[tp]*partition{}, room: make(chan struct{}, 1),
	}, nil
}

// Status is the consumer's connection to its brokers.
func (c *Consumer) Status() broker.Status {
	st := c.health.Status()
	st.InFlightBytes = c.in.HeldBytes()
	return st
}

// OnBrokerConnect is kgo's hook: each dial says whether the brokers are
// reachable. (franz-go reconnects by itself, with backoff.)
func (c *Consumer) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err != nil {
		c.health.Lost(err, time.Now())
		return
	}
	c.health.Connected(time.Now())
}

// Run consumes until ctx ends; then it stops taking records, lets the
// Accepts in flight answer, commits what is claimed and leaves the group.
func (c *Consumer) Run(ctx context.Context) error {
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.seeds...),
		kgo.ConsumerGroup(c.group),
		kgo.ConsumeTopics(c.topic),
		kgo.DisableAutoCommit(),
		// A poll and a rebalance callback exclude each other: the records
		// of one poll are entered in the books before any partition can be
		// taken away, so no record is started for a partition we lost.
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsRevoked(c.revoked),
		kgo.OnPartitionsLost(c.lost),
		kgo.WithHooks(c),
		kgo.ClientID("oncehook"),
	}
	if c.session > 0 {
		opts = append(opts, kgo.SessionTimeout(c.session))
	}
	if share := c.in.Room(); share > 0 {
		// What franz-go fetches ahead, per broker, is bounded by the
		// source's share of max_inflight_bytes too (its default is 50 MiB
		// a fetch): bytes as the broker sends them (a compressed batch is
		// larger once decompressed).
		opts = append(opts, kgo.FetchMaxBytes(int32(min(share, 50<<20))), kgo.FetchMaxPartitionBytes(int32(min(share, 1<<20))))
	}
	cl, err := kgo.NewClient(append(opts, c.extra...)...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	committerDone := make(chan struct{})
	cctx, stopCommitter := context.WithCancel(ctx)
	go func() {
		defer close(committerDone)
		t := time.NewTicker(c.commitEvery)
		defer t.Stop()
		for {
			select {
			case <-cctx.Done():
				return
			case <-t.C:
				c.commit(cctx, cl, nil)
			}
		}
	}()

	for ctx.Err() == nil {
		free := c.waitRoom(ctx)
		if free == 0 {
			break
		}
		fetches := cl.PollRecords(ctx, free)
		if fetches.IsClientClosed() {
			cl.AllowRebalance()
			break
		}
		fetches.EachError(func(topic string, part int32, err error) {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return
			}
			c.health.Lost(err, time.Now())
			c.mu.Lock()
			fresh := err.Error() != c.lastErr
			c.lastErr = err.Error()
			c.mu.Unlock()
			if fresh {
				c.log.Warn("kafka fetch failed", "topic", topic, "partition", part, "err", err)
			}
		})
		fetches.EachRecord(func(r *kgo.Record) { c.take(ctx, cl, r) })
		cl.AllowRebalance()
	}

	// Shutdown: stop retries, let the Accepts in flight answer, commit the
	// claimed prefixes, and leave the group (whose revoke then finds
	// nothing left to commit).
	stopCommitter()
	<-committerDone
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalCommit)
	defer cancel()
	c.letGo(fctx, cl, nil, true)
	cl.CloseAllowingRebalance()
	c.all.Wait()
	return nil
}

// waitRoom waits until fewer than max_in_flight records are held and
// every record polled has its room in intake's budget, and says how many
// more may be taken (0: ctx ended). It waits before a poll, never inside
// one, so a full budget never blocks a rebalance; and a poll waits for
// the records of the last to be counted in the budget, so what the
// consumer holds beyond it is one poll's records at most, which franz-go
// fetched in one go (see FetchMaxBytes in Run), not every record its
// count allows.
func (c *Consumer) waitRoom(ctx context.Context) int {
	for {
		c.mu.Lock()
		free := c.maxInFlight - c.inFlight
		waiting := c.waiting
		c.mu.Unlock()
		if free > 0 && waiting == 0 {
			return free
		}
		select {
		case <-ctx.Done():
			return 0
		case <-c.room:
		}
	}
}

// take enters r in its partition's book and starts claiming it.
func (c *Consumer) take(ctx context.Context, cl *kgo.Client, r *kgo.Record) {
	key := tp{r.Topic, r.Partition}
	c.mu.Lock()
	p := c.parts[key]
	if p == nil {
		p = &partition{tp: key, next: -1, committed: -1, stop: make(chan struct{})}
		c.parts[key] = p
	}
	e := &entry{offset: r.Offset, epoch: r.LeaderEpoch}
	p.queue = append(p.queue, e)
	c.inFlight++
	c.waiting++
	p.running.Add(1)
	c.all.Add(1)
	if !p.paused && p.held() >= c.window {
		// A record at the head is still being tried: keep the book
		// bounded, and let the other partitions go on.
		p.paused = true
		cl.PauseFetchPartitions(map[string][]int32{p.topic: {p.partition}})
		c.log.Warn("kafka partition paused: a record holds its commit point", "topic", p.topic, "partition", p.partition, "offset", p.queue[p.head].offset)
	}
	c.mu.Unlock()
	c.health.InFlight(1)
	go c.handle(ctx, cl, p, e, r)
}

// handle claims one record, retrying a Temporary rejection until the
// partition is let go, and marks it done when its claim (or its poison
// verdict) is final.
func (c *Consumer) handle(ctx context.Context, cl *kgo.Client, p *partition, e *entry, r *kgo.Record) {
	defer c.all.Done()
	defer p.running.Done()
	env := c.envelope(r)
	// The Accept in flight is let finish at shutdown (its answer is a
	// commit), bounded by finalCommit once ctx has ended.
	actx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	stopAfter := context.AfterFunc(ctx, func() { time.AfterFunc(finalCommit, cancel) })
	defer stopAfter()

	// Waiting for room in intake's budget ends as a retry's backoff does:
	// at shutdown, or when the partition is let go.
	wctx, stopWaiting := context.WithCancel(ctx)
	defer stopWaiting()
	go func() {
		select {
		case <-p.stop:
			stopWaiting()
		case <-wctx.Done():
		}
	}()
	// The record's bytes are counted in intake's budget from now until it
	// is done or let go, its waits to try again included: it is in memory
	// all that time.
	held, err := c.in.Reserve(wctx, len(r.Value))
	c.mu.Lock()
	c.waiting--
	c.mu.Unlock()
	c.ping()
	done := false
	for attempt := 0; err == nil; attempt++ {
		out := c.in.Try(actx, held, env)
		if out.Verdict == broker.Ack {
			done = true
			break
		}
		if out.Verdict == broker.Poison {
			// Rejected once, counted by Accept; the commit point passes
			// it. Kafka has no dead-letter queue: the record stays in the
			// topic until its retention ends.
			c.log.Warn("kafka record rejected", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset,
				"reason", out.Rejection.Reason, "detail", out.Rejection.Detail)
			done = true
			break
		}
		if attempt == 0 {
			c.log.Warn("kafka record not claimed: trying again", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "err", out.Err)
		}
		t := time.NewTimer(broker.Backoff(attempt+1, retryFirst, retryCap))
		select {
		case <-t.C:
			continue
		case <-p.stop:
		case <-ctx.Done():
		}
		t.Stop()
		break // let go: left uncommitted, for the group to deliver again
	}
	if err == nil {
		c.in.Release(held)
	} // else cut at shutdown (or let go) before its room came: left uncommitted

	c.mu.Lock()
	e.done = done
	c.inFlight--
	p.advance()
	if p.paused && p.held() < c.window/2 {
		p.paused = false
		if c.parts[p.tp] == p {
			cl.ResumeFetchPartitions(map[string][]int32{p.topic: {p.partition}})
		}
	}
	c.mu.Unlock()
	c.health.InFlight(-1)
	c.ping()
}

// ping tells waitRoom to look again.
func (c *Consumer) ping() {
	select {
	case c.room <- struct{}{}:
	default:
	}
}

// envelope is the record as intake takes it. A signature's age is
// measured against the record's timestamp: the producer's clock when it
// produced the record (the topic's message.timestamp.type CreateTime, the
// default) or the broker's when it appended it (LogAppendTime); a record
// of the old format without one is measured against when it is consumed.
func (c *Consumer) envelope(r *kgo.Record) receive.Envelope {
	h := make(http.Header, len(r.Headers)+2)
	for _, kv := range r.Headers {
		h.Add(http.CanonicalHeaderKey(kv.Key), string(kv.Value))
	}
	if len(r.Key) > 0 && h.Get("Kafka-Key") == "" {
		// The record's key, for a key rule that wants it (header:Kafka-Key).
		h.Set("Kafka-Key", string(r.Key))
	}
	broker.DefaultContentType(h, r.Value)
	env := receive.Envelope{
		Header: h, Body: r.Value, ReceivedAt: time.Now(), Queued: true, Trace: h.Get("Traceparent"),
		SkipVerify: !c.verify, Client: "kafka:" + r.Topic,
	}
	if r.Attrs.TimestampType() >= 0 && r.Timestamp.UnixMilli() > 0 {
		env.Enqueued = r.Timestamp
	}
	return env
}

// revoked is kgo's OnPartitionsRevoked: the group takes these partitions
// away (a rebalance, or leaving). Their claimed prefixes are committed
// before they go.
func (c *Consumer) revoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	c.letGo(ctx, cl, revoked, true)
}

// lost is kgo's OnPartitionsLost: the member is out of the group, and a
// commit now could land on another member's partition; the new owner reads
// again from the last commit (duplicates, counted).
func (c *Consumer) lost(ctx context.Context, cl *kgo.Client, lost map[string][]int32) {
	c.letGo(ctx, cl, lost, false)
}

// letGo takes partitions out of the books (nil: all of them): no record of
// theirs starts or retries any more; it waits for their Accepts in flight
// and, when commit is set, commits their claimed prefixes.
func (c *Consumer) letGo(ctx context.Context, cl *kgo.Client, which map[string][]int32, commit bool) {
	c.mu.Lock()
	var gone []*partition
	var resume map[string][]int32
	for key, p := range c.parts {
		if which != nil && !contains(which[key.topic], key.partition) {
			continue
		}
		delete(c.parts, key)
		close(p.stop)
		if p.paused {
			if resume == nil {
				resume = map[string][]int32{}
			}
			// A pause outlives the assignment in kgo: lift it, or the
			// partition would stay paused if it came back.
			resume[key.topic] = append(resume[key.topic], key.partition)
		}
		gone = append(gone, p)
	}
	c.mu.Unlock()
	if resume != nil {
		cl.ResumeFetchPartitions(resume)
	}
	for _, p := range gone {
		p.running.Wait()
	}
	if commit && len(gone) > 0 {
		c.commit(ctx, cl, gone)
	}
}

func contains(ps []int32, p int32) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

// commit commits the claimed prefix of each partition in ps (nil: every
// partition in the books) that moved since its last commit.
func (c *Consumer) commit(ctx context.Context, cl *kgo.Client, ps []*partition) {
	c.commitMu.Lock()
	defer c.commitMu.Unlock()
	c.mu.Lock()
	if ps == nil {
		for _, p := range c.parts {
			ps = append(ps, p)
		}
	}
	offsets := map[string]map[int32]kgo.EpochOffset{}
	byTP := map[tp]*partition{}
	for _, p := range ps {
		if p.next <= p.committed {
			continue
		}
		if offsets[p.topic] == nil {
			offsets[p.topic] = map[int32]kgo.EpochOffset{}
		}
		offsets[p.topic][p.partition] = kgo.EpochOffset{Epoch: p.epoch, Offset: p.next}
		byTP[p.tp] = p
	}
	c.mu.Unlock()
	if len(offsets) == 0 {
		return
	}
	cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, req *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				c.log.Warn("kafka commit failed: its records will be read again, as duplicates", "err", err)
			}
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, t := range resp.Topics {
			for _, rp := range t.Partitions {
				p := byTP[tp{t.Topic, rp.Partition}]
				if p == nil {
					continue
				}
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					c.log.Warn("kafka commit refused for a partition", "topic", t.Topic, "partition", rp.Partition, "err", err)
					continue
				}
				if o := offsets[t.Topic][rp.Partition].Offset; o > p.committed {
					p.committed = o
				}
			}
		}
	})
}
