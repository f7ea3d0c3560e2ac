package oncehook_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/internal/testenv/brokertest"
	"github.com/oncehook/oncehook/internal/testenv/sqlitetest"
	"github.com/oncehook/oncehook/oncehooktest"
)

// metric reads one sample of /metrics (0 when absent).
func metric(t *testing.T, gw *oncehooktest.Gateway, series string) int {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(testenv.Get(t, gw.URL+"/metrics"))
	if m == nil {
		return 0
	}
	f, _ := strconv.ParseFloat(m[1], 64)
	return int(f)
}

// Invariants 3 and 19 over NATS: 2,100 orders published to a stream with
// 900 re-published copies (30%) and 10 poison messages mixed in. Every
// distinct key reaches the HTTP destination exactly once, the copies are
// counted as duplicates in the same metrics as a webhook's, the poison is
// rejected once by reason, and every message is acked.
func TestNATSSourceDeliversEachKeyOnceAndCountsCopiesAsDuplicates(t *testing.T) {
	url := testenv.NATS(t)
	js, stream, prefix := brokertest.NATSStream(t, url, jetstream.MemoryStorage)
	sink := testenv.NewSink(t)
	gw := oncehooktest.Start(t, `
store: sqlite://$DIR/oncehook.db
sources:
  - name: orders
    consume: {nats: {url: `+url+`, stream: `+stream+`, subject: "`+prefix+`.>"}}
    key: ["json:order_id"]
    type: ["json:event"]
    destinations: [app]
destinations:
  - {name: app, url: `+sink.URL+`}
`)
	const distinct, copies, poison = 2100, 900, 10
	total := 0
	pub := func(body string) {
		if _, err := js.PublishAsync(prefix+".orders", []byte(body)); err != nil {
			t.Fatal(err)
		}
		total++
	}
	order := func(i int) string { return fmt.Sprintf(`{"order_id":"o-%05d","event":"order.created"}`, i) }
	for i := range distinct {
		pub(order(i))
		if i%7 < 3 && i/7*3+i%7 < copies { // 3 in every 7 published twice: 900 copies
			pub(order(i))
		}
		if i%210 == 0 {
			pub(`not json {`)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(20 * time.Second):
		t.Fatal("publishes not acked")
	}
	if total != distinct+copies+poison {
		t.Fatalf("published %d, want %d", total, distinct+copies+poison)
	}
	ctx := context.Background()
	cons, err := js.Consumer(ctx, stream, "oncehook-orders")
	if err != nil {
		t.Fatal(err)
	}
	if !testenv.WaitFor(60*time.Second, func() bool {
		info, err := cons.Info(ctx)
		return err == nil && info.AckFloor.Stream == uint64(total) && info.NumAckPending == 0 && len(sink.ByKey()) == distinct
	}) {
		info, _ := cons.Info(ctx)
		t.Fatalf("after 60 s: %d keys delivered of %d; consumer %+v", len(sink.ByKey()), distinct, info)
	}
	time.Sleep(500 * time.Millisecond) // a second delivery would arrive now
	sink.CheckEachOnce(t)
	if n := len(sink.Deliveries()); n != distinct {
		t.Errorf("%d deliveries for %d keys", n, distinct)
	}
	if got := metric(t, gw, `oncehook_events_total{source="orders",verdict="duplicate"}`); got != copies {
		t.Errorf("duplicates counted: %d, want %d", got, copies)
	}
	if got := metric(t, gw, `oncehook_events_total{source="orders",verdict="accepted"}`); got != distinct {
		t.Errorf("accepted counted: %d, want %d", got, distinct)
	}
	if got := metric(t, gw, `oncehook_requests_total{outcome="malformed",source="orders"}`); got != poison {
		t.Errorf("poison counted as malformed: %d, want %d", got, poison)
	}
	if d := sink.Deliveries(); len(d) > 0 && (d[0].Header.Get("X-Oncehook-Type") != "order.created" || d[0].Header.Get("Content-Type") != "application/json") {
		t.Errorf("a delivery's headers: %v", d[0].Header)
	}
	if m := testenv.Get(t, gw.URL+"/metrics"); !strings.Contains(m, `oncehook_source_broker_connected{broker="nats",source="orders"} 1`) {
		t.Errorf("metrics lack the consumer's connection:\n%s", testenv.Grep(m, "broker"))
	}
}

// Invariant 14 over NATS: a webhook source publishes to a NATS destination
// whose broker is down. The deliveries are held (failed attempts, then the
// breaker), none goes to the dead letters, and once the broker is back
// each event is in the stream once, under its <source>:<key> message id.
func TestWebhookToNATSDestinationIsHeldWhileTheBrokerIsDown(t *testing.T) {
	srv := testenv.StartNATSServer(t)
	js, stream, prefix := brokertest.NATSStream(t, srv.URL, jetstream.FileStorage)
	srv.Stop()
	gw := oncehooktest.Start(t, `
store: sqlite://$DIR/oncehook.db
sources:
  - {name: stripe, preset: stripe, secrets: [whsec_test], destinations: [bus]}
destinations:
  - name: bus
    publish: {nats: {url: `+srv.URL+`, subject: "`+prefix+`.{source}.{type}"}}
    timeout: 2s
    retry: {base_delay: 50ms, max_delay: 200ms}
    breaker: {failures: 3, cooldown: 500ms}
`)
	const events = 20
	for i := range events {
		body := fmt.Sprintf(`{"id":"evt_%03d","object":"event","type":"invoice.paid"}`, i)
		resp, err := http.DefaultClient.Do(testenv.SignedRequest(t, gw.URL+"/in/stripe", "stripe", "whsec_test", []byte(body), ""))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("intake while the broker is down: %v %v", resp, err)
		}
		resp.Body.Close()
	}
	time.Sleep(3 * time.Second) // a few breaker cool-downs
	st, _ := gw.Store().Stats(context.Background())
	if st.Dead != 0 || st.Pending != events {
		t.Fatalf("while the broker is down: %+v; want all %d pending, none dead", st, events)
	}
	srv.Start()
	if !testenv.WaitFor(20*time.Second, func() bool {
		st, _ := gw.Store().Stats(context.Background())
		return st.Pending == 0
	}) {
		st, _ := gw.Store().Stats(context.Background())
		t.Fatalf("after the broker came back: %+v", st)
	}
	if st, _ := gw.Store().Stats(context.Background()); st.Dead != 0 || st.Delivered != events {
		t.Fatalf("after: %+v", st)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil || info.State.Msgs != events {
		t.Fatalf("the stream holds %+v (%v), want %d messages", info.State, err, events)
	}
	ids := map[string]bool{}
	for seq := uint64(1); seq <= events; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if m.Subject != prefix+".stripe.invoice.paid" {
			t.Errorf("subject %q", m.Subject)
		}
		ids[m.Header.Get("Nats-Msg-Id")] = true
	}
	for i := range events {
		if id := fmt.Sprintf("stripe:evt_%03d", i); !ids[id] {
			t.Errorf("no message with Nats-Msg-Id %s", id)
		}
	}
}

// Invariant 19 with the store down: while another process holds SQLite's
// write lock, no claim commits, so no message is acked (each is nakked and
// comes back); once the lock goes, every message is taken, acked, and
// delivered once.
func TestNATSMessagesAreNotAckedWhileTheStoreCannotCommit(t *testing.T) {
	t.Parallel()
	url := testenv.NATS(t)
	js, stream, prefix := brokertest.NATSStream(t, url, jetstream.MemoryStorage)
	sink := testenv.NewSink(t)
	dir := t.TempDir()
	gw := oncehooktest.Start(t, `
store: sqlite://`+filepath.Join(dir, "oncehook.db")+`
sources:
  - name: orders
    consume: {nats: {url: `+url+`, stream: `+stream+`, ack_wait: 2s}}
    key: ["json:order_id"]
    destinations: [app]
destinations:
  - {name: app, url: `+sink.URL+`}
`)
	cons := func() *jetstream.ConsumerInfo {
		c, err := js.Consumer(context.Background(), stream, "oncehook-orders")
		if err != nil {
			return &jetstream.ConsumerInfo{}
		}
		info, _ := c.Info(context.Background())
		if info == nil {
			return &jetstream.ConsumerInfo{}
		}
		return info
	}
	if !testenv.WaitFor(10*time.Second, func() bool { return gw.ConsumerStatus()[0].Connected }) {
		t.Fatalf("not consuming: %+v", gw.ConsumerStatus())
	}
	unlock := sqlitetest.Lock(t, filepath.Join(dir, "oncehook.db"))
	const orders = 100
	for i := range orders {
		if _, err := js.Publish(context.Background(), prefix+".orders", fmt.Appendf(nil, `{"order_id":"o-%03d"}`, i)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(4 * time.Second) // two ack waits: each message handed out, refused, handed out again
	if info := cons(); info.AckFloor.Stream != 0 || info.NumRedelivered == 0 {
		t.Fatalf("while the store cannot commit: ack floor %d, redelivered %d; want nothing acked, messages handed out again", info.AckFloor.Stream, info.NumRedelivered)
	}
	if n := len(sink.Deliveries()); n != 0 {
		t.Fatalf("%d deliveries while the store could not commit", n)
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	if !testenv.WaitFor(60*time.Second, func() bool {
		info := cons()
		return info.AckFloor.Stream == orders && info.NumAckPending == 0 && len(sink.ByKey()) == orders
	}) {
		t.Fatalf("after the store came back: %d of %d delivered, consumer %+v", len(sink.ByKey()), orders, cons())
	}
	time.Sleep(300 * time.Millisecond)
	sink.CheckEachOnce(t)
}

// Issue 41 item 14: a queue's messages count against max_inflight_bytes
// as request bodies do (200 messages of 4 MiB once held 420 MB with 64 MiB
// set). While the store cannot commit, every message taken waits in
// Accept: a NATS source then holds at most what its share of the budget
// holds (3 messages of 600 KiB in 2 MiB), not every message its broker
// hands out, and the rest wait in the stream. Once the store is back,
// every message is taken and delivered once.
func TestQueueMessagesCountAgainstMaxInflightBytes(t *testing.T) {
	t.Parallel()
	url := testenv.NATS(t)
	js, stream, prefix := brokertest.NATSStream(t, url, jetstream.MemoryStorage)
	sink := testenv.NewSink(t)
	dir := t.TempDir()
	gw := oncehooktest.Start(t, `
store: sqlite://`+filepath.Join(dir, "oncehook.db")+`
max_body_size: 1MiB
max_inflight_bytes: 2MiB
sources:
  - name: orders
    consume: {nats: {url: `+url+`, stream: `+stream+`, ack_wait: 20s}}
    key: ["json:order_id"]
    destinations: [app]
destinations:
  - {name: app, url: `+sink.URL+`}
`)
	if !testenv.WaitFor(10*time.Second, func() bool { return gw.ConsumerStatus()[0].Connected }) {
		t.Fatalf("not consuming: %+v", gw.ConsumerStatus())
	}
	unlock := sqlitetest.Lock(t, filepath.Join(dir, "oncehook.db"))
	const orders, size = 24, 600 << 10
	pad := strings.Repeat("x", size)
	for i := range orders {
		if _, err := js.Publish(context.Background(), prefix+".orders", fmt.Appendf(nil, `{"order_id":"o-%03d","pad":"%s"}`, i, pad)); err != nil {
			t.Fatal(err)
		}
	}
	most := int64(0)
	for end := time.Now().Add(4 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		most = max(most, gw.ConsumerStatus()[0].InFlight)
	}
	if most == 0 || most > 3 {
		t.Fatalf("while the store could not commit, the source held up to %d messages of %d KiB; want 1 to 3 (2 MiB of max_inflight_bytes)", most, size>>10)
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	if !testenv.WaitFor(60*time.Second, func() bool { return len(sink.ByKey()) == orders }) {
		t.Fatalf("after the store came back: %d of %d delivered", len(sink.ByKey()), orders)
	}
	time.Sleep(300 * time.Millisecond)
	sink.CheckEachOnce(t)
}
