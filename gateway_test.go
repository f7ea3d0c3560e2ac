package oncehook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/oncehooktest"
	"github.com/oncehook/oncehook/provider"
	"github.com/oncehook/oncehook/receive"
	"github.com/oncehook/oncehook/store"
)

const stripeSecret = "whsec_test_stripe_secret"

type gateway = oncehooktest.Gateway

// startGateway serves cfg (store in a temp dir) until the test ends.
func startGateway(t *testing.T, cfgText string) *gateway { return oncehooktest.Start(t, cfgText) }

// sourceConfig is a gateway config with one source delivering to sinkURL
// (fast retries), on SQLite in the test's directory. extra is YAML added
// after the source: more of its fields (indented 4) or more sources
// (indented 2).
func sourceConfig(name, preset, secret, sinkURL, extra string) string {
	return fmt.Sprintf(`
store: sqlite://$DIR/oncehook.db
sources:
  - name: %s
    preset: %s
    secrets: [%q]
    destinations: [app]
%s
destinations:
  - name: app
    url: %s
    timeout: 2s
    retry: {max_attempts: 5, base_delay: 10ms, max_delay: 50ms}
`, name, preset, secret, extra, sinkURL)
}

func stripeConfig(sinkURL, extra string) string {
	return sourceConfig("stripe", "stripe", stripeSecret, sinkURL, extra)
}

func stripeEvent(id string) []byte {
	return []byte(fmt.Sprintf(`{"id":%q,"object":"event","type":"payment_intent.succeeded","data":{"object":{"id":"pi_1","amount":2000}}}`, id))
}

type answer struct {
	Status int
	Body   receive.Response
	Error  receive.ErrorResponse
}

func do(t *testing.T, client *http.Client, req *http.Request) answer {
	t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		t.Error(err)
		return answer{}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{Status: resp.StatusCode}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(raw, &a.Body); err != nil {
			t.Errorf("200 body %q: %v", raw, err)
		}
	} else if err := json.Unmarshal(raw, &a.Error); err != nil {
		t.Errorf("%d body %q: %v", resp.StatusCode, raw, err)
	}
	return a
}

func stats(t *testing.T, gw *gateway) store.Stats {
	t.Helper()
	st, err := gw.Store().Stats(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// Invariants 2 and 3: the store arbitrates, and a duplicate is a success.
// 500 events, each sent 5 times at once: 500 stored, 2,500 answers of 200,
// each event delivered exactly once.
func TestDuplicateStormStoresAndDeliversEachEventOnce(t *testing.T) {
	sink := testenv.NewSink(t)
	gw := startGateway(t, stripeConfig(sink.URL, ""))
	const events, copies = 500, 5

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var mu sync.Mutex
	verdicts := map[string][]string{}
	storm := testenv.NewStorm(64)
	for i := range events {
		id := fmt.Sprintf("evt_storm_%04d", i)
		body := stripeEvent(id)
		for range copies {
			storm.Go(func() {
				a := do(t, client, testenv.SignedRequest(t, gw.URL+"/in/stripe", "stripe", stripeSecret, body, ""))
				if a.Status != http.StatusOK {
					t.Errorf("%s: status %d (%+v)", id, a.Status, a.Error)
					return
				}
				if len(a.Body.Events) != 1 || a.Body.Events[0].Key != id || a.Body.Events[0].Status != a.Body.Status {
					t.Errorf("%s: body %+v", id, a.Body)
					return
				}
				mu.Lock()
				verdicts[id] = append(verdicts[id], a.Body.Status)
				mu.Unlock()
			})
		}
	}
	storm.Wait()

	for id, vs := range verdicts {
		accepted := 0
		for _, v := range vs {
			if v == receive.StatusAccepted {
				accepted++
			} else if v != receive.StatusDuplicate {
				t.Errorf("%s: verdict %q", id, v)
			}
		}
		if accepted != 1 || len(vs) != copies {
			t.Errorf("%s: %d answers, %d accepted; want %d and 1", id, len(vs), accepted, copies)
		}
	}
	if st := stats(t, gw); st.Events != events {
		t.Errorf("stored %d events, want %d", st.Events, events)
	}
	if !testenv.WaitFor(20*time.Second, func() bool { return len(sink.ByKey()) == events }) {
		t.Fatalf("delivered %d distinct events, want %d", len(sink.ByKey()), events)
	}
	time.Sleep(200 * time.Millisecond) // a second delivery, if any, would land now
	sink.CheckEachOnce(t)
	st := stats(t, gw)
	if st.Delivered != events || st.Pending != 0 {
		t.Errorf("stats %+v: want %d delivered and none pending", st, events)
	}
}

// Invariant 4: rejected input leaves no trace in the event store.
func TestRejectedInputLeavesNoTrace(t *testing.T) {
	sink := testenv.NewSink(t)
	gw := startGateway(t, stripeConfig(sink.URL, `
  - name: strict
    preset: generic
    secrets: [g-secret]
    key: ["json:event_id"]
    on_missing_key: reject
    destinations: [app]
`)+"max_body_size: 64KiB\n")
	url := gw.URL + "/in/stripe"
	sign := func(body []byte) *http.Request {
		return testenv.SignedRequest(t, url, "stripe", stripeSecret, body, "")
	}
	stale := func() *http.Request {
		body := stripeEvent("evt_stale")
		req := sign(body)
		ts := time.Now().Add(-10 * time.Minute).Unix()
		req.Header.Set("Stripe-Signature", stripeHeader(ts, body))
		return req
	}
	future := func() *http.Request {
		body := stripeEvent("evt_future")
		req := sign(body)
		req.Header.Set("Stripe-Signature", stripeHeader(time.Now().Add(10*time.Minute).Unix(), body))
		return req
	}
	cases := []struct {
		name   string
		req    func() *http.Request
		status int
		reason string
	}{
		{"bad signature", func() *http.Request {
			r := sign(stripeEvent("evt_bad"))
			r.Header.Set("Stripe-Signature", "t=1,v1=00")
			return r
		}, 401, receive.ReasonSignature},
		{"no signature", func() *http.Request {
			r, _ := http.NewRequest("POST", url, bytes.NewReader(stripeEvent("evt_nosig")))
			return r
		}, 401, receive.ReasonSignature},
		{"tampered body", func() *http.Request {
			r := sign(stripeEvent("evt_1"))
			r.Body = io.NopCloser(bytes.NewReader(stripeEvent("evt_2")))
			return r
		}, 401, receive.ReasonSignature},
		{"stale timestamp", stale, 401, receive.ReasonSignature},
		{"future timestamp", future, 401, receive.ReasonSignature},
		{"unknown source", func() *http.Request {
			return testenv.SignedRequest(t, gw.URL+"/in/nope", "stripe", stripeSecret, stripeEvent("evt_x"), "")
		}, 404, receive.ReasonUnknownSource},
		{"malformed json", func() *http.Request { return sign([]byte(`{"id":"evt_trunc",`)) }, 400, receive.ReasonMalformed},
		{"oversized body", func() *http.Request {
			return sign([]byte(`{"id":"evt_big","pad":"` + strings.Repeat("x", 70<<10) + `"}`))
		}, 413, receive.ReasonTooLarge},
		{"oversized body, chunked", func() *http.Request {
			body := []byte(`{"id":"evt_big2","pad":"` + strings.Repeat("x", 70<<10) + `"}`)
			r := sign(body)
			r.Body = io.NopCloser(bytes.NewReader(body)) // hide the length
			r.ContentLength = -1
			return r
		}, 413, receive.ReasonTooLarge},
		{"missing key on a rejecting source", func() *http.Request {
			return testenv.SignedRequest(t, gw.URL+"/in/strict", "generic", "g-secret", []byte(`{"other":1}`), "")
		}, 422, receive.ReasonMissingKey},
		{"GET", func() *http.Request {
			r, _ := http.NewRequest("GET", url, nil)
			return r
		}, 405, receive.ReasonMethod},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := do(t, http.DefaultClient, c.req())
			if a.Status != c.status || a.Error.Reason != c.reason {
				t.Fatalf("got %d %+v, want %d %s", a.Status, a.Error, c.status, c.reason)
			}
			if st := stats(t, gw); st.Events != 0 || st.Pending+st.Delivered+st.Dead != 0 {
				t.Fatalf("store holds %+v after a rejected request", st)
			}
		})
	}
	if n := len(sink.Deliveries()); n != 0 {
		t.Fatalf("%d deliveries from rejected requests", n)
	}
	// Each rejection is counted by source and reason.
	resp, err := http.Get(gw.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	text, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, line := range []string{
		`oncehook_requests_total{outcome="unauthorized",source="stripe"} 5`,
		`oncehook_requests_total{outcome="too_large",source="stripe"} 2`,
		`oncehook_requests_total{outcome="unknown_source",source=""} 1`,
		`oncehook_requests_total{outcome="missing_key",source="strict"} 1`,
	} {
		if !strings.Contains(string(text), line) {
			t.Errorf("/metrics lacks %s", line)
		}
	}
}

// stripeHeader signs body as Stripe would have at ts.
func stripeHeader(ts int64, body []byte) string {
	p, _ := provider.New("stripe", provider.Options{Secrets: []string{stripeSecret}})
	r := &provider.Request{Header: http.Header{}, Body: body}
	p.Sign(r, stripeSecret, time.Unix(ts, 0), "")
	return r.Header.Get("Stripe-Signature")
}

// Invariant 4's other answer: a source set to discard answers a bad
// signature with 200 (so the provider does not pause the endpoint) and still
// stores nothing.
func TestBadSignatureOnADiscardingSourceIs200AndStoresNothing(t *testing.T) {
	sink := testenv.NewSink(t)
	gw := startGateway(t, sourceConfig("asaas", "asaas", "tok", sink.URL, "    on_bad_signature: discard"))
	req, _ := http.NewRequest(http.MethodPost, gw.URL+"/in/asaas", strings.NewReader(`{"id":"evt_forged"}`))
	req.Header.Set("asaas-access-token", "guess")
	a := do(t, http.DefaultClient, req)
	if a.Status != 200 || a.Body.Status != receive.StatusDiscarded || len(a.Body.Events) != 0 {
		t.Fatalf("got %d %+v, want 200 discarded", a.Status, a.Body)
	}
	if st := stats(t, gw); st.Events != 0 {
		t.Fatalf("stored %d events from a forged request", st.Events)
	}
	req, _ = http.NewRequest(http.MethodPost, gw.URL+"/in/asaas", strings.NewReader(`{"id":"evt_real"}`))
	req.Header.Set("asaas-access-token", "tok")
	if a := do(t, http.DefaultClient, req); a.Status != 200 || a.Body.Status != receive.StatusAccepted {
		t.Fatalf("a genuine request: %d %+v", a.Status, a.Body)
	}
}

// Events without a key are accepted by default (losing an event is worse
// than a possible duplicate), flagged keyless, counted, and delivered.
func TestMissingKeyIsAcceptedAsKeylessAndDelivered(t *testing.T) {
	sink := testenv.NewSink(t)
	gw := startGateway(t, stripeConfig(sink.URL, ""))
	for range 2 {
		a := do(t, http.DefaultClient, testenv.SignedRequest(t, gw.URL+"/in/stripe", "stripe", stripeSecret, []byte(`{"object":"event"}`), ""))
		if a.Status != 200 || a.Body.Status != receive.StatusAccepted || !a.Body.Events[0].Keyless {
			t.Fatalf("got %d %+v, want accepted keyless", a.Status, a.Body)
		}
	}
	if st := stats(t, gw); st.Events != 2 || st.Keyless != 2 {
		t.Fatalf("stats %+v: want 2 keyless events (no dedup without a key)", st)
	}
	if !testenv.WaitFor(5*time.Second, func() bool { return len(sink.Deliveries()) == 2 }) {
		t.Fatalf("delivered %d, want 2", len(sink.Deliveries()))
	}
	for _, d := range sink.Deliveries() {
		if !strings.HasPrefix(d.Key, "stripe:keyless:") {
			t.Errorf("Idempotency-Key %q: want a stored keyless key", d.Key)
		}
	}
}

// Invariant 10: windows are explicit. Inside its window a key is a
// duplicate; once the window has passed and the sweep has run, the key is
// gone from the store (and from the in-memory set) and the same key is a new
// event again: the provider's retries are long over by then.
func TestKeysAreSweptAfterTheirWindow(t *testing.T) {
	sink := testenv.NewSink(t)
	gw := oncehooktest.StartWith(t, stripeConfig(sink.URL, "    window: 1s"), oncehook.Options{SweepInterval: 50 * time.Millisecond})
	send := func() string {
		a := do(t, http.DefaultClient, testenv.SignedRequest(t, gw.URL+"/in/stripe", "stripe", stripeSecret, stripeEvent("evt_window"), ""))
		return a.Body.Status
	}
	if s := send(); s != receive.StatusAccepted {
		t.Fatalf("first: %s", s)
	}
	if s := send(); s != receive.StatusDuplicate {
		t.Fatalf("inside the window: %s", s)
	}
	if !testenv.WaitFor(5*time.Second, func() bool { return len(sink.Deliveries()) == 1 }) {
		t.Fatal("not delivered")
	}
	// Past the window, the delivered event is swept.
	if !testenv.WaitFor(5*time.Second, func() bool { return stats(t, gw).Events == 0 }) {
		t.Fatalf("not swept: %+v", stats(t, gw))
	}
	if s := send(); s != receive.StatusAccepted {
		t.Fatalf("after the window: %s, want a new event", s)
	}
}

// Invariant 1: if the store cannot commit, the answer is 503, never 200.
func TestStoreUnavailableAnswers503(t *testing.T) {
	sink := testenv.NewSink(t)
	gw := startGateway(t, stripeConfig(sink.URL, ""))
	if a := do(t, http.DefaultClient, testenv.SignedRequest(t, gw.URL+"/in/stripe", "stripe", stripeSecret, stripeEvent("evt_before"), "")); a.Status != 200 {
		t.Fatalf("before: %d", a.Status)
	}
	// The probes answer alike on both listeners, without a token (the
	// API listener had only /healthz, found from outside).
	probe := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	probes := func(ready int) {
		t.Helper()
		for _, p := range []string{"/livez", "/healthz", "/readyz"} {
			want := 200
			if p == "/readyz" {
				want = ready
			}
			intake, intakeBody := probe(gw.URL + p)
			api, apiBody := probe(gw.APIURL + p)
			if intake != want || api != want || apiBody != intakeBody {
				t.Errorf("%s: intake %d %s, API %d %s; want %d alike", p, intake, intakeBody, api, apiBody, want)
			}
		}
	}
	probes(http.StatusOK)
	gw.Store().Close() // the database is gone from under the gateway
	for i := range 3 {
		a := do(t, http.DefaultClient, testenv.SignedRequest(t, gw.URL+"/in/stripe", "stripe", stripeSecret, stripeEvent(fmt.Sprintf("evt_down_%d", i)), ""))
		if a.Status != http.StatusServiceUnavailable || a.Error.Reason != receive.ReasonUnavailable {
			t.Fatalf("with the store closed: %d %+v, want 503", a.Status, a.Error)
		}
	}
	probes(http.StatusServiceUnavailable)
}

// Found from outside (#41): //in/stripe and /in/../in/stripe got
// net/http's 307 to the clean path, and a 2 MB header its plain-text
// 431, none of them counted. Intake answers them in its one error shape
// and counts them by reason, as its other rejections.
func TestUncleanPathsAndOversizedHeadersAreIntakesRejections(t *testing.T) {
	sink := testenv.NewSink(t)
	gw := startGateway(t, stripeConfig(sink.URL, ""))
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, p := range []string{"//in/stripe", "/in/../in/stripe"} {
		a := do(t, noRedirect, testenv.SignedRequest(t, gw.URL+p, "stripe", stripeSecret, stripeEvent("evt_unclean"), ""))
		if a.Status != http.StatusBadRequest || a.Error.Reason != "bad_path" {
			t.Errorf("POST %s: %d %+v; want 400 bad_path", p, a.Status, a.Error)
		}
	}
	req := testenv.SignedRequest(t, gw.URL+"/in/stripe", "stripe", stripeSecret, stripeEvent("evt_big_header"), "")
	req.Header.Set("X-Padding", strings.Repeat("a", 2<<20))
	if a := do(t, http.DefaultClient, req); a.Status != http.StatusRequestHeaderFieldsTooLarge || a.Error.Reason != "header_too_large" {
		t.Errorf("a 2 MB header: %d %+v; want 431 header_too_large", a.Status, a.Error)
	}
	if n := metric(t, gw, `oncehook_requests_total{outcome="bad_path",source=""}`); n != 2 {
		t.Errorf("%d unclean paths counted, want 2", n)
	}
	if n := metric(t, gw, `oncehook_requests_total{outcome="header_too_large",source=""}`); n != 1 {
		t.Errorf("%d oversized headers counted, want 1", n)
	}
	if stats(t, gw).Events != 0 {
		t.Errorf("a refused request stored an event: %+v", stats(t, gw))
	}
}
