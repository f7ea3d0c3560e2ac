package hostile_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/net/http/httpguts"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/api"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/internal/testenv/brokertest"
	"github.com/oncehook/oncehook/internal/testenv/sqlitetest"
	"github.com/oncehook/oncehook/oncehooktest"
	"github.com/oncehook/oncehook/provider"
	"github.com/oncehook/oncehook/receive"
	"github.com/oncehook/oncehook/store"
	"github.com/oncehook/oncehook/store/postgres"
	"github.com/oncehook/oncehook/store/sqlite"
)

// Issue 41's sweep (invariant 23): a message a transport handed over is
// never lost, terminated or answered 5xx because of how it is written.
// Every hostile byte class (hostileValues, in hostile_fields_test.go: a
// NUL, a byte that is not UTF-8, a lone surrogate, written raw in a
// header and as \ud800 in JSON, CR/LF, a megabyte) goes through every field
// that reaches the store (the key as the key rule reads it, the type, an
// ordered source's entity and version, the Content-Type, a forwarded
// header, the traceparent, the body) on every transport (HTTP, NATS,
// RabbitMQ, Kafka, POST /v1/publish and PublishTx) and both backends,
// each field alone in an otherwise ordinary message. What a user sees is
// asserted: each message is stored once and delivered to a real HTTP
// destination with its body byte for byte, and sent again it is a
// duplicate, not a second event; or it is refused with a named 4xx
// counted by reason. Never a 5xx, never a queue message dead-lettered,
// terminated or left unacknowledged, and nothing refused without a count.
//
// A value a transport cannot carry at all (a NUL or a line break in an
// HTTP header, a line break in a NATS header: the client refuses to write
// it) is no message and is left out; a megabyte is cut to the most its
// carrier takes (a RabbitMQ property's 255 bytes, JetStream's 64 KiB of
// headers, a Kafka producer's 1 MB batch) and the subtest says so
// (megabyte_cut_to_N). Each transport has one gateway per backend, all
// its cases driven through it; the transports run in parallel.
func TestHostileBytesSweepEveryTransportFieldAndBackend(t *testing.T) {
	testenv.SlowUnderRace(t)
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			for _, port := range []func(*testing.T) sweepPort{newSweepHTTP, newSweepNATS, newSweepRabbit, newSweepKafka, newSweepPublish, newSweepPublishTx} {
				t.Run(port(nil).name(), func(t *testing.T) {
					t.Parallel()
					runSweep(t, backend, port(t))
				})
			}
		})
	}
}

// sweepMsg is one message of the sweep, as a transport-neutral value:
// its source, its headers (each transport carries them its own way: a
// RabbitMQ property, a Kafka record's key, an HTTP header) and its body.
type sweepMsg struct {
	source string
	header http.Header
	body   []byte
	key    string // PublishTx's own key argument
}

// sweepAnswer is what the transport's client saw: an HTTP status and body,
// or, for a queue, nothing (0) once the broker took the message.
type sweepAnswer struct {
	status int
	body   string
}

// sweepPort is one transport as the sweep drives it.
type sweepPort interface {
	name() string
	// intake is the YAML a source adds to its entry to take its events
	// from this transport.
	intake(source string) string
	// carry is value as the transport carries it in header name: cut to
	// the carrier's bound (a megabyte), or false when no client of the
	// transport can write it at all.
	carry(name, value string) (string, bool)
	// bodyLimit is the largest body the transport carries.
	bodyLimit() int
	// native is the header the transport's own key travels in ("": none),
	// the n source's key rule; nativeType, its own type's (a RabbitMQ
	// message's type property).
	native() string
	nativeType() string
	// github says whether the transport takes a preset's source (the
	// outbox takes only its own, unsigned): source g, GitHub's, whose
	// event header is forwarded.
	github() bool
	// refuses is the reason a message is refused for by the transport's
	// or the source's rules, "" when it is taken.
	refuses(m sweepMsg) string
	start(t *testing.T, gw *oncehooktest.Gateway, backend, storeURL, dir string)
	send(t *testing.T, m sweepMsg) sweepAnswer
	// settled reports whether the broker has nothing left: every message
	// acknowledged, none dead-lettered (nil: nothing to wait for).
	settled(t *testing.T) error
}

// sweepCase is one field × one class through one transport.
type sweepCase struct {
	tag, field, class string
	msg               sweepMsg
	// refuse is the reason the message is refused for, by the source's
	// or the transport's rules (a caller's Idempotency-Key that is not
	// printable ASCII), "" when it is taken.
	refuse       string
	first, again sweepAnswer
	retried      bool // told to try again, and tried
}

const (
	sweepGitHubSecret = "sweep-github-secret"
	sweepTraceparent  = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
)

// sweepFields are the fields that reach the store, each a way to put a
// hostile value in an otherwise ordinary message: raw for a header, j as
// it is written inside a JSON string. Source k reads key, type and order
// from the body; h from headers; g is GitHub's preset, whose delivery id
// is the key and whose event header is forwarded; n reads the key where
// the transport itself puts one (a RabbitMQ message-id, a Kafka record's
// key, the outbox's own).
var sweepFields = []struct {
	name   string
	native string // "key", "type": only where the transport has one of its own
	build  func(tag, raw, j string) sweepMsg
}{
	{"key/json", "", func(tag, raw, j string) sweepMsg {
		return jsonMsg("k", tag, `"id":"`+tag+`-`+j+`","type":"sweep","entity":"e-`+tag+`","v":1`)
	}},
	{"type/json", "", func(tag, raw, j string) sweepMsg {
		return jsonMsg("k", tag, `"id":"k-`+tag+`","type":"`+j+`","entity":"e-`+tag+`","v":1`)
	}},
	{"entity/json", "", func(tag, raw, j string) sweepMsg {
		return jsonMsg("k", tag, `"id":"k-`+tag+`","type":"sweep","entity":"`+j+`","v":1`)
	}},
	{"version/json", "", func(tag, raw, j string) sweepMsg {
		return jsonMsg("k", tag, `"id":"k-`+tag+`","type":"sweep","entity":"e-`+tag+`","v":"`+j+`"`)
	}},
	{"body/json", "", func(tag, raw, j string) sweepMsg {
		return jsonMsg("k", tag, `"id":"k-`+tag+`","type":"sweep","data":"`+j+`"`)
	}},
	{"content_type", "", func(tag, raw, j string) sweepMsg {
		m := jsonMsg("k", tag, `"id":"k-`+tag+`","type":"sweep"`)
		m.header.Set("Content-Type", raw)
		return m
	}},
	{"traceparent", "", func(tag, raw, j string) sweepMsg {
		m := jsonMsg("k", tag, `"id":"k-`+tag+`","type":"sweep"`)
		m.header.Set("Traceparent", sweepTraceparent+raw)
		return m
	}},
	{"key/header", "", func(tag, raw, j string) sweepMsg {
		return headerMsg("h", tag, "X-Id", tag+"-"+raw, "X-Type", "sweep", "X-Entity", "e-"+tag, "X-V", "1")
	}},
	{"type/header", "", func(tag, raw, j string) sweepMsg {
		return headerMsg("h", tag, "X-Id", "k-"+tag, "X-Type", raw, "X-Entity", "e-"+tag, "X-V", "1")
	}},
	{"entity/header", "", func(tag, raw, j string) sweepMsg {
		return headerMsg("h", tag, "X-Id", "k-"+tag, "X-Type", "sweep", "X-Entity", raw, "X-V", "1")
	}},
	{"version/header", "", func(tag, raw, j string) sweepMsg {
		return headerMsg("h", tag, "X-Id", "k-"+tag, "X-Type", "sweep", "X-Entity", "e-"+tag, "X-V", raw)
	}},
	{"body/raw", "", func(tag, raw, j string) sweepMsg {
		m := headerMsg("h", tag, "X-Id", "k-"+tag, "X-Type", "sweep")
		m.body = []byte(tag + "|" + raw)
		m.header.Set("Content-Type", "application/octet-stream")
		return m
	}},
	{"forwarded", "", func(tag, raw, j string) sweepMsg {
		return headerMsg("g", tag, "X-Github-Delivery", "d-"+tag, "X-Github-Event", raw)
	}},
	{"key/forwarded", "", func(tag, raw, j string) sweepMsg {
		return headerMsg("g", tag, "X-Github-Delivery", tag+"-"+raw, "X-Github-Event", "push")
	}},
	{"key/native", "key", func(tag, raw, j string) sweepMsg {
		m := jsonMsg("n", tag, `"type":"sweep"`)
		m.key = tag + "-" + raw
		return m
	}},
	{"key/idempotency_key", "idempotency", func(tag, raw, j string) sweepMsg {
		m := jsonMsg("n", tag, `"type":"sweep"`)
		m.header.Set("Idempotency-Key", tag+"-"+raw)
		return m
	}},
	{"type/native", "type", func(tag, raw, j string) sweepMsg {
		m := jsonMsg("n", tag, `"type":"sweep"`)
		m.key = "k-" + tag
		m.header.Set(sweepNativeType, raw)
		return m
	}},
}

// sweepNativeType stands for the header a transport's own type travels
// in (nativeType) in the fields' messages.
const sweepNativeType = "X-Native-Type"

// jsonMsg is a JSON body that opens with the case's tag (how a delivery
// is matched to its case) and holds fields.
func jsonMsg(source, tag, fields string) sweepMsg {
	return sweepMsg{source: source, header: http.Header{"Content-Type": {"application/json"}},
		body: []byte(`{"case":"` + tag + `",` + fields + `}`)}
}

// headerMsg is a JSON body of the tag alone and headers kv.
func headerMsg(source, tag string, kv ...string) sweepMsg {
	m := jsonMsg(source, tag, `"x":1`)
	for i := 0; i < len(kv); i += 2 {
		m.header.Set(kv[i], kv[i+1])
	}
	return m
}

var sweepTagOf = regexp.MustCompile(`^(?:\{"case":")?(c\d{3})`)

// sweepConfig is the gateway of one transport: sources k, h, g (and n
// where the transport has a key of its own), all delivering to sink.
func sweepConfig(p sweepPort, storeURL, sinkURL string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "store: %s\nmax_body_size: 4MiB\nsources:\n", storeURL)
	source := func(name, rules string) {
		entry := "name: " + name + ", " + rules + ", destinations: [app]"
		if in := p.intake(name); in != "" {
			entry += ", " + in
		}
		fmt.Fprintf(&b, "  - {%s}\n", entry)
	}
	source("k", `key: ["json:id"], type: ["json:type"], order: {entity: "json:entity", version: "json:v"}`)
	source("h", `key: ["header:X-Id"], type: ["header:X-Type"], order: {entity: "header:X-Entity", version: "header:X-V"}`)
	if p.github() {
		source("g", "preset: github, secrets: ["+sweepGitHubSecret+"]")
	}
	if n := p.native(); n != "" {
		typ := "json:type"
		if nt := p.nativeType(); nt != "" {
			typ = "header:" + nt
		}
		source("n", `key: ["header:`+n+`"], type: ["`+typ+`"]`)
	}
	fmt.Fprintf(&b, "destinations:\n  - {name: app, url: %s, retry: {max_attempts: 3, base_delay: 10ms, max_delay: 50ms}}\n", sinkURL)
	return b.String()
}

// sweepCases is every field × class this transport can carry.
func sweepCases(t *testing.T, p sweepPort) []*sweepCase {
	var cases []*sweepCase
	for _, f := range sweepFields {
		if (f.native == "key" && p.native() == "") || (f.native == "type" && p.nativeType() == "") ||
			(f.native == "idempotency" && p.name() != "publishtx") {
			continue // POST /v1/publish's own key is its Idempotency-Key: key/native
		}
		for _, v := range hostileValues {
			tag := fmt.Sprintf("c%03d", len(cases))
			raw, j := v.raw, v.json
			if v.name == "megabyte" {
				// Room for the rest of the message within the transport's
				// bound on a body.
				raw, j = raw[:min(len(raw), p.bodyLimit()-512)], j[:min(len(j), p.bodyLimit()-512)]
			}
			m := f.build(tag, raw, j)
			if m.source == "g" && !p.github() {
				continue
			}
			if m.body != nil && len(m.body) > p.bodyLimit() {
				t.Fatalf("%s: a %d-byte body over the transport's %d", tag, len(m.body), p.bodyLimit())
			}
			if typ := m.header.Get(sweepNativeType); typ != "" {
				m.header.Del(sweepNativeType)
				m.header.Set(p.nativeType(), typ)
			}
			class, carried := v.name, true
			if m.key != "" {
				m.header.Set(p.native(), m.key)
			}
			for name, vs := range m.header {
				c, ok := p.carry(name, vs[0])
				if !ok {
					carried = false
					break
				}
				if len(c) < len(vs[0]) {
					class = fmt.Sprintf("%s_cut_to_%d", v.name, len(c))
				}
				m.header.Set(name, c)
			}
			if !carried {
				continue
			}
			if m.key != "" {
				m.key = m.header.Get(p.native())
				if p.name() == "publishtx" {
					m.header.Del(p.native()) // the key is PublishTx's argument
				}
			}
			c := &sweepCase{tag: tag, field: f.name, class: class, msg: m}
			c.refuse = p.refuses(m)
			cases = append(cases, c)
		}
	}
	return cases
}

func runSweep(t *testing.T, backend string, p sweepPort) {
	sink := testenv.NewSink(t)
	dir := t.TempDir()
	storeURL := "sqlite://" + filepath.Join(dir, "oncehook.db")
	if backend == "postgres" {
		storeURL = testenv.Postgres(t)
	}
	p.start(t, nil, backend, storeURL, dir) // the brokers, before the gateway consumes them
	gw := oncehooktest.Start(t, sweepConfig(p, storeURL, sink.URL))
	p.start(t, gw, backend, storeURL, dir)
	cases := sweepCases(t, p)

	// Each message twice: the second is the retry a provider, a
	// publisher or a broker's redelivery makes. An answer that says to
	// try again later (503: the store did not commit in time, on a
	// loaded machine) is tried again, as a provider would.
	retried := 0
	send := func(c *sweepCase) sweepAnswer {
		for i := 0; ; i++ {
			a := p.send(t, c.msg)
			var e receive.ErrorResponse
			if a.status != http.StatusServiceUnavailable || json.Unmarshal([]byte(a.body), &e) != nil || !sweepTemporary(e.Reason) || i == 20 {
				return a
			}
			retried++
			c.retried = true
			time.Sleep(500 * time.Millisecond)
		}
	}
	for _, c := range cases {
		c.first = send(c)
		c.again = send(c)
	}

	taken := map[string]*sweepCase{}
	want := map[string]int{}               // events stored, by source
	refused := map[string]map[string]int{} // by source and reason
	for _, c := range cases {
		if c.refuse == "" {
			taken[c.tag] = c
			want[c.msg.source]++
			continue
		}
		if refused[c.msg.source] == nil {
			refused[c.msg.source] = map[string]int{}
		}
		refused[c.msg.source][c.refuse] += 2
	}

	// What a user sees: everything taken is delivered, each once.
	byTag := func() map[string][]testenv.Delivery {
		out := map[string][]testenv.Delivery{}
		for _, d := range sink.Deliveries() {
			m := sweepTagOf.FindSubmatch(d.Body)
			if m == nil {
				t.Errorf("a delivery that is no case's: %.80q", d.Body)
				continue
			}
			out[string(m[1])] = append(out[string(m[1])], d)
		}
		return out
	}
	testenv.WaitFor(120*time.Second, func() bool {
		got := byTag()
		for tag := range taken {
			if len(got[tag]) == 0 {
				return false
			}
		}
		return true
	})
	var settleErr error
	testenv.WaitFor(60*time.Second, func() bool { settleErr = p.settled(t); return settleErr == nil })
	counts := map[string]admin.SourceCounts{}
	client := api.NewClient(gw.APIURL, gw.APIToken, nil)
	sources := []string{"k", "h", "g", "n"}
	testenv.WaitFor(20*time.Second, func() bool {
		for _, source := range sources {
			v, err := client.Stats(context.Background(), admin.StatsQuery{Source: source})
			if err != nil || len(v.Sources) != 1 {
				continue // not in this gateway's config
			}
			got := v.Sources[0].Total
			counts[source] = got
			if got.Accepted+got.Duplicate < int64(2*want[source]) {
				return false
			}
			for reason, n := range refused[source] {
				if got.Rejected[reason] < int64(n) {
					return false
				}
			}
		}
		return true
	})
	stored := map[string]map[string]int{} // keys, by source, as the API lists them
	for _, source := range sources {
		if want[source] == 0 && len(refused[source]) == 0 {
			continue // not in this gateway's config
		}
		page, err := client.Events(context.Background(), admin.EventFilter{Source: source, Limit: 200})
		if err != nil {
			t.Fatalf("listing %s's events: %v", source, err)
		}
		stored[source] = map[string]int{}
		for _, e := range page.Events {
			stored[source][e.Key]++
		}
	}
	time.Sleep(300 * time.Millisecond) // a second delivery of a case would show by now
	delivered := byTag()

	for _, c := range cases {
		t.Run(c.field+"/"+c.class, func(t *testing.T) {
			checkSweepAnswers(t, c)
			ds := delivered[c.tag]
			if c.refuse != "" {
				if len(ds) != 0 {
					t.Errorf("refused (%s), yet delivered %d times", c.refuse, len(ds))
				}
				return
			}
			if len(ds) != 1 {
				t.Fatalf("delivered %d times, want once (%s)", len(ds), sweepDescribe(c))
			}
			checkSweepDelivery(t, c, ds[0])
			if key := strings.TrimPrefix(ds[0].Key, c.msg.source+":"); stored[c.msg.source][key] != 1 {
				t.Errorf("the API lists %d events of %s under the key %.80q it was delivered with, want 1", stored[c.msg.source][key], c.msg.source, key)
			}
		})
	}

	// Stored once each: as many events as cases taken, each message
	// answered once as taken (accepted, or a duplicate: the retry, or a
	// claim that committed while its answer said to try again), and
	// every refusal counted by its reason. Reasons that say to try again
	// (the store was slow) are counted too, and are no refusal.
	for _, source := range sources {
		got, ok := counts[source]
		if !ok {
			if want[source] != 0 || len(refused[source]) != 0 {
				t.Errorf("source %s: its stats never answered", source)
			}
			continue
		}
		n := 0
		for _, k := range stored[source] {
			n += k
		}
		if n != want[source] || got.Accepted+got.Duplicate != int64(2*want[source]) || got.Accepted > int64(want[source]) || got.Keyless != 0 {
			t.Errorf("source %s: %d events stored, stats say %d accepted, %d duplicates, %d keyless; want %d stored, %d answers taken",
				source, n, got.Accepted, got.Duplicate, got.Keyless, want[source], 2*want[source])
		}
		for reason, k := range got.Rejected {
			if int(k) != refused[source][reason] && !sweepTemporary(reason) {
				t.Errorf("source %s: %d refused as %s, want %d", source, k, reason, refused[source][reason])
			}
		}
		for reason, k := range refused[source] {
			if int(got.Rejected[reason]) != k {
				t.Errorf("source %s: %d refused as %s, want %d", source, got.Rejected[reason], reason, k)
			}
		}
	}
	if settleErr != nil {
		t.Errorf("the broker is not settled: %v", settleErr)
	}
	// Nothing else was refused, under any source or none.
	temporary := 0
	for name, v := range testenv.Metrics(t, gw.MetricsHandler()) {
		if !strings.HasPrefix(name, "oncehook_requests_total{") || v == 0 {
			continue
		}
		outcome := name[strings.Index(name, `outcome="`)+len(`outcome="`):]
		outcome = outcome[:strings.IndexByte(outcome, '"')]
		source := name[strings.Index(name, `source="`)+len(`source="`):]
		source = source[:strings.IndexByte(source, '"')]
		if outcome == receive.StatusAccepted || outcome == receive.StatusDuplicate || sweepTemporary(outcome) {
			continue
		}
		if refused[source][outcome] != int(v) {
			t.Errorf("refused: %s %v", name, v)
		}
	}
	for _, got := range counts {
		for reason, k := range got.Rejected {
			if sweepTemporary(reason) {
				temporary += int(k)
			}
		}
	}
	t.Logf("%s on %s: %d cases, %d taken, %d refused by rule; %d answers to try again later (%d of them tried again by the test)",
		p.name(), backend, len(cases), len(taken), len(cases)-len(taken), temporary, retried)
}

// sweepTemporary is a reason that says to try the same message again
// later (the store did not commit in time, memory was short): not a
// refusal, and what a transport retries.
func sweepTemporary(reason string) bool {
	return reason == receive.ReasonUnavailable || reason == receive.ReasonOverloaded
}

// checkSweepAnswers holds what a transport's client was answered to its
// case: taken, then a duplicate; or refused, named, both times. A first
// send that was told to try again may have committed meanwhile: its
// final answer is then a duplicate.
func checkSweepAnswers(t *testing.T, c *sweepCase) {
	t.Helper()
	if c.first.status == 0 && c.again.status == 0 {
		return // a queue: the broker took both; the stats and the sink say the rest
	}
	for i, a := range []sweepAnswer{c.first, c.again} {
		if a.status >= 500 || a.status == 0 {
			t.Errorf("answer %d: %d %.300s (%s)", i+1, a.status, a.body, sweepDescribe(c))
			continue
		}
		if c.refuse != "" {
			var e receive.ErrorResponse
			if a.status < 400 || json.Unmarshal([]byte(a.body), &e) != nil || e.Reason != c.refuse {
				t.Errorf("answer %d: %d %.300s, want a 4xx for %s", i+1, a.status, a.body, c.refuse)
			}
			continue
		}
		var r receive.Response
		ok := a.status < 300 && json.Unmarshal([]byte(a.body), &r) == nil
		if i == 0 {
			ok = ok && (r.Status == receive.StatusAccepted || (c.retried && r.Status == receive.StatusDuplicate))
		} else {
			ok = ok && r.Status == receive.StatusDuplicate
		}
		if !ok {
			t.Errorf("answer %d: %d %.300s, want %s (%s)", i+1, a.status, a.body, []string{"accepted", "a duplicate"}[i], sweepDescribe(c))
		}
	}
}

// checkSweepDelivery holds what the destination got: the body byte for
// byte, a key that is a header value, and a Content-Type and forwarded
// header that are the ones sent, or, where no store or destination could
// take them, the default and none.
func checkSweepDelivery(t *testing.T, c *sweepCase, d testenv.Delivery) {
	t.Helper()
	if !bytes.Equal(d.Body, c.msg.body) {
		t.Errorf("delivered a body of %d bytes, not the %d sent", len(d.Body), len(c.msg.body))
	}
	if !strings.HasPrefix(d.Key, c.msg.source+":") || len(d.Key) > len(c.msg.source)+1+provider.MaxKeyLen || !httpguts.ValidHeaderFieldValue(d.Key) {
		t.Errorf("delivered with Idempotency-Key %.80q: not %s:<key> as a bounded header value", d.Key, c.msg.source)
	}
	sent := c.msg.header.Get("Content-Type")
	wantCT := sent
	if !sweepSendable(sent, 256) {
		wantCT = receive.DefaultContentType(c.msg.body)
	}
	if got := d.Header.Get("Content-Type"); got != wantCT {
		t.Errorf("delivered with Content-Type %.80q, want %.80q (sent %.80q)", got, wantCT, sent)
	}
	if c.msg.source == "g" {
		sent, want := c.msg.header.Get("X-Github-Event"), ""
		if sweepSendable(sent, 1024) {
			want = sent
		}
		if got := d.Header.Get("X-Github-Event"); got != want {
			t.Errorf("forwarded X-GitHub-Event %.80q, want %.80q (sent %.80q)", got, want, sent)
		}
	}
	for name, vs := range d.Header {
		for _, v := range vs {
			if !httpguts.ValidHeaderFieldValue(v) || !utf8.ValidString(v) {
				t.Errorf("delivered header %s: %.80q is not a header value", name, v)
			}
		}
	}
}

// sweepSendable is what intake keeps of a value beside the body (see
// receive/storable.go): UTF-8, a valid header value, bounded.
func sweepSendable(v string, limit int) bool {
	return len(v) <= limit && utf8.ValidString(v) && httpguts.ValidHeaderFieldValue(v)
}

func sweepDescribe(c *sweepCase) string {
	var names []string
	for name, vs := range c.msg.header {
		names = append(names, fmt.Sprintf("%s=%.40q", name, vs[0]))
	}
	sort.Strings(names)
	return fmt.Sprintf("source %s, %d-byte body %.60q, headers %s", c.msg.source, len(c.msg.body), c.msg.body, strings.Join(names, " "))
}

// httpCarry is what Go's HTTP client writes in a header: no NUL, CR or
// LF (it refuses the request), anything else, of any length (a server
// answers one over its limit 431).
func httpCarry(value string) (string, bool) {
	return value, httpguts.ValidHeaderFieldValue(value)
}

// sweepHTTP is POST /in/{source} on the intake listener.
type sweepHTTP struct{ gw *oncehooktest.Gateway }

func newSweepHTTP(*testing.T) sweepPort { return &sweepHTTP{} }

func (*sweepHTTP) name() string { return "http" }
func (*sweepHTTP) intake(source string) string {
	if source == "g" {
		return ""
	}
	return "preset: generic, unsigned: true"
}
func (*sweepHTTP) carry(_, value string) (string, bool) { return httpCarry(value) }
func (*sweepHTTP) bodyLimit() int                       { return 2 << 20 }
func (*sweepHTTP) github() bool                         { return true }
func (*sweepHTTP) nativeType() string                   { return "" }
func (*sweepHTTP) native() string                       { return "" }
func (p *sweepHTTP) start(_ *testing.T, gw *oncehooktest.Gateway, _, _, _ string) {
	p.gw = gw
}

func (*sweepHTTP) refuses(sweepMsg) string { return "" }

func (p *sweepHTTP) send(t *testing.T, m sweepMsg) sweepAnswer {
	var req *http.Request
	if m.source == "g" {
		req = testenv.SignedRequest(t, p.gw.URL+"/in/g", "github", sweepGitHubSecret, m.body, "")
	} else {
		req, _ = http.NewRequest(http.MethodPost, p.gw.URL+"/in/"+m.source, bytes.NewReader(m.body))
	}
	for name, vs := range m.header {
		req.Header[name] = vs
	}
	return sweepDo(t, req)
}

func (*sweepHTTP) settled(*testing.T) error { return nil }

func sweepDo(t *testing.T, req *http.Request) sweepAnswer {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", req.Method, req.URL, err)
		return sweepAnswer{}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return sweepAnswer{status: resp.StatusCode, body: string(b)}
}

// sweepPublish is POST /v1/publish/{source} on the API listener: the key
// is the caller's Idempotency-Key where it gives one.
type sweepPublish struct{ gw *oncehooktest.Gateway }

func newSweepPublish(*testing.T) sweepPort { return &sweepPublish{} }

func (*sweepPublish) name() string                         { return "publish" }
func (*sweepPublish) intake(string) string                 { return "outbox: true" }
func (*sweepPublish) carry(_, value string) (string, bool) { return httpCarry(value) }
func (*sweepPublish) bodyLimit() int                       { return 2 << 20 }
func (*sweepPublish) github() bool                         { return false }
func (*sweepPublish) nativeType() string                   { return "" }
func (*sweepPublish) native() string                       { return "Idempotency-Key" }
func (p *sweepPublish) start(_ *testing.T, gw *oncehooktest.Gateway, _, _, _ string) {
	p.gw = gw
}

// refuses: an Idempotency-Key the proxy would not read (not printable
// ASCII, over 255 bytes) is 400 invalid, counted under the source.
func (*sweepPublish) refuses(m sweepMsg) string {
	if k := m.header.Get("Idempotency-Key"); k != "" && (len(k) > 255 || strings.ContainsFunc(k, func(r rune) bool { return r < 0x20 || r > 0x7e })) {
		return "invalid"
	}
	return ""
}

func (p *sweepPublish) send(t *testing.T, m sweepMsg) sweepAnswer {
	req, _ := http.NewRequest(http.MethodPost, p.gw.APIURL+"/v1/publish/"+m.source, bytes.NewReader(m.body))
	for name, vs := range m.header {
		req.Header[name] = vs
	}
	req.Header.Set("Authorization", "Bearer "+p.gw.APIToken)
	return sweepDo(t, req)
}

func (*sweepPublish) settled(*testing.T) error { return nil }

// sweepPublishTx is Outbox.PublishTx in a transaction of the caller's on
// the gateway's database, committed: its key, headers and content type
// are any bytes the caller's code has.
type sweepPublishTx struct {
	publish func(ctx context.Context, m sweepMsg) (oncehook.Published, error)
}

func newSweepPublishTx(*testing.T) sweepPort { return &sweepPublishTx{} }

func (*sweepPublishTx) name() string                         { return "publishtx" }
func (*sweepPublishTx) intake(string) string                 { return "outbox: true" }
func (*sweepPublishTx) carry(_, value string) (string, bool) { return value, true }
func (*sweepPublishTx) bodyLimit() int                       { return 2 << 20 }
func (*sweepPublishTx) github() bool                         { return false }
func (*sweepPublishTx) nativeType() string                   { return "" }
func (*sweepPublishTx) native() string                       { return "X-Publish-Key" } // stands for the key argument

// refuses: a key given as an Idempotency-Key in the publish's header is
// read as POST /v1/publish reads one, and refused alike.
func (*sweepPublishTx) refuses(m sweepMsg) string { return (&sweepPublish{}).refuses(m) }

func (*sweepPublishTx) settled(*testing.T) error { return nil }

func (p *sweepPublishTx) start(t *testing.T, gw *oncehooktest.Gateway, backend, storeURL, dir string) {
	if gw == nil {
		return
	}
	opts := func(m sweepMsg) *oncehook.PublishOptions {
		return &oncehook.PublishOptions{ContentType: m.header.Get("Content-Type"), Header: m.header}
	}
	if backend == "postgres" {
		pool, err := pgxpool.New(context.Background(), storeURL)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		outbox := oncehook.GatewayOutbox(gw.Gateway, postgres.TxDriver{})
		p.publish = func(ctx context.Context, m sweepMsg) (oncehook.Published, error) {
			tx, err := pool.Begin(ctx)
			if err != nil {
				return oncehook.Published{}, fmt.Errorf("begin: %v: %w", err, errCallerBusy)
			}
			defer tx.Rollback(ctx)
			res, err := outbox.PublishTx(ctx, tx, m.source, m.key, m.body, opts(m))
			if err != nil {
				return res, err
			}
			return res, tx.Commit(ctx)
		}
		return
	}
	db := sqlitetest.Open(t, filepath.Join(dir, "oncehook.db"))
	outbox := oncehook.GatewayOutbox(gw.Gateway, sqlite.TxDriver{})
	p.publish = func(ctx context.Context, m sweepMsg) (oncehook.Published, error) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			// The file's write lock, held by the gateway's writer past the
			// busy timeout on a loaded machine: the caller's own database
			// was busy, and its code tries the transaction again.
			return oncehook.Published{}, fmt.Errorf("begin: %v: %w", err, errCallerBusy)
		}
		defer func(tx *sql.Tx) { tx.Rollback() }(tx)
		res, err := outbox.PublishTx(ctx, tx, m.source, m.key, m.body, opts(m))
		if err != nil {
			return res, err
		}
		return res, tx.Commit()
	}
}

// errCallerBusy is the caller's own transaction that could not begin.
var errCallerBusy = errors.New("the caller's database is busy")

// send answers as POST /v1/publish would: 202 accepted, 200 duplicate, a
// rejection's status, 503 when the store (or the caller's own database)
// could not take it now, or 500 for any other error (the caller's
// transaction rolled back for it).
func (p *sweepPublishTx) send(t *testing.T, m sweepMsg) sweepAnswer {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := p.publish(ctx, m)
	var rej *receive.Rejection
	switch {
	case errors.As(err, &rej):
		b, _ := json.Marshal(receive.ErrorResponse{Error: rej.Detail, Reason: rej.Reason})
		return sweepAnswer{status: rej.Status, body: string(b)}
	case errors.Is(err, errCallerBusy) || errors.Is(err, store.ErrUnavailable):
		b, _ := json.Marshal(receive.ErrorResponse{Error: err.Error(), Reason: receive.ReasonUnavailable})
		return sweepAnswer{status: http.StatusServiceUnavailable, body: string(b)}
	case err != nil:
		return sweepAnswer{status: http.StatusInternalServerError, body: err.Error()}
	}
	status, verdict := http.StatusAccepted, receive.StatusAccepted
	if res.Duplicate {
		status, verdict = http.StatusOK, receive.StatusDuplicate
	}
	b, _ := json.Marshal(receive.Response{Status: verdict, Events: []receive.EventResult{{Key: res.Key, Status: verdict}}})
	return sweepAnswer{status: status, body: string(b)}
}

// sweepNATS is a JetStream stream, one subject per source.
type sweepNATS struct {
	url, stream, prefix string
	js                  jetstream.JetStream
}

func newSweepNATS(t *testing.T) sweepPort {
	if t == nil {
		return &sweepNATS{}
	}
	p := &sweepNATS{url: testenv.NATS(t)}
	p.js, p.stream, p.prefix = brokertest.NATSStream(t, p.url, jetstream.MemoryStorage)
	return p
}

func (*sweepNATS) name() string { return "nats" }
func (p *sweepNATS) intake(source string) string {
	return fmt.Sprintf(`consume: {nats: {url: %s, stream: %s, subject: %s.%s}}`, p.url, p.stream, p.prefix, source)
}

// carry: a NATS header is a line of its own (no CR, no LF), and
// JetStream takes 64 KiB of headers and 1 MiB (max_payload) of headers
// and body together.
func (*sweepNATS) carry(_, value string) (string, bool) {
	if strings.ContainsAny(value, "\r\n") {
		return "", false
	}
	return value[:min(len(value), 63_000)], true
}
func (*sweepNATS) bodyLimit() int                                                  { return 1<<20 - 4<<10 }
func (*sweepNATS) github() bool                                                    { return true }
func (*sweepNATS) nativeType() string                                              { return "" }
func (*sweepNATS) native() string                                                  { return "" }
func (*sweepNATS) refuses(sweepMsg) string                                         { return "" }
func (*sweepNATS) start(*testing.T, *oncehooktest.Gateway, string, string, string) {}

func (p *sweepNATS) send(t *testing.T, m sweepMsg) sweepAnswer {
	msg := &nats.Msg{Subject: p.prefix + "." + m.source, Header: nats.Header{}, Data: m.body}
	for name, vs := range m.header {
		msg.Header[name] = vs
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := p.js.PublishMsg(ctx, msg); err != nil {
		t.Errorf("publish to NATS (%s): %v", sweepDescribe(&sweepCase{msg: m}), err)
	}
	return sweepAnswer{}
}

// settled: every source's consumer has had every message of its subject,
// and acknowledged each (a Term is an ack: the stats count those).
func (p *sweepNATS) settled(*testing.T) error {
	ctx := context.Background()
	for _, source := range []string{"k", "h", "g"} {
		cons, err := p.js.Consumer(ctx, p.stream, "oncehook-"+source)
		if err != nil {
			return err
		}
		info, err := cons.Info(ctx)
		if err != nil {
			return err
		}
		if info.NumAckPending != 0 || info.NumPending != 0 {
			return fmt.Errorf("consumer of %s: %d unacknowledged, %d not delivered yet", source, info.NumAckPending, info.NumPending)
		}
	}
	return nil
}

// sweepRabbit is one queue per source, each with a dead-letter queue.
type sweepRabbit struct {
	url   string
	ch    *amqp.Channel
	mu    sync.Mutex
	queue map[string]string
	dead  map[string]string
}

func newSweepRabbit(t *testing.T) sweepPort {
	p := &sweepRabbit{queue: map[string]string{}, dead: map[string]string{}}
	if t == nil {
		return p
	}
	for _, source := range []string{"k", "h", "g", "n"} {
		var ch *amqp.Channel
		p.url, ch, p.queue[source], p.dead[source] = brokertest.RabbitQueue(t)
		if p.ch == nil {
			p.ch = ch
		}
	}
	return p
}

func (*sweepRabbit) name() string { return "rabbitmq" }
func (p *sweepRabbit) intake(source string) string {
	return fmt.Sprintf(`consume: {amqp: {url: "%s", queue: %s}}`, p.url, p.queue[source])
}

// carry: a property (message-id, type, content-type) is a short string,
// 255 bytes at most; a header field any bytes, within a frame (128 KiB).
func (*sweepRabbit) carry(name, value string) (string, bool) {
	if _, ok := rabbitProperty[name]; ok {
		return value[:min(len(value), 255)], true
	}
	return value[:min(len(value), 128_000)], true
}
func (*sweepRabbit) bodyLimit() int                                                  { return 2 << 20 }
func (*sweepRabbit) github() bool                                                    { return true }
func (*sweepRabbit) nativeType() string                                              { return "Amqp-Type" }
func (*sweepRabbit) native() string                                                  { return "Message-Id" }
func (*sweepRabbit) refuses(sweepMsg) string                                         { return "" }
func (*sweepRabbit) start(*testing.T, *oncehooktest.Gateway, string, string, string) {}

var rabbitProperty = map[string]func(*amqp.Publishing, string){
	"Message-Id":   func(p *amqp.Publishing, v string) { p.MessageId = v },
	"Content-Type": func(p *amqp.Publishing, v string) { p.ContentType = v },
	"Amqp-Type":    func(p *amqp.Publishing, v string) { p.Type = v },
}

func (p *sweepRabbit) send(t *testing.T, m sweepMsg) sweepAnswer {
	pub := amqp.Publishing{DeliveryMode: amqp.Persistent, Body: m.body, Headers: amqp.Table{}}
	for name, vs := range m.header {
		if set, ok := rabbitProperty[name]; ok {
			set(&pub, vs[0])
			continue
		}
		pub.Headers[name] = vs[0]
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	dc, err := p.ch.PublishWithDeferredConfirm("", p.queue[m.source], true, false, pub)
	if err != nil || !dc.Wait() {
		t.Errorf("publish to RabbitMQ (%s): %v", sweepDescribe(&sweepCase{msg: m}), err)
	}
	return sweepAnswer{}
}

// settled: every queue is empty, and so is every dead-letter queue.
func (p *sweepRabbit) settled(*testing.T) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for source, q := range p.queue {
		for _, name := range []string{q, p.dead[source]} {
			info, err := p.ch.QueueDeclarePassive(name, false, false, false, false, nil)
			if err != nil {
				return err
			}
			if info.Messages != 0 {
				return fmt.Errorf("queue %s holds %d messages", name, info.Messages)
			}
		}
	}
	return nil
}

// sweepKafka is a topic per source in an in-process cluster; the record's
// key is the n source's key (Kafka-Key).
type sweepKafka struct {
	k        *testenv.Kafka
	cl       *kgo.Client
	produced atomic.Int64
}

func newSweepKafka(t *testing.T) sweepPort {
	if t == nil {
		return &sweepKafka{}
	}
	p := &sweepKafka{k: testenv.NewKafka(t, 1, "k", "h", "g", "n")}
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.k.Addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	p.cl = cl
	return p
}

func (*sweepKafka) name() string { return "kafka" }
func (p *sweepKafka) intake(source string) string {
	return fmt.Sprintf(`consume: {kafka: {brokers: [%s], topic: %s, group: oncehook-%s}}`, strings.Join(p.k.Addrs, ", "), source, source)
}

// carry: a record's key and headers are any bytes, within the
// producer's batch (1 MB) with the rest of the record.
func (*sweepKafka) carry(_, value string) (string, bool) {
	return value[:min(len(value), 990_000)], true
}
func (*sweepKafka) bodyLimit() int                                                  { return 990_000 }
func (*sweepKafka) github() bool                                                    { return true }
func (*sweepKafka) nativeType() string                                              { return "" }
func (*sweepKafka) native() string                                                  { return "Kafka-Key" }
func (*sweepKafka) refuses(sweepMsg) string                                         { return "" }
func (*sweepKafka) start(*testing.T, *oncehooktest.Gateway, string, string, string) {}

func (p *sweepKafka) send(t *testing.T, m sweepMsg) sweepAnswer {
	rec := &kgo.Record{Topic: m.source, Value: m.body}
	for name, vs := range m.header {
		if name == "Kafka-Key" {
			rec.Key = []byte(vs[0])
			continue
		}
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: name, Value: []byte(vs[0])})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		t.Errorf("produce to Kafka (%s): %v", sweepDescribe(&sweepCase{msg: m}), err)
	} else {
		p.produced.Add(1)
	}
	return sweepAnswer{}
}

// settled: every group has committed the end of its topic.
func (p *sweepKafka) settled(t *testing.T) error {
	sent := p.produced.Load()
	total := int64(0)
	for _, source := range []string{"k", "h", "g", "n"} {
		for _, o := range p.k.Committed(t, "oncehook-"+source, source) {
			total += o
		}
	}
	if total != sent {
		return fmt.Errorf("committed offsets sum to %d, %d records produced", total, sent)
	}
	return nil
}
