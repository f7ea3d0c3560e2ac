package kafka

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/oncehook/oncehook/broker"
	"github.com/oncehook/oncehook/deliver"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/receive"
)

// produce writes n records to partition part of k's topic, each a JSON
// body {"id": "<prefix>-<i>"}, at offsets from where the partition ends.
func produce(t testing.TB, k *testenv.Kafka, topic string, part int32, prefix string, n int) {
	t.Helper()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Partition: part, Value: fmt.Appendf(nil, `{"id":%q}`, fmt.Sprintf("%s-%d", prefix, i))}
	}
	k.Produce(t, recs...)
}

// accepter is intake as the consumer sees it: each record's answer is
// decided by rule (nil: accepted), and every call is recorded.
type accepter struct {
	mu     sync.Mutex
	rule   func(id string, call int) error
	calls  map[string]int
	ok     map[string]int // claimed (accepted or duplicate)
	poison map[string]int
	trace  map[string]string
}

func newAccepter(rule func(id string, call int) error) *accepter {
	return &accepter{rule: rule, calls: map[string]int{}, ok: map[string]int{}, poison: map[string]int{}, trace: map[string]string{}}
}

// Hold, Share and Stream are intake's budget, which a test's accepter leaves
// unbounded.
func (a *accepter) Hold(context.Context, string, int) (*receive.Held, error) {
	return &receive.Held{}, nil
}
func (a *accepter) Share(string) int64          { return 0 }
func (a *accepter) Stream(string) *receive.Held { return &receive.Held{} }

func (a *accepter) Accept(ctx context.Context, source string, env receive.Envelope) (receive.Response, error) {
	var body struct {
		ID string `json:"id"`
	}
	json.Unmarshal(env.Body, &body)
	a.mu.Lock()
	a.calls[body.ID]++
	call := a.calls[body.ID]
	rule := a.rule
	a.trace[body.ID] = env.Header.Get("Content-Type")
	a.mu.Unlock()
	var err error
	if rule != nil {
		err = rule(body.ID, call)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		if r, ok := err.(*receive.Rejection); ok && !r.Temporary() {
			a.poison[body.ID]++
		}
		return receive.Response{}, err
	}
	a.ok[body.ID]++
	return receive.Response{Status: receive.StatusAccepted}, nil
}

func (a *accepter) claimed(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ok[id] > 0
}

func (a *accepter) count() (claimed, poison int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.ok), len(a.poison)
}

var (
	unavailable = &receive.Rejection{Status: http.StatusServiceUnavailable, Reason: receive.ReasonUnavailable, Detail: "store down"}
	noKey       = &receive.Rejection{Status: http.StatusUnprocessableEntity, Reason: receive.ReasonMissingKey, Detail: "no key"}
)

// startConsumer runs a consumer of topic in group until the returned stop
// is called (or the test ends).
func startConsumer(t testing.TB, addrs []string, topic, group string, a *accepter, maxInFlight int) (c *Consumer, stop func()) {
	t.Helper()
	c, err := NewConsumer(broker.Source{Name: "clicks", Accept: a}, ConsumeSettings{
		Brokers: addrs, Topic: topic, Group: group, MaxInFlight: maxInFlight})
	if err != nil {
		t.Fatal(err)
	}
	c.commitEvery = 50 * time.Millisecond
	c.extra = []kgo.Opt{kgo.HeartbeatInterval(100 * time.Millisecond), kgo.FetchMaxWait(100 * time.Millisecond)}
	stop = testenv.Run(t, c, 30*time.Second)
	return c, stop
}

// Invariant 19 on Kafka: a partition's committed offset never passes a
// record whose claim has not committed, however many after it are claimed;
// the other partitions go on; a poison record is rejected once and passed.
func TestConsumerCommitsOnlyTheClaimedPrefix(t *testing.T) {
	const topic = "clicks"
	kc := testenv.NewKafka(t, 2, topic)
	addrs := kc.Addrs
	produce(t, kc, topic, 0, "p0", 20)
	produce(t, kc, topic, 1, "p1", 20)

	var mu sync.Mutex
	storeUp := false
	a := newAccepter(func(id string, call int) error {
		switch id {
		case "p0-5": // the store cannot take this one, yet
			mu.Lock()
			defer mu.Unlock()
			if !storeUp {
				return unavailable
			}
		case "p0-10", "p1-3":
			return noKey
		}
		return nil
	})
	_, stop := startConsumer(t, addrs, topic, "g1", a, 8)

	if !testenv.WaitFor(20*time.Second, func() bool { n, p := a.count(); return n == 37 && p == 2 }) {
		n, p := a.count()
		t.Fatalf("claimed %d and rejected %d of 40 records; want 37 and 2", n, p)
	}
	var got map[int32]int64
	if !testenv.WaitFor(5*time.Second, func() bool {
		got = kc.Committed(t, "g1", topic)
		return got[1] == 20
	}) {
		t.Fatalf("partition 1 committed %v; want 20: a record held in partition 0 must not stall it", got)
	}
	time.Sleep(300 * time.Millisecond) // several commit rounds
	if got = kc.Committed(t, "g1", topic); got[0] != 5 {
		t.Fatalf("partition 0 committed at %d while offset 5 is not claimed; want exactly 5", got[0])
	}
	a.mu.Lock()
	retried := a.calls["p0-5"]
	a.mu.Unlock()
	if retried < 2 {
		t.Fatalf("the unavailable record was tried %d times; want it retried", retried)
	}

	mu.Lock()
	storeUp = true
	mu.Unlock()
	if !testenv.WaitFor(20*time.Second, func() bool { got = kc.Committed(t, "g1", topic); return got[0] == 20 }) {
		t.Fatalf("partition 0 committed %v once offset 5 was claimed; want 20", got)
	}
	stop()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, id := range []string{"p0-10", "p1-3"} {
		if a.poison[id] != 1 || a.calls[id] != 1 {
			t.Errorf("poison %s: rejected %d times in %d calls; want once", id, a.poison[id], a.calls[id])
		}
	}
	if ct := a.trace["p0-0"]; ct != "application/json" {
		t.Errorf("a JSON record without Content-Type reached intake with %q; want application/json", ct)
	}
}

// A consumer that stops while a record is unclaimed leaves it to the next
// member: it is read again, never skipped, and what was claimed after it
// comes again as duplicates.
func TestConsumerStoppedBeforeAClaimLeavesTheRecordToTheGroup(t *testing.T) {
	const topic = "orders"
	kc := testenv.NewKafka(t, 1, topic)
	addrs := kc.Addrs
	produce(t, kc, topic, 0, "o", 10)

	first := newAccepter(func(id string, _ int) error {
		if id == "o-3" {
			return unavailable
		}
		return nil
	})
	_, stop := startConsumer(t, addrs, topic, "g", first, 4)
	if !testenv.WaitFor(20*time.Second, func() bool { n, _ := first.count(); return n == 9 }) {
		n, _ := first.count()
		t.Fatalf("first member claimed %d; want 9", n)
	}
	stop()
	if got := kc.Committed(t, "g", topic); got[0] != 3 {
		t.Fatalf("committed %d after a graceful stop with offset 3 unclaimed; want 3", got[0])
	}

	second := newAccepter(nil)
	_, stop2 := startConsumer(t, addrs, topic, "g", second, 4)
	if !testenv.WaitFor(20*time.Second, func() bool { n, _ := second.count(); return n == 7 }) {
		n, _ := second.count()
		t.Fatalf("second member claimed %d; want offsets 3 to 9 (7)", n)
	}
	stop2()
	if !second.claimed("o-3") {
		t.Fatal("the record left unclaimed was skipped")
	}
	if second.claimed("o-2") {
		t.Fatal("a record behind the committed offset was read again")
	}
	if got := kc.Committed(t, "g", topic); got[0] != 10 {
		t.Fatalf("committed %d at the end; want 10", got[0])
	}
}

// Issue 27: a rebalance between two members of one group mid-stream loses
// nothing, and no committed offset ever passes an unclaimed record: a
// second member joins, then the first leaves, while offset 20 of every
// partition is held unclaimed across both rebalances (so every partition
// that moves has claimed records past an unclaimed one, and a full window
// behind it pauses).
func TestRebalanceMidStreamLosesNothingAndNeverCommitsPastAnUnclaimedRecord(t *testing.T) {
	const (
		topic = "events"
		parts = 8
		per   = 250
	)
	kc := testenv.NewKafka(t, parts, topic)
	addrs := kc.Addrs
	for p := range int32(parts) {
		produce(t, kc, topic, p, fmt.Sprintf("p%d", p), per)
	}
	var mu sync.Mutex
	held := true
	rule := func(id string, _ int) error {
		if strings.HasSuffix(id, "-20") {
			mu.Lock()
			defer mu.Unlock()
			if held {
				return unavailable
			}
		}
		time.Sleep(2 * time.Millisecond)
		return nil
	}
	a1, a2 := newAccepter(rule), newAccepter(rule)
	claimed := func(id string) bool { return a1.claimed(id) || a2.claimed(id) }
	total := func() int {
		n1, _ := a1.count()
		n2, _ := a2.count()
		return n1 + n2
	}

	// The check: read the committed offsets first, then the claims (which
	// only grow): every record below a committed offset must be claimed.
	stopCheck := make(chan struct{})
	checked := make(chan int)
	go func() {
		rounds := 0
		defer func() { checked <- rounds }()
		for {
			select {
			case <-stopCheck:
				return
			case <-time.After(10 * time.Millisecond):
			}
			got := kc.Committed(t, "g", topic)
			for p, c := range got {
				for o := range c {
					if id := fmt.Sprintf("p%d-%d", p, o); !claimed(id) {
						t.Errorf("partition %d committed at %d while offset %d (%s) is not claimed", p, c, o, id)
						return
					}
				}
			}
			rounds++
		}
	}()

	_, stop1 := startConsumer(t, addrs, topic, "g", a1, 16)
	if !testenv.WaitFor(20*time.Second, func() bool { return total() >= 400 }) {
		t.Fatalf("claimed %d before the second member; want 400", total())
	}
	_, stop2 := startConsumer(t, addrs, topic, "g", a2, 16)
	if !testenv.WaitFor(20*time.Second, func() bool { n, _ := a2.count(); return n >= 100 }) {
		t.Fatalf("the second member claimed %d; want it to take partitions", total())
	}
	stop1() // leaves the group: its partitions move to the second member
	before := total()
	if !testenv.WaitFor(20*time.Second, func() bool { return total() >= before+200 }) {
		t.Fatalf("claimed %d after the first member left; want progress", total())
	}
	mu.Lock()
	held = false
	mu.Unlock()
	want := parts * per
	if !testenv.WaitFor(30*time.Second, func() bool {
		for p := range parts {
			for o := range per {
				if !claimed(fmt.Sprintf("p%d-%d", p, o)) {
					return false
				}
			}
		}
		return true
	}) {
		t.Fatalf("claimed %d distinct records of %d: a rebalance lost some", total(), want)
	}
	var got map[int32]int64
	if !testenv.WaitFor(10*time.Second, func() bool {
		got = kc.Committed(t, "g", topic)
		for p := range int32(parts) {
			if got[p] != per {
				return false
			}
		}
		return true
	}) {
		t.Fatalf("committed %v at the end; want %d on every partition", got, per)
	}
	stop2()
	close(stopCheck)
	if rounds := <-checked; rounds < 10 {
		t.Fatalf("the committed offsets were checked %d times; want many", rounds)
	}
	a1.mu.Lock()
	a2.mu.Lock()
	again := 0
	for id := range a2.ok {
		if a1.ok[id] > 0 {
			again++
		}
	}
	a2.mu.Unlock()
	a1.mu.Unlock()
	t.Logf("%d records claimed by both members (read again after a rebalance: duplicates, never losses)", again)
	if again == 0 {
		t.Error("no record was read again: no partition moved with a record held in it, and the test proved nothing")
	}
}

func TestPublisherProducesOneRecordPerSendKeyedByEntityOrIdempotencyKey(t *testing.T) {
	const topic = "out"
	kc := testenv.NewKafka(t, 3, topic)
	addrs := kc.Addrs
	pub, err := NewPublisher(broker.Destination{Name: "log"}, PublishSettings{Brokers: addrs, Topic: topic})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	msg := func(key, entity string) *deliver.Message {
		h := http.Header{}
		h.Set("Idempotency-Key", "orders:"+key)
		h.Set("X-Oncehook-Source", "orders")
		h.Set("X-Oncehook-Attempt", "1")
		return &deliver.Message{Source: "orders", Key: key, IdempotencyKey: "orders:" + key, Entity: entity,
			ContentType: "application/json", Header: h, Body: fmt.Appendf(nil, `{"id":%q}`, key)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, m := range []*deliver.Message{msg("evt_1", ""), msg("evt_2", "order-7"), msg("evt_3", "order-7")} {
		if res := pub.Send(ctx, m); res.Kind != deliver.Delivered {
			t.Fatalf("Send %s: %v %s", m.Key, res.Kind, res.Error)
		} else if res.Response == "" {
			t.Errorf("Send %s: no partition and offset in the response", m.Key)
		}
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for len(recs) < 3 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
	}
	if len(recs) != 3 {
		t.Fatalf("read %d records; want 3", len(recs))
	}
	byBody := map[string]*kgo.Record{}
	for _, r := range recs {
		byBody[string(r.Value)] = r
	}
	r1, r2, r3 := byBody[`{"id":"evt_1"}`], byBody[`{"id":"evt_2"}`], byBody[`{"id":"evt_3"}`]
	if r1 == nil || r2 == nil || r3 == nil {
		t.Fatalf("records %v; want the three bodies", recs)
	}
	if string(r1.Key) != "orders:evt_1" || string(r2.Key) != "order-7" {
		t.Errorf("keys %q, %q; want the idempotency key without an entity, the entity with one", r1.Key, r2.Key)
	}
	if r2.Partition != r3.Partition || r2.Offset > r3.Offset {
		t.Errorf("one entity's records at partition %d offset %d and partition %d offset %d: want one partition, in order",
			r2.Partition, r2.Offset, r3.Partition, r3.Offset)
	}
	headers := map[string]string{}
	for _, h := range r1.Headers {
		headers[h.Key] = string(h.Value)
	}
	for k, v := range map[string]string{"Idempotency-Key": "orders:evt_1", "X-Oncehook-Source": "orders", "X-Oncehook-Attempt": "1", "Content-Type": "application/json"} {
		if headers[k] != v {
			t.Errorf("header %s = %q; want %q (headers %v)", k, headers[k], v, headers)
		}
	}
}

// A broker that is down is a failed attempt to retry (the worker holds the
// delivery behind its breaker), answered by the attempt's deadline.
func TestPublisherBrokerDownIsARetryByTheDeadline(t *testing.T) {
	kc := testenv.NewKafka(t, 1, "out")
	addrs := kc.Addrs
	kc.Close()
	pub, err := NewPublisher(broker.Destination{Name: "log"}, PublishSettings{Brokers: addrs, Topic: "out"})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	start := time.Now()
	res := pub.Send(ctx, &deliver.Message{Source: "s", Key: "k", IdempotencyKey: "s:k", Body: []byte(`{}`)})
	if res.Kind != deliver.Retry {
		t.Fatalf("Send to a broker that is down: %v %q; want retry", res.Kind, res.Error)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Send took %v past a 700 ms deadline", d)
	}
}

// A cluster that goes away is said in the source's status (for /readyz,
// /metrics, the dashboard and doctor); the consumer carries on once it is
// back, committing every record once claimed.
func TestConsumerSaysWhenItsClusterIsGoneAndCarriesOnWhenBack(t *testing.T) {
	kc := testenv.NewKafka(t, 1, "t")
	produce(t, kc, "t", 0, "a", 10)
	a := newAccepter(nil)
	c, _ := startConsumer(t, kc.Addrs, "t", "g", a, 4)
	if !testenv.WaitFor(20*time.Second, func() bool { n, _ := a.count(); return n == 10 && c.Status().Connected }) {
		n, _ := a.count()
		t.Fatalf("claimed %d of 10, status %+v", n, c.Status())
	}
	kc.Cut()
	if !testenv.WaitFor(20*time.Second, func() bool { st := c.Status(); return !st.Connected && st.Error != "" }) {
		t.Fatalf("status while the cluster is cut off: %+v; want not connected, with the error", c.Status())
	}
	if st := c.Status(); st.Kind != "kafka" || st.Source != "clicks" || st.Where == "" {
		t.Errorf("status %+v; want the source, kind and what it consumes", st)
	}
	kc.Restore()
	produce(t, kc, "t", 0, "b", 10)
	if !testenv.WaitFor(30*time.Second, func() bool { n, _ := a.count(); return n == 20 && c.Status().Connected }) {
		n, _ := a.count()
		t.Fatalf("after the cluster came back: claimed %d of 20, status %+v", n, c.Status())
	}
	if !testenv.WaitFor(10*time.Second, func() bool { return kc.Committed(t, "g", "t")[0] == 20 }) {
		t.Fatalf("committed %v; want 20", kc.Committed(t, "g", "t"))
	}
}

// An attempt that timed out while the cluster was cut off leaves its
// record in the producer, which writes it once the cluster is back; the
// delivery's next attempt takes that record's ack instead of producing a
// second one. An operator's replay (the attempts start again) produces
// afresh.
func TestPublisherNextAttemptTakesTheRecordThatLandedLate(t *testing.T) {
	kc := testenv.NewKafka(t, 1, "out")
	pub, err := NewPublisher(broker.Destination{Name: "log"}, PublishSettings{Brokers: kc.Addrs, Topic: "out"})
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	send := func(key string, attempt int, wait time.Duration) deliver.Result {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		return pub.Send(ctx, &deliver.Message{Source: "s", Key: key, IdempotencyKey: "s:" + key, Attempt: attempt, Body: []byte(`{}`)})
	}
	if res := send("warm", 1, 5*time.Second); res.Kind != deliver.Delivered {
		t.Fatalf("warm-up: %v %s", res.Kind, res.Error)
	}
	kc.Cut()
	if res := send("k", 1, 300*time.Millisecond); res.Kind != deliver.Retry {
		t.Fatalf("attempt 1 with the cluster cut off: %v; want retry", res.Kind)
	}
	kc.Restore()
	read := func() (n int) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(kc.Addrs...), kgo.ConsumeTopics("out"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
		defer cancel()
		for ctx.Err() == nil {
			cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
				if string(r.Key) == "s:k" {
					n++
				}
			})
		}
		return n
	}
	if !testenv.WaitFor(20*time.Second, func() bool { return read() == 1 }) {
		t.Fatal("the record of the timed-out attempt never landed")
	}
	if res := send("k", 2, 5*time.Second); res.Kind != deliver.Delivered {
		t.Fatalf("attempt 2: %v %s; want delivered by the record that landed", res.Kind, res.Error)
	}
	if n := read(); n != 1 {
		t.Fatalf("%d records for one delivery; want 1", n)
	}
	if res := send("k", 1, 5*time.Second); res.Kind != deliver.Delivered {
		t.Fatalf("replay: %v %s", res.Kind, res.Error)
	}
	if n := read(); n != 2 {
		t.Fatalf("%d records after a replay; want a second one", n)
	}
}
