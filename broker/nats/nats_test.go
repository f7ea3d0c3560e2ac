package nats

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/oncehook/oncehook/broker"
	"github.com/oncehook/oncehook/deliver"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/receive"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func unique() string {
	var b [5]byte
	rand.Read(b[:])
	return strings.ToUpper(hex.EncodeToString(b[:]))
}

// testStream makes a stream of its own (name T<id>, subjects t<id>.>) on
// the server at url, deleted when the test ends.
func testStream(t *testing.T, url string, edit ...func(*jetstream.StreamConfig)) (jetstream.JetStream, string, string) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	id := unique()
	cfg := jetstream.StreamConfig{Name: "T" + id, Subjects: []string{"t" + id + ".>"}}
	for _, e := range edit {
		e(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		js.DeleteStream(ctx, cfg.Name)
	})
	return js, cfg.Name, "t" + id
}

func publish(t *testing.T, js jetstream.JetStream, subject, body string, header ...string) {
	t.Helper()
	m := &nats.Msg{Subject: subject, Data: []byte(body), Header: nats.Header{}}
	for i := 0; i+1 < len(header); i += 2 {
		m.Header.Set(header[i], header[i+1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := js.PublishMsg(ctx, m); err != nil {
		t.Fatal(err)
	}
}

// accepter is Accept as a script: each envelope goes to fn, and what each
// call saw is kept.
type accepter struct {
	mu   sync.Mutex
	seen []receive.Envelope
	fn   func(n int, env receive.Envelope) (receive.Response, error)
}

// Hold, Share and Stream are intake's budget, which a test's accepter leaves
// unbounded.
func (a *accepter) Hold(context.Context, string, int) (*receive.Held, error) {
	return &receive.Held{}, nil
}
func (a *accepter) Share(string) int64          { return 0 }
func (a *accepter) Stream(string) *receive.Held { return &receive.Held{} }

func (a *accepter) Accept(ctx context.Context, source string, env receive.Envelope) (receive.Response, error) {
	a.mu.Lock()
	a.seen = append(a.seen, env)
	n := len(a.seen)
	fn := a.fn
	a.mu.Unlock()
	if fn == nil {
		return receive.Response{Status: receive.StatusAccepted}, nil
	}
	return fn(n, env)
}

func (a *accepter) bodies() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]string, len(a.seen))
	for i, e := range a.seen {
		out[i] = string(e.Body)
	}
	return out
}

// holding is an accepter whose Accepts wait until release is closed, as
// they would for a commit, and then accept.
func holding(release <-chan struct{}) *accepter {
	return &accepter{fn: func(int, receive.Envelope) (receive.Response, error) {
		<-release
		return receive.Response{Status: receive.StatusAccepted}, nil
	}}
}

func natsSource(url, stream, subject string, pending int) ConsumeSettings {
	return ConsumeSettings{URL: url, Stream: stream, Subject: subject, MaxAckPending: pending}
}

// consume starts a consumer of the source orders with settings s that
// hands each message to a, and stops it when the test ends (or at stop),
// checking Run returned.
func consume(t *testing.T, s ConsumeSettings, a *accepter) (c broker.Consumer, stop func()) {
	t.Helper()
	c = NewConsumer(broker.Source{Name: "orders", Accept: a, Logger: quiet()}, s)
	return c, testenv.Run(t, c, 15*time.Second)
}

func eventually(t *testing.T, what string, within time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func consumerInfo(t *testing.T, js jetstream.JetStream, stream, durable string) *jetstream.ConsumerInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The gateway's consumer creates its durable once it runs: a test that
	// asks right after starting it waits for it, as an operator would.
	c, err := js.Consumer(ctx, stream, durable)
	for errors.Is(err, jetstream.ErrConsumerNotFound) && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
		c, err = js.Consumer(ctx, stream, durable)
	}
	if err != nil {
		t.Fatal(err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// Invariant 19: a message is acked only once Accept has answered (its
// claim committed). While Accept waits for the commit, JetStream still
// holds the message as unacked; after, it is acked.
func TestInvariant19MessageIsAckedOnlyAfterAcceptCommitted(t *testing.T) {
	url := testenv.NATS(t)
	js, stream, subj := testStream(t, url)
	release := make(chan struct{})
	a := holding(release)
	c, _ := consume(t, natsSource(url, stream, "", 0), a)
	publish(t, js, subj+".a", `{"order_id":"o1"}`)
	eventually(t, "Accept is called", 10*time.Second, func() bool { return len(a.bodies()) == 1 })
	time.Sleep(200 * time.Millisecond)
	if info := consumerInfo(t, js, stream, DefaultDurable("orders")); info.NumAckPending != 1 || info.AckFloor.Stream != 0 {
		t.Fatalf("while Accept waits for its commit: ack pending %d, ack floor %d; want 1 and 0 (not acked)", info.NumAckPending, info.AckFloor.Stream)
	}
	if st := c.Status(); st.InFlight != 1 || !st.Connected {
		t.Errorf("status while in flight: %+v", st)
	}
	close(release)
	eventually(t, "the message is acked after Accept answered", 5*time.Second, func() bool {
		info := consumerInfo(t, js, stream, DefaultDurable("orders"))
		return info.NumAckPending == 0 && info.AckFloor.Stream == 1
	})
}

// Invariant 19: a store that cannot commit leaves the message unacked; it
// is nakked with a delay and delivered again until the store takes it:
// nothing is acked and lost.
func TestInvariant19StoreUnavailableLeavesTheMessageForRedelivery(t *testing.T) {
	url := testenv.NATS(t)
	js, stream, subj := testStream(t, url)
	a := &accepter{fn: func(n int, _ receive.Envelope) (receive.Response, error) {
		if n <= 2 {
			return receive.Response{}, &receive.Rejection{Status: http.StatusServiceUnavailable, Reason: receive.ReasonUnavailable, Detail: "store down"}
		}
		return receive.Response{Status: receive.StatusAccepted}, nil
	}}
	consume(t, natsSource(url, stream, "", 0), a)
	publish(t, js, subj+".a", `{"order_id":"o1"}`)
	// Nak delays of 1 s then 2 s.
	eventually(t, "three deliveries (two refused, one taken)", 10*time.Second, func() bool { return len(a.bodies()) == 3 })
	eventually(t, "acked once taken", 5*time.Second, func() bool {
		info := consumerInfo(t, js, stream, DefaultDurable("orders"))
		return info.NumAckPending == 0 && info.AckFloor.Stream == 1
	})
	time.Sleep(300 * time.Millisecond)
	if got := a.bodies(); len(got) != 3 {
		t.Errorf("deliveries: %d, want 3", len(got))
	}
}

// Invariant 19: a poison message (rejected by a reason no retry fixes) is
// terminated once, never redelivered, and the messages behind it keep
// flowing.
func TestInvariant19PoisonIsTerminatedOnceAndNeverStallsTheQueue(t *testing.T) {
	url := testenv.NATS(t)
	js, stream, subj := testStream(t, url)
	a := &accepter{fn: func(_ int, env receive.Envelope) (receive.Response, error) {
		if bytes.Contains(env.Body, []byte("poison")) {
			return receive.Response{}, &receive.Rejection{Status: http.StatusUnprocessableEntity, Reason: receive.ReasonMissingKey, Detail: "no key"}
		}
		return receive.Response{Status: receive.StatusAccepted}, nil
	}}
	// One in flight at a time: a stalled poison message would stop all.
	consume(t, natsSource(url, stream, "", 1), a)
	for i := range 30 {
		body := `{"order_id":"o` + string(rune('a'+i%26)) + `"}`
		if i%5 == 0 {
			body = `{"poison":true}`
		}
		publish(t, js, subj+".a", body)
	}
	// Within 25 s, under the 30 s ack wait: a poison message that held
	// its slot until JetStream gave up on it would take longer, and would
	// come back (counted below). A loaded CI machine once took over 10 s.
	eventually(t, "every message answered", 25*time.Second, func() bool {
		info := consumerInfo(t, js, stream, DefaultDurable("orders"))
		return info.AckFloor.Stream == 30 && info.NumAckPending == 0
	})
	time.Sleep(300 * time.Millisecond)
	poison := 0
	for _, b := range a.bodies() {
		if strings.Contains(b, "poison") {
			poison++
		}
	}
	if got := len(a.bodies()); got != 30 || poison != 6 {
		t.Errorf("Accept saw %d messages with %d poison; want 30 with 6 (each once)", got, poison)
	}
	if info := consumerInfo(t, js, stream, DefaultDurable("orders")); info.NumRedelivered != 0 {
		t.Errorf("redelivered: %d, want 0", info.NumRedelivered)
	}
}

// max_ack_pending bounds the messages in flight, which is also how many
// Accepts run at once.
func TestMaxAckPendingBoundsTheMessagesInFlight(t *testing.T) {
	url := testenv.NATS(t)
	js, stream, subj := testStream(t, url)
	var now, most atomic.Int32
	release := make(chan struct{})
	a := &accepter{fn: func(int, receive.Envelope) (receive.Response, error) {
		n := now.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		<-release
		now.Add(-1)
		return receive.Response{Status: receive.StatusAccepted}, nil
	}}
	c, _ := consume(t, natsSource(url, stream, "", 4), a)
	for range 20 {
		publish(t, js, subj+".a", `{}`)
	}
	eventually(t, "four in flight", 10*time.Second, func() bool { return now.Load() == 4 })
	time.Sleep(300 * time.Millisecond)
	if m := most.Load(); m != 4 {
		t.Errorf("at most %d in flight, want 4", m)
	}
	if st := c.Status(); st.InFlight != 4 {
		t.Errorf("status in flight %d, want 4", st.InFlight)
	}
	close(release)
	eventually(t, "all twenty taken", 10*time.Second, func() bool { return len(a.bodies()) == 20 })
	if m := most.Load(); m > 4 {
		t.Errorf("at most %d in flight, want 4", m)
	}
}

// What Accept gets of a message: its headers under canonical keys, its
// bytes as they are, its traceparent, a JSON content type when it names
// none, and verification skipped unless the source asks for it.
func TestEnvelopeCarriesTheMessageAsReceived(t *testing.T) {
	url := testenv.NATS(t)
	js, stream, subj := testStream(t, url)
	a := &accepter{}
	src := natsSource(url, stream, subj+".in", 0)
	consume(t, src, a)
	publish(t, js, subj+".other", `{"not":"mine"}`) // outside the filter
	tp := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	publish(t, js, subj+".in", ` {"order_id":"o1"}`, "nats-msg-id", "m-1", "traceparent", tp)
	publish(t, js, subj+".in", `plain`, "Content-Type", "text/plain")
	eventually(t, "two messages", 10*time.Second, func() bool { return len(a.bodies()) == 2 })
	a.mu.Lock()
	defer a.mu.Unlock()
	byBody := map[string]receive.Envelope{}
	for _, e := range a.seen { // Accepts run concurrently: in any order
		byBody[string(e.Body)] = e
	}
	e := byBody[` {"order_id":"o1"}`]
	if e.Header.Get("Nats-Msg-Id") != "m-1" || e.Trace != tp ||
		e.Header.Get("Content-Type") != "application/json" || !e.SkipVerify || e.ReceivedAt.IsZero() || e.Client == "" {
		t.Errorf("JSON envelope: body %q header %v trace %q skip %v", e.Body, e.Header, e.Trace, e.SkipVerify)
	}
	if e := byBody["plain"]; e.Header.Get("Content-Type") != "text/plain" {
		t.Errorf("plain envelope's content type: %q", e.Header.Get("Content-Type"))
	}
}

// A stream that does not exist is said in the status, and retried: once
// the operator creates it, consuming starts.
func TestMissingStreamIsReportedAndWaitedFor(t *testing.T) {
	url := testenv.NATS(t)
	id := unique()
	a := &accepter{}
	c, _ := consume(t, natsSource(url, "T"+id, "", 0), a)
	eventually(t, "the status says the stream is missing", 10*time.Second, func() bool {
		st := c.Status()
		return !st.Connected && strings.Contains(st.Error, "stream not found") && strings.Contains(st.Error, "T"+id)
	})
	js, _, _ := testStream(t, url, func(cfg *jetstream.StreamConfig) { cfg.Name, cfg.Subjects = "T"+id, []string{"t" + id + ".>"} })
	publish(t, js, "t"+id+".a", `{}`)
	eventually(t, "consuming once the stream exists", 20*time.Second, func() bool { return len(a.bodies()) == 1 && c.Status().Connected })
}

// A broker that goes away is said in the status (HTTP intake does not
// depend on it); when it comes back, consuming resumes, and a message
// left unacked by the kill comes back.
func TestBrokerGoneIsReportedAndConsumingResumes(t *testing.T) {
	srv := testenv.StartNATSServer(t)
	js, stream, subj := testStream(t, srv.URL, func(cfg *jetstream.StreamConfig) { cfg.Storage = jetstream.FileStorage })
	a := &accepter{}
	c, _ := consume(t, natsSource(srv.URL, stream, "", 0), a)
	publish(t, js, subj+".a", `{"n":1}`)
	eventually(t, "first message", 10*time.Second, func() bool { return len(a.bodies()) == 1 })
	srv.Kill()
	eventually(t, "the status says the broker is gone", 10*time.Second, func() bool {
		st := c.Status()
		return !st.Connected && st.Error != ""
	})
	srv.Start()
	eventually(t, "connected again", 20*time.Second, func() bool { return c.Status().Connected })
	publish(t, js, subj+".a", `{"n":2}`)
	eventually(t, "the message published after the restart", 20*time.Second, func() bool {
		for _, b := range a.bodies() {
			if b == `{"n":2}` {
				return true
			}
		}
		return false
	})
}

func natsDestination(url, subject string) PublishSettings {
	return PublishSettings{URL: url, Subject: subject}
}

// newPublisher is the destination bus's publisher, under a 40 s lease
// (the default for a 10 s timeout), logging to log.
func newPublisher(s PublishSettings, log *slog.Logger) *Publisher {
	return NewPublisher(broker.Destination{Name: "bus", Lease: 40 * time.Second, Logger: log}, s)
}

func message(key, typ string) *deliver.Message {
	h := http.Header{}
	h.Set("Idempotency-Key", "orders:"+key)
	h.Set("X-Oncehook-Source", "orders")
	h.Set("X-Oncehook-Attempt", "1")
	return &deliver.Message{Source: "orders", Key: key, Type: typ, Destination: "bus", Attempt: 1,
		IdempotencyKey: "orders:" + key, ContentType: "application/json", Header: h, Body: []byte(`{"k":"` + key + `"}`)}
}

func send(p deliver.Sender, m *deliver.Message) deliver.Result {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return p.Send(ctx, m)
}

// Invariant 19: a publish is an attempt, delivered on the stream's ack,
// with <source>:<key> as its message id; the same delivery published
// again (a retry after a lost ack, a takeover after a crash) is stored
// once.
func TestInvariant19PublishIsAckedWithTheKeyAsMessageID(t *testing.T) {
	url := testenv.NATS(t)
	js, stream, subj := testStream(t, url)
	p := newPublisher(natsDestination(url, subj+".{source}.{type}"), quiet())
	defer p.Close()
	res := send(p, message("evt_1", "invoice.paid"))
	if res.Kind != deliver.Delivered || !strings.Contains(res.Response, stream) {
		t.Fatalf("first publish: %+v", res)
	}
	again := send(p, message("evt_1", "invoice.paid"))
	if again.Kind != deliver.Delivered || !strings.Contains(again.Response, "already had") {
		t.Fatalf("the same delivery again: %+v", again)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := s.Info(ctx); info.State.Msgs != 1 {
		t.Fatalf("stream holds %d messages, want 1", info.State.Msgs)
	}
	got, err := s.GetMsg(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got.Subject != subj+".orders.invoice.paid" || got.Header.Get("Nats-Msg-Id") != "orders:evt_1" ||
		got.Header.Get("Idempotency-Key") != "orders:evt_1" || got.Header.Get("X-Oncehook-Source") != "orders" ||
		got.Header.Get("Content-Type") != "application/json" || string(got.Data) != `{"k":"evt_1"}` {
		t.Errorf("stored: subject %q header %v data %q", got.Subject, got.Header, got.Data)
	}
}

// A broker that is down is a failed attempt to retry, never delivered nor
// dead; once it is back, the same publisher delivers.
func TestPublishToABrokerThatIsDownIsARetry(t *testing.T) {
	srv := testenv.StartNATSServer(t)
	_, _, subj := testStream(t, srv.URL)
	p := newPublisher(natsDestination(srv.URL, subj+".x"), quiet())
	defer p.Close()
	if res := send(p, message("a", "t")); res.Kind != deliver.Delivered {
		t.Fatalf("broker up: %+v", res)
	}
	srv.Stop()
	res := send(p, message("b", "t"))
	if res.Kind != deliver.Retry || res.Error == "" {
		t.Fatalf("broker down: %+v, want a retry that says why", res)
	}
	srv.Start()
	eventually(t, "delivered once the broker is back", 20*time.Second, func() bool {
		return send(p, message("b", "t")).Kind == deliver.Delivered
	})

	// Never reached at all: the first Send dials, and fails as a retry.
	p2 := newPublisher(natsDestination("nats://127.0.0.1:1", subj+".x"), quiet())
	defer p2.Close()
	if res := send(p2, message("c", "t")); res.Kind != deliver.Retry || !strings.Contains(res.Error, "unreachable") {
		t.Errorf("no broker: %+v", res)
	}
}

// A subject no stream captures is a retry that says what to create (a
// stream's leader change says the same, for a moment).
func TestPublishToASubjectNoStreamCapturesSaysSo(t *testing.T) {
	url := testenv.NATS(t)
	p := newPublisher(natsDestination(url, "nostream"+unique()+".x"), quiet())
	defer p.Close()
	res := send(p, message("a", "t"))
	if res.Kind != deliver.Retry || !strings.Contains(res.Error, "no JetStream stream captures") {
		t.Errorf("%+v", res)
	}
}

// {type} may hold what NATS forbids in a subject: it is replaced, and the
// publish lands on a subject the stream's filter can match.
func TestSubjectTemplateReplacesWhatNATSForbids(t *testing.T) {
	s := newSubject("ev.{source}.{type}")
	for typ, want := range map[string]string{
		"invoice.paid":           "ev.s.invoice.paid",
		"orders/create":          "ev.s.orders/create",
		"a b\tc":                 "ev.s.a_b_c",
		"x.*.y":                  "ev.s.x._.y",
		">":                      "ev.s._",
		"a>b*":                   "ev.s.a_b_",
		"":                       "ev.s._",
		".lead..trail.":          "ev.s._.lead._.trail._",
		"café":                   "ev.s.café",
		"bad\xffutf8":            "ev.s.bad_utf8",
		"line\r\nbreak":          "ev.s.line__break",
		"del\x7f":                "ev.s.del_",
		strings.Repeat("x", 300): "ev.s." + strings.Repeat("x", maxTypeBytes),
	} {
		if got := s.render("s", typ); got != want {
			t.Errorf("type %q: subject %q, want %q", typ, got, want)
		}
	}
	if got := newSubject("fixed.subject").render("s", "a b"); got != "fixed.subject" {
		t.Errorf("fixed: %q", got)
	}

	url := testenv.NATS(t)
	_, _, subj := testStream(t, url)
	p := newPublisher(natsDestination(url, subj+".{source}.{type}"), quiet())
	defer p.Close()
	for i, typ := range []string{"a b", "x.*.y", ">", "", "bad\xff", "..", "line\r\n"} {
		if res := send(p, message("k"+string(rune('a'+i)), typ)); res.Kind != deliver.Delivered {
			t.Errorf("type %q: %+v", typ, res)
		}
	}
}

// The publisher reads the stream's duplicate window after its first ack
// and warns when it does not cover the delivery lease.
func TestShortDuplicateWindowIsWarnedAbout(t *testing.T) {
	url := testenv.NATS(t)
	_, stream, subj := testStream(t, url, func(cfg *jetstream.StreamConfig) { cfg.Duplicates = 5 * time.Second })
	var buf testenv.Buffer
	p := newPublisher(natsDestination(url, subj+".x"), slog.New(slog.NewTextHandler(&buf, nil)))
	defer p.Close()
	for _, k := range []string{"a", "b"} {
		if res := send(p, message(k, "t")); res.Kind != deliver.Delivered {
			t.Fatalf("%+v", res)
		}
	}
	eventually(t, "a warning naming the stream", 5*time.Second, func() bool {
		return strings.Contains(buf.String(), "duplicate window is shorter than the delivery lease") && strings.Contains(buf.String(), stream)
	})
	time.Sleep(100 * time.Millisecond)
	if n := strings.Count(buf.String(), "duplicate window"); n != 1 {
		t.Errorf("warned %d times, want once per stream", n)
	}
}

// Shutdown waits for the Accepts in flight: their claims commit and are
// acked (nothing cut halfway comes back as work redone), and Run returns
// once they have.
func TestShutdownLetsTheAcceptsInFlightAnswer(t *testing.T) {
	url := testenv.NATS(t)
	js, stream, subj := testStream(t, url)
	release := make(chan struct{})
	a := holding(release)
	_, stop := consume(t, natsSource(url, stream, "", 2), a)
	for range 5 {
		publish(t, js, subj+".a", `{}`)
	}
	eventually(t, "two in flight", 10*time.Second, func() bool { return len(a.bodies()) == 2 })
	testenv.ShutdownWaits(t, stop, func() { close(release) }, 500*time.Millisecond, 10*time.Second)
	if info := consumerInfo(t, js, stream, DefaultDurable("orders")); info.AckFloor.Stream != 2 || info.NumAckPending != 0 {
		t.Errorf("after shutdown: ack floor %d, pending %d; want the two in flight acked, the rest handed back", info.AckFloor.Stream, info.NumAckPending)
	}
}
