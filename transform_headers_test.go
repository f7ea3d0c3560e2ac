package oncehook_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/internal/testenv/brokertest"
	"github.com/oncehook/oncehook/kinds"
	"github.com/oncehook/oncehook/oncehooktest"
)

// A transformation that sets JetStream's control headers (a stream it
// expects, a last sequence, a rollup that would purge the subject) and
// oncehook's own Nats-Msg-Id: every event is still published, once, with
// oncehook's message id, and none of those headers; what else the script
// set travels. Before, JetStream refused every publish (wrong stream,
// wrong last sequence): 5 of 5 events dead-lettered.
func TestATransformationCannotSetJetStreamsControlHeaders(t *testing.T) {
	srv := testenv.StartNATSServer(t)
	js, stream, prefix := brokertest.NATSStream(t, srv.URL, jetstream.MemoryStorage)
	gw := oncehooktest.Start(t, `
store: sqlite://$DIR/oncehook.db
sources:
  - {name: stripe, preset: stripe, secrets: [whsec_test], destinations: [bus]}
destinations:
  - name: bus
    publish: {nats: {url: `+srv.URL+`, subject: "`+prefix+`.{source}"}}
    retry: {max_attempts: 3, base_delay: 50ms, max_delay: 200ms}
    transform:
      inline: |
        addHandler("transform", (request) => {
          request.headers["nats-expected-stream"] = "NOT_THE_STREAM";
          request.headers["Nats-Expected-Last-Sequence"] = "999";
          request.headers["Nats-Rollup"] = "sub";
          request.headers["nats-msg-id"] = "forged";
          request.headers["Nats_Expected_Stream"] = "NOT_THE_STREAM";
          request.headers["x-tenant"] = "acme";
          return request;
        });
`)
	const events = 5
	for i := range events {
		body := fmt.Sprintf(`{"id":"evt_%03d","object":"event","type":"invoice.paid"}`, i)
		resp, err := http.DefaultClient.Do(testenv.SignedRequest(t, gw.URL+"/in/stripe", "stripe", "whsec_test", []byte(body), ""))
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("intake: %v %v", resp, err)
		}
		resp.Body.Close()
	}
	if !testenv.WaitFor(20*time.Second, func() bool {
		st, _ := gw.Store().Stats(context.Background())
		return st.Delivered+st.Dead == events
	}) {
		st, _ := gw.Store().Stats(context.Background())
		t.Fatalf("%+v: want every event delivered or dead", st)
	}
	if st, _ := gw.Store().Stats(context.Background()); st.Delivered != events || st.Dead != 0 {
		t.Fatalf("%+v: want all %d delivered, none dead", st, events)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil || info.State.Msgs != events {
		t.Fatalf("the stream holds %+v (%v), want all %d messages (a rollup would have kept one)", info.State, err, events)
	}
	for seq := uint64(1); seq <= events; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if id := m.Header.Get("Nats-Msg-Id"); !strings.HasPrefix(id, "stripe:evt_") {
			t.Errorf("message %d: Nats-Msg-Id %q, want oncehook's", seq, id)
		}
		for k := range m.Header {
			if strings.HasPrefix(strings.ToLower(k), "nats") && k != "Nats-Msg-Id" {
				t.Errorf("message %d carries %s: %q", seq, k, m.Header[k])
			}
		}
		if m.Header.Get("X-Tenant") != "acme" {
			t.Errorf("message %d: X-Tenant %q, want what the script set", seq, m.Header.Get("X-Tenant"))
		}
	}
}

// A destination's headers: follow the rule a transformation's do: one
// its transport, HTTP or oncehook reserves is a config error naming it.
func TestADestinationsHeadersCannotNameAReservedHeader(t *testing.T) {
	for _, c := range []struct{ dest, want string }{
		{`{name: bus, publish: {nats: {url: "nats://127.0.0.1:4222", subject: s}}, headers: {Nats-Rollup: sub}}`, "destinations[0].headers: Nats-Rollup: not a destination's to set (JetStream's"},
		{`{name: bus, publish: {nats: {url: "nats://127.0.0.1:4222", subject: s}}, headers: {nats-expected-stream: X}}`, "destinations[0].headers: nats-expected-stream: not a destination's to set (JetStream's"},
		{`{name: app, url: "http://x", headers: {Idempotency-Key: fixed}}`, "destinations[0].headers: Idempotency-Key: not a destination's to set (oncehook's"},
		{`{name: app, url: "http://x", headers: {X-Oncehook-Source: other}}`, "destinations[0].headers: X-Oncehook-Source: not a destination's to set (oncehook's own)"},
		{`{name: app, url: "http://x", headers: {Host: api.internal}}`, "destinations[0].headers: Host: not a destination's to set (HTTP's"},
	} {
		name := strings.TrimPrefix(strings.SplitN(c.dest, ",", 2)[0], "{name: ")
		_, err := oncehook.ParseConfig([]byte("sources: [{name: s, preset: stripe, secrets: [x], destinations: ["+name+"]}]\ndestinations: ["+c.dest+"]\n"), env(nil), kinds.All())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.dest, err, c.want)
		}
	}
	// A header of the same name on another transport is the message's own.
	for _, dest := range []string{
		`{name: d, publish: {amqp: {url: "amqp://guest:guest@127.0.0.1:5672/", routing_key: k}}, headers: {Nats-Rollup: sub}}`,
		`{name: d, url: "http://x", headers: {Nats-Rollup: sub, X-Tenant: acme}}`,
	} {
		if _, err := oncehook.ParseConfig([]byte("sources: [{name: s, preset: stripe, secrets: [x], destinations: [d]}]\ndestinations: ["+dest+"]\n"), env(nil), kinds.All()); err != nil {
			t.Errorf("%s: %v", dest, err)
		}
	}
}
