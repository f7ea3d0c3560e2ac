package kafka

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/oncehook/oncehook/config"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/receive"
)

// cluster starts an in-process Kafka (franz-go's kfake) with one topic of
// parts partitions; it is closed when the test ends.
func cluster(t testing.TB, topic string, parts int32) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(parts, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// produce writes n records to topic's partition part, each a JSON body
// {"id": "<prefix>-<i>"}, and waits for their acks.
func produce(t testing.TB, addrs []string, topic string, part int32, prefix string, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Partition: part, Value: fmt.Appendf(nil, `{"id":%q}`, fmt.Sprintf("%s-%d", prefix, i))}
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// committed is the group's committed offset per partition of topic.
func committed(t testing.TB, addrs []string, group, topic string) map[int32]int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	os, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
	if err != nil {
		t.Fatalf("fetch offsets: %v", err)
	}
	out := map[int32]int64{}
	os.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topic && o.Err == nil {
			out[o.Partition] = o.At
		}
	})
	return out
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
	src := config.Source{Name: "clicks", Consume: &config.Consume{Kafka: &config.KafkaConsume{
		Brokers: addrs, Topic: topic, Group: group, MaxInFlight: maxInFlight}}}
	c, err := newConsumer(src, a, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	c.commitEvery = 50 * time.Millisecond
	c.extra = []kgo.Opt{kgo.HeartbeatInterval(100 * time.Millisecond), kgo.FetchMaxWait(100 * time.Millisecond)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("Run did not return 30 s after its context ended")
			}
		})
	}
	t.Cleanup(stop)
	return c, stop
}

// Invariant 19 on Kafka: a partition's committed offset never passes a
// record whose claim has not committed, however many after it are claimed;
// the other partitions go on; a poison record is rejected once and passed.
func TestConsumerCommitsOnlyTheClaimedPrefix(t *testing.T) {
	const topic = "clicks"
	kc := cluster(t, topic, 2)
	addrs := kc.ListenAddrs()
	produce(t, addrs, topic, 0, "p0", 20)
	produce(t, addrs, topic, 1, "p1", 20)

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
		got = committed(t, addrs, "g1", topic)
		return got[1] == 20
	}) {
		t.Fatalf("partition 1 committed %v; want 20: a record held in partition 0 must not stall it", got)
	}
	time.Sleep(300 * time.Millisecond) // several commit rounds
	if got = committed(t, addrs, "g1", topic); got[0] != 5 {
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
	if !testenv.WaitFor(20*time.Second, func() bool { got = committed(t, addrs, "g1", topic); return got[0] == 20 }) {
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
	kc := cluster(t, topic, 1)
	addrs := kc.ListenAddrs()
	produce(t, addrs, topic, 0, "o", 10)

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
	if got := committed(t, addrs, "g", topic); got[0] != 3 {
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
	if got := committed(t, addrs, "g", topic); got[0] != 10 {
		t.Fatalf("committed %d at the end; want 10", got[0])
	}
}
