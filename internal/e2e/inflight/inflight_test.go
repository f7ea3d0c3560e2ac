package inflight_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/internal/testenv/brokertest"
	"github.com/oncehook/oncehook/internal/testenv/sqlitetest"
	"github.com/oncehook/oncehook/oncehooktest"
)

// Issue 41 item 14: 200 NATS messages of 4 MiB once held 420 MB with max_inflight_bytes at 64 MiB. These
// tests put a backlog of large messages (~900 KiB each, 225 MiB in all) in a broker, hold the store's
// write lock for a while so that every message the consumer takes waits in Accept (the worst case: it
// would take every message its broker hands out), then let it go, and measure what the gateway counts of
// its budget (Status.InFlightBytes, at most max_inflight_bytes) and the process's heap: what is live at
// each collection (what the gateway holds, whatever the GC's headroom) within a bound far below the
// backlog, and the heap in use within twice that (the GC lets garbage grow to about what is live before
// it collects). Every message is stored exactly once.
const (
	bigMessages = 256
	// kafkaMessages is Kafka's backlog.
	kafkaMessages = 128
	bigMessage    = 900 << 10
	// budget is max_inflight_bytes; one source has all of it.
	budget = 4 << 20
	// liveGrowth bounds the live heap over its level before the gateway started: the budget, what the
	// broker's client buffers beside it (a pull, a frame, a fetch: each about one share), and the copies
	// Accept and the commit make. Held whole, the backlog is 225 MiB.
	liveGrowth = 64 << 20
)

// bigBody is message i of the backlog: JSON with its order id, padded.
func bigBody(i int) []byte {
	return fmt.Appendf(nil, `{"order_id":"big-%04d","pad":"%s"}`, i, strings.Repeat("x", bigMessage))
}

// memoryConfig is a gateway with one queue source (consume, its block) and no destination: what is
// measured is intake's, not delivery's.
func memoryConfig(dir, consume string) string {
	return fmt.Sprintf(`
store: sqlite://%s
max_body_size: 1MiB
max_inflight_bytes: %d
sources:
  - name: orders
    consume: %s
    key: ["json:order_id"]
`, filepath.Join(dir, "oncehook.db"), budget, consume)
}

// peak is the most the process and the gateway held while sampled.
type peak struct {
	live, inuse    uint64 // the heap live at a collection, the heap in use
	held, messages int64  // what the queue source held of its budget, in how many messages
}

// peaks samples, until stop, the process's heap and what the gateway's queue source holds of its budget.
func peaks(gw *oncehooktest.Gateway) (stop func() peak) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	var p peak
	wg.Add(1)
	go func() {
		defer wg.Done()
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			p.inuse, p.live = max(p.inuse, ms.HeapInuse), max(p.live, liveHeap())
			st := gw.ConsumerStatus()[0]
			p.held, p.messages = max(p.held, st.InFlightBytes), max(p.messages, st.InFlight)
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return func() peak { close(done); wg.Wait(); return p }
}

// liveHeap is the heap that was live at the last collection.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// heapNow is the heap live after a collection: the base the growth is measured from.
func heapNow() uint64 {
	runtime.GC()
	return liveHeap()
}

// checkBoundedAndStoredOnce starts the gateway on cfg over a backlog already in its broker, holds the
// store's lock for hold, then waits for every message to be stored, and checks the peaks and that each
// message is one event, stored once.
func checkBoundedAndStoredOnce(t *testing.T, dir, cfg string, messages int, hold time.Duration) {
	t.Helper()
	base := heapNow()
	gw := oncehooktest.Start(t, cfg)
	stop := peaks(gw)
	unlock := sqlitetest.Lock(t, filepath.Join(dir, "oncehook.db"))
	time.Sleep(hold)
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	total := func() int64 {
		v, err := gw.Admin().Stats(context.Background(), admin.StatsQuery{Source: "orders"})
		if err != nil || len(v.Sources) != 1 {
			return -1
		}
		return v.Sources[0].Total.Accepted
	}
	stored := testenv.WaitFor(300*time.Second, func() bool { return total() >= int64(messages) })
	p := stop()
	t.Logf("backlog %d × %d KiB; budget %d KiB: the source held at most %d KiB in %d messages; the heap live at most %d MiB (%d MiB before the gateway), in use %d MiB",
		messages, bigMessage>>10, budget>>10, p.held>>10, p.messages, p.live>>20, base>>20, p.inuse>>20)
	if !stored {
		t.Fatalf("%d of %d messages stored", total(), messages)
	}
	if p.held <= 0 || p.held > budget {
		t.Errorf("the source held up to %d bytes of max_inflight_bytes (%d)", p.held, budget)
	}
	if p.live > base+liveGrowth {
		t.Errorf("the live heap reached %d MiB, %d MiB over its %d MiB before the gateway: over the %d MiB bound (the backlog is %d MiB)",
			p.live>>20, (p.live-base)>>20, base>>20, liveGrowth>>20, messages*bigMessage>>20)
	}
	if p.inuse > 2*(base+liveGrowth) {
		t.Errorf("the heap in use reached %d MiB: over twice the live heap's bound (%d MiB)", p.inuse>>20, (base+liveGrowth)>>20)
	}
	// Stored exactly once: one event per message, no duplicate (an ack lost under load is one), and
	// nothing refused for good.
	page, err := gw.Admin().Events(context.Background(), admin.EventFilter{Source: "orders", Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]int{}
	for _, e := range page.Events {
		keys[e.Key]++
	}
	if len(page.Events) != messages || len(keys) != messages {
		t.Errorf("%d events under %d keys, want %d of each", len(page.Events), len(keys), messages)
	}
	v, err := gw.Admin().Stats(context.Background(), admin.StatsQuery{Source: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	c := v.Sources[0].Total
	if c.Accepted != int64(messages) || c.Duplicate != 0 {
		t.Errorf("stats %+v: want %d accepted, no duplicate", c, messages)
	}
	for reason, n := range c.Rejected {
		// A message the locked store could not take in time is left for its broker, and counted so.
		if reason != "unavailable" {
			t.Errorf("%d messages rejected as %s", n, reason)
		}
	}
}

func TestANATSBacklogOfLargeMessagesStaysWithinMaxInflightBytes(t *testing.T) {
	testenv.SlowUnderRace(t)
	url := testenv.NATS(t)
	js, stream, prefix := brokertest.NATSStream(t, url, jetstream.FileStorage)
	for i := range bigMessages {
		if _, err := js.Publish(context.Background(), prefix+".orders", bigBody(i)); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	checkBoundedAndStoredOnce(t, dir, memoryConfig(dir, `{nats: {url: `+url+`, stream: `+stream+`, ack_wait: 30s}}`), bigMessages, 3*time.Second)
}

func TestARabbitMQBacklogOfLargeMessagesStaysWithinMaxInflightBytes(t *testing.T) {
	testenv.SlowUnderRace(t)
	base, ch, queue, _ := brokertest.RabbitQueue(t)
	for i := range bigMessages {
		dc, err := ch.PublishWithDeferredConfirm("", queue, true, false, amqp.Publishing{DeliveryMode: amqp.Persistent, Body: bigBody(i)})
		if err != nil {
			t.Fatal(err)
		}
		if !dc.Wait() {
			t.Fatalf("publish %d nacked", i)
		}
	}
	dir := t.TempDir()
	checkBoundedAndStoredOnce(t, dir, memoryConfig(dir, `{amqp: {url: "`+base+`", queue: `+queue+`}}`), bigMessages, 3*time.Second)
}

// Kafka: half the backlog (kfake, in this process, and the race detector make each record slow to fetch),
// still twice the bound held whole. The records are produced uncompressed. franz-go's fetches are bounded by the source's share in
// bytes as the broker sends them; a compressed batch is larger once decompressed (see the README).
func TestAKafkaBacklogOfLargeMessagesStaysWithinMaxInflightBytes(t *testing.T) {
	testenv.SlowUnderRace(t)
	kc := testenv.NewKafka(t, 2, "orders")
	producer, err := kgo.NewClient(kgo.SeedBrokers(kc.Addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < kafkaMessages; i += 16 {
		recs := make([]*kgo.Record, 16)
		for j := range recs {
			recs[j] = &kgo.Record{Topic: "orders", Partition: int32(j % 2), Value: bigBody(i + j)}
		}
		if err := producer.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	producer.Close()
	dir := t.TempDir()
	checkBoundedAndStoredOnce(t, dir, memoryConfig(dir, `{kafka: {brokers: [`+strings.Join(kc.Addrs, ", ")+`], topic: orders}}`), kafkaMessages, 3*time.Second)
}
