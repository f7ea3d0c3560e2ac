package hostile_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/internal/testenv/brokertest"
	"github.com/oncehook/oncehook/internal/testenv/sqlitetest"
	"github.com/oncehook/oncehook/oncehooktest"
	"github.com/oncehook/oncehook/store/postgres"
	"github.com/oncehook/oncehook/store/sqlite"
)

// hostileValue is one class of bytes a transport may hand over that a
// store's text column may not take as they are: raw, as a Go string (a
// header, a NATS header, PublishTx's key), and json, as it is written
// inside a JSON string (a body's field).
type hostileValue struct{ name, raw, json string }

var hostileValues = []hostileValue{
	{"nul", "a\x00b", `a\u0000b`},
	{"invalid_utf8", "a\xffb", "a\xffb"},
	{"lone_surrogate", "a\xed\xa0\x80b", `a\ud800b`},
	{"crlf", "a\r\nb", `a\r\nb`},
	{"megabyte", strings.Repeat("m", 1<<20), strings.Repeat("m", 1<<20)},
}

// httpCarries reports whether an HTTP header can carry v at all: Go's
// client refuses a NUL or a line break, and the server answers a
// megabyte's header 431 (a transport's limit, counted as
// header_too_large) before any of oncehook's code sees it.
func httpCarries(v hostileValue) bool { return v.name == "invalid_utf8" || v.name == "lone_surrogate" }

// Issue 41, item 2's tail (invariant 23): every value from outside that
// reaches a store's text column, swept with each hostile byte class on
// SQLite and PostgreSQL: a provider's key and type read from the body or
// a header, an ordered source's entity, POST /v1/publish's body and
// Idempotency-Key, PublishTx's key, a NATS message's headers and body, a
// RabbitMQ message's message-id and type, a Kafka record's key and
// header, an effect's key and the API's filters. Each is stored (percent-encoded
// where it must be: the key as events ls prints it) and delivered, or
// refused with a 4xx that names the field and is counted; never a 5xx,
// never a queue message terminated.
func TestHostileBytesInEveryFieldAreStoredOrRefusedNeverA500(t *testing.T) {
	testenv.SlowUnderRace(t) // bytes, not interleavings: .ci/run runs internal/e2e without -race
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) { hostileSweep(t, backend) })
	}
}

func hostileSweep(t *testing.T, backend string) {
	natsURL := testenv.NATS(t)
	js, stream, prefix := brokertest.NATSStream(t, natsURL, jetstream.MemoryStorage)
	rabbitURL, rabbit, rabbitQ, _ := brokertest.RabbitQueue(t)
	kc := testenv.NewKafka(t, 1, "hostile")
	sink := testenv.NewSink(t)
	dir := t.TempDir()
	storeURL := "sqlite://" + filepath.Join(dir, "oncehook.db")
	if backend == "postgres" {
		storeURL = testenv.Postgres(t)
	}
	const token = "ops-token-0123456789"
	gw := oncehooktest.Start(t, `
store: `+storeURL+`
api: {tokens: [{name: ops, token: `+token+`}]}
max_body_size: 4MiB
sources:
  - {name: body, preset: generic, unsigned: true, key: ["json:id"], type: ["json:type"], destinations: [app],
     order: {entity: "json:entity", version: "json:v"}}
  - {name: head, preset: generic, unsigned: true, key: ["header:X-Id"], type: ["header:X-Type"], destinations: [app]}
  - {name: box, outbox: true, key: ["json:id"], type: ["json:type"], destinations: [app]}
  - {name: queue, preset: generic, unsigned: true, key: ["header:X-Id"], type: ["header:X-Type"], destinations: [app],
     consume: {nats: {url: `+natsURL+`, stream: `+stream+`}}}
  - {name: rabbit, preset: generic, unsigned: true, key: ["header:Message-Id"], type: ["header:Amqp-Type"], destinations: [app],
     consume: {amqp: {url: "`+rabbitURL+`", queue: `+rabbitQ+`}}}
  - {name: kafka, preset: generic, unsigned: true, key: ["header:Kafka-Key"], type: ["header:X-Type"], destinations: [app],
     consume: {kafka: {brokers: [`+strings.Join(kc.Addrs, ", ")+`], topic: hostile, group: oncehook}}}
destinations:
  - {name: app, url: `+sink.URL+`}
`)
	send := func(method, target string, header http.Header, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, target, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = header
		if req.Header == nil {
			req.Header = http.Header{}
		}
		if strings.HasPrefix(target, gw.APIURL) {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %.80s: %v", method, target, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	stored := map[string]int{} // by source: events that must be stored
	accepted := func(what string, code int, body string, want int) {
		t.Helper()
		if code != want || !strings.Contains(body, `"accepted"`) {
			t.Errorf("%s: %d %.300s, want %d accepted", what, code, body, want)
		}
	}

	for i, v := range hostileValues {
		// A provider's key, type and order entity from the body.
		body := fmt.Sprintf(`{"id":"%s-%d","type":"%s","entity":"%s","v":1}`, v.json, i, v.json, v.json)
		code, answer := send(http.MethodPost, gw.URL+"/in/body", nil, body)
		accepted("HTTP body's key, type and entity "+v.name, code, answer, http.StatusOK)
		stored["body"]++

		// The same from headers, where HTTP can carry them.
		if httpCarries(v) {
			code, answer = send(http.MethodPost, gw.URL+"/in/head", http.Header{"X-Id": {v.raw + "-" + fmt.Sprint(i)}, "X-Type": {v.raw}}, `{}`)
			accepted("HTTP header key and type "+v.name, code, answer, http.StatusOK)
			stored["head"]++
		}

		// The outbox over HTTP: the body's key and type, and an
		// Idempotency-Key, which is printable ASCII or refused (400,
		// counted): it is the caller's own, and read as the proxy reads one.
		code, answer = send(http.MethodPost, gw.APIURL+"/v1/publish/box", nil, body)
		accepted("POST /v1/publish body's key and type "+v.name, code, answer, http.StatusAccepted)
		stored["box"]++
		if httpCarries(v) {
			code, answer = send(http.MethodPost, gw.APIURL+"/v1/publish/box", http.Header{"Idempotency-Key": {v.raw}}, `{}`)
			if code != http.StatusBadRequest || !strings.Contains(answer, `"field":"Idempotency-Key"`) {
				t.Errorf("POST /v1/publish with Idempotency-Key %s: %d %.300s, want 400 naming the header", v.name, code, answer)
			}
		}

		// An effect's key: refused, naming it (a business key is the
		// caller's, and must read the same in logs and URLs).
		code, answer = send(http.MethodPost, gw.APIURL+"/v1/effects/"+url.PathEscape(v.raw)+"/claim", nil, `{}`)
		if code >= 500 || code < 400 || (code == http.StatusBadRequest && !strings.Contains(answer, `"field":"key"`)) {
			t.Errorf("POST /v1/effects/{%s}/claim: %d %.300s, want 4xx naming the key", v.name, code, answer)
		}

		// The API's filters: a 4xx naming the field, or an answer; never
		// the store's error.
		for _, param := range []string{"source", "key", "type", "key_prefix"} {
			q := url.Values{param: {v.raw}}
			if param == "key" {
				q.Set("source", "body")
			}
			if code, answer := send(http.MethodGet, gw.APIURL+"/v1/events?"+q.Encode(), nil, ""); code >= 500 {
				t.Errorf("GET /v1/events?%s=%s: %d %.300s, want no 5xx", param, v.name, code, answer)
			}
		}
		for _, path := range []string{"/v1/stats?source=", "/v1/dead-letters?source=", "/v1/dead-letters?destination=", "/v1/effects?cursor=", "/v1/doctor?source="} {
			if code, answer := send(http.MethodGet, gw.APIURL+path+url.QueryEscape(v.raw), nil, ""); code >= 500 {
				t.Errorf("GET %s%s: %d %.300s, want no 5xx", path, v.name, code, answer)
			}
		}
		for _, req := range []string{
			fmt.Sprintf(`{"source":"body","key_prefix":"%s","dry_run":true}`, v.json),
			fmt.Sprintf(`{"source":"body","type":"%s","dry_run":true}`, v.json),
		} {
			if code, answer := send(http.MethodPost, gw.APIURL+"/v1/events/replay", http.Header{"Content-Type": {"application/json"}}, req); code >= 500 {
				t.Errorf("POST /v1/events/replay %.60s (%s): %d %.300s, want no 5xx", req, v.name, code, answer)
			}
		}
		reset := fmt.Sprintf(`{"entity":"%s","destination":"app"}`, v.json)
		if code, answer := send(http.MethodPost, gw.APIURL+"/v1/sources/body/order/reset", http.Header{"Content-Type": {"application/json"}}, reset); code >= 500 {
			t.Errorf("POST order/reset entity %s: %d %.300s, want no 5xx", v.name, code, answer)
		}

		// A NATS message: its key and type from headers, which a NATS
		// header can carry but for a line break (the protocol's own line
		// end), and its body's fields.
		msg := &nats.Msg{Subject: prefix + ".in", Header: nats.Header{}, Data: []byte(body)}
		id := v.raw
		switch v.name {
		case "crlf":
			id = "a\tb" // a tab: the control byte a NATS header may hold
		case "megabyte":
			// Within what JetStream takes: 64 KiB of headers, 1 MiB
			// (max_payload) of headers and body together.
			id, msg.Data = v.raw[:30_000], []byte(`{"entity":"`+v.raw[:900_000]+`"}`)
		}
		msg.Header.Set("X-Id", fmt.Sprintf("%s-%d", id, i))
		msg.Header.Set("X-Type", id)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if _, err := js.PublishMsg(ctx, msg); err != nil {
			t.Errorf("publish to NATS (%s): %v", v.name, err)
		} else {
			stored["queue"]++
		}
		cancel()

		// A RabbitMQ message: its message-id and type properties (short
		// strings: 255 bytes at most), any bytes.
		short := v.raw
		if len(short) > 250 {
			short = short[:250]
		}
		dc, err := rabbit.PublishWithDeferredConfirm("", rabbitQ, true, false, amqp.Publishing{DeliveryMode: amqp.Persistent,
			MessageId: fmt.Sprintf("%s-%d", short, i), Type: short, Body: []byte(body)})
		if err != nil || !dc.Wait() {
			t.Errorf("publish to RabbitMQ (%s): %v", v.name, err)
		} else {
			stored["rabbit"]++
		}

		// A Kafka record: its key (the Kafka-Key the key rule reads) and
		// a header, any bytes.
		key := v.raw
		if len(key) > 300_000 {
			key = key[:300_000] // kfake's default bound on a record batch is 1 MiB
		}
		kc.Produce(t, &kgo.Record{Topic: "hostile", Key: []byte(fmt.Sprintf("%s-%d", key, i)), Value: []byte(`{}`),
			Headers: []kgo.RecordHeader{{Key: "X-Type", Value: []byte(key)}}})
		stored["kafka"]++
	}

	// PublishTx: a key given by the caller's code, any bytes, in the
	// caller's transaction on the gateway's database.
	publishTx := outboxOn(t, gw, backend, storeURL, dir)
	for i, v := range hostileValues {
		if err := publishTx(fmt.Sprintf("%s-tx%d", v.raw, i), `{}`); err != nil {
			t.Errorf("PublishTx with key %s: %v", v.name, err)
			continue
		}
		stored["box"]++
	}

	// Everything accepted is stored, each under its source, and
	// delivered; the queue's messages were all taken, none terminated.
	total := 0
	for source, n := range stored {
		total += n
		var page struct{ Events []struct{ Key, Type string } }
		if !testenv.WaitFor(20*time.Second, func() bool {
			_, b := send(http.MethodGet, gw.APIURL+"/v1/events?limit=100&source="+source, nil, "")
			page.Events = nil
			json.Unmarshal([]byte(b), &page)
			return len(page.Events) >= n
		}) {
			t.Errorf("source %s: %d events stored, want %d", source, len(page.Events), n)
		}
	}
	if !testenv.WaitFor(30*time.Second, func() bool { return len(sink.ByKey()) >= total }) {
		t.Errorf("%d distinct deliveries, want %d", len(sink.ByKey()), total)
	}
	for _, d := range sink.Deliveries() {
		if len(d.Key) > 600 || strings.ContainsAny(d.Key, "\x00\r\n") {
			t.Errorf("delivered with Idempotency-Key %.80q: not a bounded header value", d.Key)
		}
	}
	metrics := testenv.Get(t, gw.URL+"/metrics")
	for _, line := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(line, "oncehook_requests_total{") && (strings.Contains(line, "store_rejected") || strings.Contains(line, "malformed")) {
			t.Errorf("a request was refused for how it was written: %s", line)
		}
	}
	if want := fmt.Sprintf(`oncehook_requests_total{outcome="invalid",source="box"} %d`, 2); !strings.Contains(metrics, want) {
		t.Errorf("the refused Idempotency-Keys are not counted: want %s in\n%s", want, testenv.Grep(metrics, "oncehook_requests_total"))
	}
}

// outboxOn is a PublishTx to the box source in a transaction of its own
// on the gateway's database, committed.
func outboxOn(t *testing.T, gw *oncehooktest.Gateway, backend, storeURL, dir string) func(key, body string) error {
	ctx := context.Background()
	if backend == "postgres" {
		pool, err := pgxpool.New(ctx, storeURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		outbox := oncehook.GatewayOutbox(gw.Gateway, postgres.TxDriver{})
		return func(key, body string) error {
			tx, err := pool.Begin(ctx)
			if err != nil {
				return err
			}
			defer tx.Rollback(ctx)
			if _, err := outbox.PublishTx(ctx, tx, "box", key, []byte(body), nil); err != nil {
				return err
			}
			return tx.Commit(ctx)
		}
	}
	db := sqlitetest.Open(t, filepath.Join(dir, "oncehook.db"))
	outbox := oncehook.GatewayOutbox(gw.Gateway, sqlite.TxDriver{})
	return func(key, body string) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := outbox.PublishTx(ctx, tx, "box", key, []byte(body), nil); err != nil {
			return err
		}
		return tx.Commit()
	}
}
