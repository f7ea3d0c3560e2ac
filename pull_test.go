package oncehook_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/api"
	"github.com/oncehook/oncehook/deliver/pull"
	"github.com/oncehook/oncehook/effect"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/provider"
)

const (
	pullToken  = "pull-token-0123456789abcdef"
	pullSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
)

// pullGateway serves a generic, unsigned source delivering to a pull
// destination (laptop, signed with pullSecret) and to nothing else, with
// fast retries; extra is more of the destination's fields.
func pullGateway(t *testing.T, extra string) *gateway {
	t.Helper()
	return startGateway(t, `
store: sqlite://$DIR/oncehook.db
api:
  tokens:
    - {name: ops, token: `+opsToken+`}
    - {name: dev, token: `+pullToken+`, pull: [laptop]}
    - {name: ro, token: `+roToken+`, read_only: true}
sources:
  - name: shop
    preset: generic
    unsigned: true
    key: ["json:id"]
    type: ["json:type"]
    destinations: [laptop]
  - name: ordered
    preset: generic
    unsigned: true
    key: ["json:id"]
    order: {entity: "json:entity", version: "json:v", mode: fifo}
    destinations: [laptop]
destinations:
  - name: laptop
    pull: {}
    secret: `+pullSecret+`
    retry: {max_attempts: 5, base_delay: 10ms, max_delay: 50ms}
`+extra)
}

func postShop(t *testing.T, gw *gateway, id string) string {
	t.Helper()
	body := fmt.Sprintf(`{"id":%q,"type":"order.paid","note":"caf\u00e9 \u2603"}`, id)
	resp, err := http.Post(gw.URL+"/in/shop", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("post %s: %d", id, resp.StatusCode)
	}
	return body
}

// pullAll pulls until want deliveries came or within passed.
func pullAll(t *testing.T, c *pull.Client, want int, within time.Duration, b pull.PullBody) []pull.WireDelivery {
	t.Helper()
	var out []pull.WireDelivery
	deadline := time.Now().Add(within)
	for len(out) < want && time.Now().Before(deadline) {
		if b.Wait == "" {
			b.Wait = "2s"
		}
		ds, err := c.Pull(context.Background(), "laptop", b)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ds...)
	}
	return out
}

// Invariant 26: a pulled delivery carries what a push carries (the body
// byte for byte, the key, the signature), is acked with a classified
// outcome, and a retry or an expired lease hands it out again as its next
// attempt, under the same key.
func TestPulledIsDeliveredLikePushed(t *testing.T) {
	gw := pullGateway(t, "")
	c := pull.NewClient(gw.APIURL, pullToken, nil)
	bodies := map[string]string{}
	for i := range 3 {
		id := "ev_" + strconv.Itoa(i)
		bodies["shop:"+id] = postShop(t, gw, id)
	}
	ds := pullAll(t, c, 3, 20*time.Second, pull.PullBody{Max: 10, Lease: "30s"})
	if len(ds) != 3 {
		t.Fatalf("pulled %d deliveries, want 3", len(ds))
	}
	key, _ := provider.DecodeStandardSecret(pullSecret)
	byKey := map[string]pull.WireDelivery{}
	for _, d := range ds {
		h := http.Header(d.Headers)
		ik := h.Get("Idempotency-Key")
		byKey[ik] = d
		if string(d.Body) != bodies[ik] {
			t.Errorf("%s: body %q, want %q byte for byte", ik, d.Body, bodies[ik])
		}
		if d.Attempt != 1 || h.Get("X-Oncehook-Attempt") != "1" || h.Get("X-Oncehook-Source") != "shop" || d.Token == "" {
			t.Errorf("%s: attempt %d, headers %v, token %q", ik, d.Attempt, h, d.Token)
		}
		ts, _ := strconv.ParseInt(h.Get("webhook-timestamp"), 10, 64)
		if want := provider.SignStandard(key, h.Get("webhook-id"), time.Unix(ts, 0), d.Body); h.Get("webhook-signature") != want {
			t.Errorf("%s: signature %q, want %q (the destination's secret over the body)", ik, h.Get("webhook-signature"), want)
		}
	}
	// Delivered, retried (a 503 from the local app), and a lease left to
	// expire.
	ok, retried := byKey["shop:ev_0"], byKey["shop:ev_1"]
	// A negative latency or retry_after is refused, naming the field (a
	// latency of -5h was recorded as an attempt that began in the future).
	for field, ack := range map[string]pull.AckBody{
		"latency":     {Token: ok.Token, Status: 200, Latency: "-5h"},
		"retry_after": {Token: ok.Token, Status: 503, RetryAfter: "-1s"},
	} {
		var apiErr *pull.APIError
		if _, err := c.Ack(context.Background(), ok.ID, ack); !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest || apiErr.Body.Field != field {
			t.Fatalf("an ack with a negative %s: %v, want 400 naming it", field, err)
		}
	}
	if a, err := c.Ack(context.Background(), ok.ID, pull.AckBody{Token: ok.Token, Status: 200, Latency: "3ms"}); err != nil || a.Outcome != "delivered" {
		t.Fatalf("ack 200: %+v %v", a, err)
	}
	// The same token again: the lease is gone.
	var apiErr *pull.APIError
	if _, err := c.Ack(context.Background(), ok.ID, pull.AckBody{Token: ok.Token, Status: 200}); !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict || apiErr.Body.Reason != "lease_unknown" {
		t.Fatalf("second ack: %v, want 409 lease_unknown", err)
	}
	if _, err := c.Ack(context.Background(), retried.ID, pull.AckBody{Token: "not-the-token", Status: 200}); !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict || apiErr.Body.Reason != "stale_token" {
		t.Fatalf("ack with a wrong token: %v, want 409 stale_token", err)
	}
	if a, err := c.Ack(context.Background(), retried.ID, pull.AckBody{Token: retried.Token, Status: 503, Error: "local app down"}); err != nil || a.Outcome != "retry" {
		t.Fatalf("ack 503: %+v %v", a, err)
	}
	again := pullAll(t, c, 1, 20*time.Second, pull.PullBody{Max: 10, Lease: "2s"})
	if len(again) != 1 || again[0].ID != retried.ID || again[0].Attempt != 2 || http.Header(again[0].Headers).Get("Idempotency-Key") != "shop:ev_1" {
		t.Fatalf("after a 503: %+v, want ev_1's attempt 2", again)
	}
	// ev_2 is still leased (30s): not handed out again meanwhile.
	// Let attempt 2 of ev_1 expire (2s lease): it comes back as attempt 3.
	third := pullAll(t, c, 1, 20*time.Second, pull.PullBody{Max: 10, Lease: "30s"})
	if len(third) != 1 || third[0].ID != retried.ID || third[0].Attempt != 3 {
		t.Fatalf("after an expired lease: %+v, want ev_1's attempt 3", third)
	}
	if string(third[0].Body) != bodies["shop:ev_1"] {
		t.Fatalf("attempt 3's body %q", third[0].Body)
	}
	// 404: permanent, a dead letter, not handed out again.
	if a, err := c.Ack(context.Background(), third[0].ID, pull.AckBody{Token: third[0].Token, Status: 404}); err != nil || a.Outcome != "permanent" {
		t.Fatalf("ack 404: %+v %v", a, err)
	}
	left := byKey["shop:ev_2"]
	if _, err := c.Ack(context.Background(), left.ID, pull.AckBody{Token: left.Token, Status: 204}); err != nil {
		t.Fatal(err)
	}
	if more, err := c.Pull(context.Background(), "laptop", pull.PullBody{Max: 10, Wait: "1s"}); err != nil || len(more) != 0 {
		t.Fatalf("after every ack: %d more, %v", len(more), err)
	}
	// The attempts say which consumer answered, as the API shows them.
	if !testenv.WaitFor(10*time.Second, func() bool {
		detail := apiGet(t, gw, "/v1/events?source=shop&key=ev_1")
		m := regexp.MustCompile(`"id":(\d+)`).FindStringSubmatch(detail)
		if m == nil {
			return false
		}
		e := apiGet(t, gw, "/v1/events/"+m[1])
		return strings.Contains(e, "consumer dev") && strings.Contains(e, "did not ack before its lease ended") && strings.Contains(e, `"dead"`)
	}) {
		t.Fatalf("ev_1's attempts do not name the consumer: %s", apiGet(t, gw, "/v1/events?source=shop&key=ev_1"))
	}
}

// A consumer's token (pull: [laptop]) pulls and acks laptop's deliveries,
// and gets 403 on every other route of the API and from every other
// destination; a read-only or a publishing token may not pull.
func TestPullTokenMayOnlyPullItsDestinations(t *testing.T) {
	gw := pullGateway(t, "  - {name: app, url: http://127.0.0.1:9/}\n")
	do := func(token, method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, gw.APIURL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	routes := append(api.Routes(), effect.Routes()...)
	routes = append(routes, oncehook.PublishRoute)
	for _, r := range routes {
		method, path, _ := strings.Cut(r, " ")
		path = wildcard.ReplaceAllString(path, "laptop")
		if status, b := do(pullToken, method, path, "{}"); status != http.StatusForbidden || !strings.Contains(b, `"pull_only"`) {
			t.Errorf("%s %s with the consumer's token: %d %s, want 403 pull_only", method, path, status, b)
		}
	}
	for _, c := range []struct {
		token, dest string
		want        int
	}{
		{pullToken, "app", http.StatusForbidden},  // not a destination it names
		{pullToken, "nope", http.StatusForbidden}, // nor one that does not exist
		{roToken, "laptop", http.StatusForbidden}, // read-only
		{pullToken, "laptop", http.StatusOK},
		{opsToken, "laptop", http.StatusOK}, // a token that may change anything
		{opsToken, "app", http.StatusNotFound},
	} {
		if status, b := do(c.token, http.MethodPost, "/v1/destinations/"+c.dest+"/pull", `{"wait":"0s"}`); status != c.want {
			t.Errorf("pull %s with %s: %d %s, want %d", c.dest, c.token, status, b, c.want)
		}
	}
	// An ack of a lease nobody holds: 409 to the consumer, 403 to the others.
	if status, b := do(pullToken, http.MethodPost, "/v1/deliveries/dlv_x/ack", `{"token":"t","status":200}`); status != http.StatusConflict || !strings.Contains(b, "lease_unknown") {
		t.Errorf("ack of no lease: %d %s, want 409 lease_unknown", status, b)
	}
	if status, b := do(roToken, http.MethodPost, "/v1/deliveries/dlv_x/ack", `{"token":"t","status":200}`); status != http.StatusForbidden {
		t.Errorf("ack with the read-only token: %d %s, want 403", status, b)
	}
	// The dashboard's login refuses it.
	form := url.Values{"token": {pullToken}, "next": {"/ui/"}}
	req, _ := http.NewRequest(http.MethodPost, gw.APIURL+"/ui/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", gw.APIURL)
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
		t.Fatalf("dashboard login with the consumer's token: %d, cookies %v; want 403 and no session", resp.StatusCode, resp.Cookies())
	}
}

// wildcard is a route's {name}.
var wildcard = regexp.MustCompile(`\{[a-z]+\}`)

// Invariant 16 through a pull: a FIFO source's entity is handed out one
// delivery at a time, in order, however many a pull asks for and however
// many the listener forwards at once.
func TestPullKeepsEachFIFOEntitysOrder(t *testing.T) {
	gw := pullGateway(t, "")
	var mu sync.Mutex
	seen := map[string][]int{}
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev struct {
			Entity string `json:"entity"`
			V      int    `json:"v"`
		}
		json.NewDecoder(r.Body).Decode(&ev)
		mu.Lock()
		seen[ev.Entity] = append(seen[ev.Entity], ev.V)
		mu.Unlock()
	}))
	defer app.Close()
	const entities, versions = 10, 5
	for v := 1; v <= versions; v++ {
		for e := range entities {
			postOrdered(t, gw.URL+"/in/ordered", "e"+strconv.Itoa(e), v)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := &pull.Listener{Client: pull.NewClient(gw.APIURL, pullToken, nil), Destination: "laptop", ForwardTo: app.URL,
		Out: io.Discard, Batch: 128, Parallel: 16}
	go l.Run(ctx)
	if !testenv.WaitFor(30*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, vs := range seen {
			n += len(vs)
		}
		return n >= entities*versions
	}) {
		t.Fatalf("delivered %v", seen)
	}
	mu.Lock()
	defer mu.Unlock()
	for e, vs := range seen {
		for i, v := range vs {
			if v != i+1 {
				t.Fatalf("entity %s arrived in the order %v", e, vs)
			}
		}
	}
}

// Invariant 14 through a pull: a paused destination hands nothing out,
// and what waited is handed out once it is resumed.
func TestPausedPullDestinationHandsNothingOut(t *testing.T) {
	t.Parallel()
	gw := pullGateway(t, "")
	c := pull.NewClient(gw.APIURL, pullToken, nil)
	operate := func(action string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, gw.APIURL+"/v1/destinations/laptop/"+action, nil)
		req.Header.Set("Authorization", "Bearer "+opsToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %v %v", action, resp, err)
		}
		resp.Body.Close()
	}
	operate("pause")
	postShop(t, gw, "p1")
	postShop(t, gw, "p2")
	if ds, err := c.Pull(context.Background(), "laptop", pull.PullBody{Max: 10, Wait: "3s"}); err != nil || len(ds) != 0 {
		t.Fatalf("paused: pulled %d, %v; want nothing", len(ds), err)
	}
	operate("resume")
	if ds := pullAll(t, c, 2, 20*time.Second, pull.PullBody{Max: 10}); len(ds) != 2 || ds[0].Attempt != 1 {
		t.Fatalf("resumed: pulled %+v, want both, first attempt", ds)
	}
}

// A rate-limited pull destination hands out at its rate, however much a
// pull asks for.
func TestRateLimitedPullDestinationHandsOutAtItsRate(t *testing.T) {
	gw := pullGateway(t, "    rate: 2/s\n")
	c := pull.NewClient(gw.APIURL, pullToken, nil)
	for i := range 10 {
		postShop(t, gw, "r"+strconv.Itoa(i))
	}
	start := time.Now()
	var n int
	for time.Since(start) < 2*time.Second {
		ds, err := c.Pull(context.Background(), "laptop", pull.PullBody{Max: 100, Wait: "500ms"})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if _, err := c.Ack(context.Background(), d.ID, pull.AckBody{Token: d.Token, Status: 200}); err != nil {
				t.Fatal(err)
			}
		}
		n += len(ds)
	}
	// 2/s for about 2s, and the window's first slots: far from all 10.
	if n < 1 || n > 7 {
		t.Fatalf("%d handed out in 2s at 2/s", n)
	}
}

// listen --from-now forwards nothing that arrived before it started, and
// --type only the types it names; what it does not forward is acked, not
// left to come back.
func TestListenFromNowAndTypeForwardOnlyWhatTheyName(t *testing.T) {
	gw := pullGateway(t, "")
	var mu sync.Mutex
	var got []string
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Idempotency-Key"))
		mu.Unlock()
	}))
	defer app.Close()
	postShop(t, gw, "before")
	time.Sleep(50 * time.Millisecond)
	var out testenv.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := &pull.Listener{Client: pull.NewClient(gw.APIURL, pullToken, nil), Destination: "laptop", ForwardTo: app.URL,
		Out: &out, FromNow: true, Types: []string{"order.*"}}
	go l.Run(ctx)
	time.Sleep(100 * time.Millisecond)
	postShop(t, gw, "after") // type order.paid
	resp, err := http.Post(gw.URL+"/in/shop", "application/json", strings.NewReader(`{"id":"other","type":"user.created"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !testenv.WaitFor(20*time.Second, func() bool { return strings.Count(out.String(), " attempt ") >= 3 }) {
		t.Fatalf("listen said:\n%s", out.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != "shop:after" {
		t.Fatalf("forwarded %v, want only shop:after; listen said:\n%s", got, out.String())
	}
	if !strings.Contains(out.String(), "skipped (--from-now)") || !strings.Contains(out.String(), "skipped (--type)") {
		t.Fatalf("listen said:\n%s", out.String())
	}
	// Acked: nothing comes back.
	cancel()
	if ds, err := pull.NewClient(gw.APIURL, pullToken, nil).Pull(context.Background(), "laptop", pull.PullBody{Max: 10, Wait: "1s"}); err != nil || len(ds) != 0 {
		t.Fatalf("after listen: %d more, %v", len(ds), err)
	}
}

// A pull destination's lease follows its own timeout (a minute by
// default), not the delivery lease, which stays sized for the HTTP
// destinations (here app's 2s timeout: 32s): a consumer asking for 45s
// gets 45s, where the attempt used to be cut to fit the shorter lease.
func TestPullLeaseFollowsItsOwnTimeout(t *testing.T) {
	gw := pullGateway(t, "  - {name: app, url: http://127.0.0.1:9/, timeout: 2s}\n")
	c := pull.NewClient(gw.APIURL, pullToken, nil)
	postShop(t, gw, "ev_long")
	asked := time.Now()
	ds := pullAll(t, c, 1, 20*time.Second, pull.PullBody{Max: 1, Lease: "45s"})
	if len(ds) != 1 {
		t.Fatalf("pulled %d", len(ds))
	}
	if got := ds[0].LeaseExpiresAt.Sub(asked); got < 44*time.Second || got > 46*time.Second+20*time.Second {
		t.Fatalf("lease of %s, want the 45s asked for (the delivery lease is 32s)", got.Round(time.Second))
	}
	if _, err := c.Ack(context.Background(), ds[0].ID, pull.AckBody{Token: ds[0].Token, Status: 200}); err != nil {
		t.Fatal(err)
	}
}

// A transformation's path and query travel with a pulled delivery, and
// listen's forward puts them on its URL as an HTTP destination's POST
// puts them on the destination's.
func TestPulledDeliveryCarriesTheTransformationsPathAndQuery(t *testing.T) {
	t.Parallel()
	gw := pullGateway(t, `    transform:
      inline: 'addHandler("transform", (request) => { request.path = "/hooks/" + request.body.type; request.query = "v=2&src=shop"; return request; })'
`)
	got := make(chan string, 1)
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case got <- r.URL.RequestURI():
		default:
		}
	}))
	defer app.Close()
	postShop(t, gw, "ev_path")
	c := pull.NewClient(gw.APIURL, pullToken, nil)
	ds := pullAll(t, c, 1, 20*time.Second, pull.PullBody{Max: 1, Lease: "2s"})
	if len(ds) != 1 || ds[0].Path != "/hooks/order.paid" || ds[0].Query != "src=shop&v=2" {
		t.Fatalf("pulled %+v, want path /hooks/order.paid and query src=shop&v=2", ds)
	}
	// Unacked: its lease ends and listen takes the next attempt.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := &pull.Listener{Client: c, Destination: "laptop", ForwardTo: app.URL + "/webhooks?from=listen", Out: io.Discard}
	go l.Run(ctx)
	select {
	case uri := <-got:
		if uri != "/hooks/order.paid?src=shop&v=2" {
			t.Fatalf("the local app was sent to %s, want /hooks/order.paid?src=shop&v=2 (the script's path and query in place of --forward-to's)", uri)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("nothing forwarded")
	}
}

// A listener's journal answers only the attempt the gateway hands out
// again after its own lease ended unacked (a kill between the app's answer
// and the ack), never the delivery's later life: an ack that landed before
// the kill could write its done line leaves an outcome behind, and a
// replay of the event afterwards must reach the app (a tester found it
// acked from the journal and never forwarded).
func TestListenJournalAnswersOnlyTheAttemptItKept(t *testing.T) {
	gw := pullGateway(t, "")
	ctx := context.Background()
	c := pull.NewClient(gw.APIURL, pullToken, nil)
	var mu sync.Mutex
	got := map[string]int{}
	app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got[r.Header.Get("Idempotency-Key")]++
		mu.Unlock()
	}))
	defer app.Close()
	count := func(key string) int { mu.Lock(); defer mu.Unlock(); return got[key] }
	journal := filepath.Join(t.TempDir(), "laptop.journal")
	keep := func(ds ...pull.WireDelivery) {
		var b strings.Builder
		for _, d := range ds {
			fmt.Fprintf(&b, `{"id":%q,"attempt":%d,"ack":{"token":"","status":200,"response":"kept"}}`+"\n", d.ID, d.Attempt)
		}
		if err := os.WriteFile(journal, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	listen := func(until func() bool) {
		t.Helper()
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		l := &pull.Listener{Client: c, Destination: "laptop", ForwardTo: app.URL, Out: io.Discard, Journal: journal, Lease: 2 * time.Second}
		done := make(chan struct{})
		go func() { defer close(done); l.Run(ctx) }()
		if !testenv.WaitFor(15*time.Second, until) {
			t.Errorf("listen: the app has %v", got)
		}
		cancel()
		<-done
	}
	delivered := func(key string) func() bool {
		return func() bool {
			page, err := gw.Admin().Events(ctx, admin.EventFilter{Source: "shop", Key: key})
			return err == nil && len(page.Events) == 1 && page.Events[0].State == "delivered"
		}
	}

	// Killed before its ack: the app answered attempt 1, the journal kept
	// it, the lease ended; attempt 2 is acked from the journal, not sent.
	postShop(t, gw, "jj_kept")
	ds := pullAll(t, c, 1, 10*time.Second, pull.PullBody{Max: 1, Lease: "1s"})
	if len(ds) != 1 || ds[0].Attempt != 1 {
		t.Fatalf("pulled %+v", ds)
	}
	keep(ds[0])
	time.Sleep(1500 * time.Millisecond) // the lease ends unacked
	listen(delivered("jj_kept"))
	if n := count("shop:jj_kept"); n != 0 {
		t.Fatalf("the app got jj_kept %d times, want 0: the journal answers its next attempt", n)
	}

	// Acked, then replayed: the outcome left in the journal is stale, and
	// the replay reaches the app.
	postShop(t, gw, "jj_replayed")
	ds = pullAll(t, c, 1, 10*time.Second, pull.PullBody{Max: 1})
	if len(ds) != 1 {
		t.Fatalf("pulled %+v", ds)
	}
	if _, err := c.Ack(ctx, ds[0].ID, pull.AckBody{Token: ds[0].Token, Status: 200}); err != nil {
		t.Fatal(err)
	}
	keep(ds[0]) // its done line never written: killed right after the ack
	if !testenv.WaitFor(5*time.Second, delivered("jj_replayed")) {
		t.Fatal("the ack was not recorded")
	}
	if n, err := gw.Admin().ReplayEvents(ctx, admin.EventFilter{Source: "shop", Key: "jj_replayed"}, false); err != nil || n.Count != 1 {
		t.Fatalf("replay: %+v, %v", n, err)
	}
	listen(func() bool { return count("shop:jj_replayed") == 1 })
}
