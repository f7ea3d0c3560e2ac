package effect_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook/effect"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/oncehooktest"
)

const gatewayConfig = `
store: sqlite://$DIR/oncehook.db
api:
  tokens:
    - {name: ops, token: ops-token-0123456789}
    - {name: grafana, token: ro-token-0123456789, read_only: true}
effects:
  max_lease: 10m
  max_result: 64KiB
sources:
  - {name: stripe, preset: stripe, secrets: [whsec_x]}
`

type api struct {
	t     *testing.T
	base  string
	token string
}

func (a api) call(method, path, body string) (int, map[string]any, http.Header) {
	a.t.Helper()
	req, err := http.NewRequest(method, a.base+path, strings.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		a.t.Fatalf("%s %s: %d, body %q is not a JSON object", method, path, resp.StatusCode, raw)
	}
	return resp.StatusCode, m, resp.Header
}

func startGateway(t *testing.T) (*oncehooktest.Gateway, api) {
	gw := oncehooktest.Start(t, gatewayConfig)
	return gw, api{t: t, base: gw.APIURL, token: "ops-token-0123456789"}
}

// The HTTP API as the issue specifies it, answer by answer.
func TestHTTPClaimCompleteReplay(t *testing.T) {
	_, a := startGateway(t)
	key := "/v1/effects/" + url.PathEscape("pix-reminder:HP123:24h")
	status, m, _ := a.call("POST", key+"/claim", `{"lease":"30s","fingerprint":"f1"}`)
	if status != 201 || m["state"] != "pending" || m["token"] == "" || m["attempt"] != 1.0 || m["reclaimed"] != false || m["lease_expires_at"] == nil {
		t.Fatalf("claim: %d %v", status, m)
	}
	token := m["token"].(string)
	status, m, h := a.call("POST", key+"/claim", `{"lease":"30s","fingerprint":"f1"}`)
	if status != 409 || m["state"] != "pending" || m["retry_after"] == nil || h.Get("Retry-After") == "" {
		t.Fatalf("claim while held: %d %v %v", status, m, h)
	}
	if _, ok := m["token"]; ok {
		t.Fatal("a busy answer showed the owner's token")
	}
	status, m, _ = a.call("POST", key+"/claim", `{"fingerprint":"f2"}`)
	if status != 422 || m["fingerprint"] != "f1" || m["state"] != "pending" || m["attempt"] != 1.0 {
		t.Fatalf("another fingerprint: %d %v, want 422 with the existing record", status, m)
	}
	if status, m, _ := a.call("POST", key+"/complete", `{"token":"someone-else","result":{}}`); status != 409 || m["reason"] != "stale_token" {
		t.Fatalf("complete with another token: %d %v", status, m)
	}
	result := `{"message_id":"wamid.HBg1","status":"sent"}`
	if status, m, _ := a.call("POST", key+"/complete", `{"token":"`+token+`","result":`+result+`}`); status != 200 || m["state"] != "done" {
		t.Fatalf("complete: %d %v", status, m)
	}
	if status, _, _ := a.call("POST", key+"/complete", `{"token":"`+token+`","result":`+result+`}`); status != 200 {
		t.Fatalf("completing twice with the same token: %d", status)
	}
	// A later claim gets the stored result, byte for byte.
	req, _ := http.NewRequest("POST", a.base+key+"/claim", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+a.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(raw, []byte(`"result":`+result)) || !bytes.Contains(raw, []byte(`"already_done":true`)) || !bytes.Contains(raw, []byte(`"replayed":true`)) {
		t.Fatalf("claim after done: %d %s", resp.StatusCode, raw)
	}
	status, m, _ = a.call("GET", key, "")
	attempts, _ := m["attempts"].([]any)
	if status != 200 || m["state"] != "done" || len(attempts) != 1 || m["token"] != nil {
		t.Fatalf("get: %d %v", status, m)
	}
}

func TestHTTPReleaseFailDeadline(t *testing.T) {
	_, a := startGateway(t)
	_, m, _ := a.call("POST", "/v1/effects/k1/claim", `{"lease":"1m"}`)
	first := m["token"].(string)
	if status, m, _ := a.call("POST", "/v1/effects/k1/release", `{"token":"`+first+`","error":"provider timeout"}`); status != 200 || m["state"] != "pending" {
		t.Fatalf("release: %d %v", status, m)
	}
	status, m, _ := a.call("POST", "/v1/effects/k1/claim", `{"lease":"1m"}`)
	if status != 201 || m["attempt"] != 2.0 || m["reclaimed"] != false {
		t.Fatalf("claim after release: %d %v, want attempt 2", status, m)
	}
	second := m["token"].(string)
	if status, m, _ := a.call("POST", "/v1/effects/k1/renew", `{"token":"`+second+`","lease":"5m"}`); status != 200 || m["lease_expires_at"] == nil {
		t.Fatalf("renew: %d %v", status, m)
	}
	if status, _, _ := a.call("POST", "/v1/effects/k1/renew", `{"token":"`+first+`","lease":"5m"}`); status != 409 {
		t.Fatalf("renew with a released token: %d", status)
	}
	if status, _, _ := a.call("POST", "/v1/effects/k1/fail", `{"token":"`+second+`","error":"invalid phone"}`); status != 200 {
		t.Fatal(status)
	}
	if status, m, _ := a.call("POST", "/v1/effects/k1/claim", `{}`); status != 409 || m["state"] != "failed" || m["error"] != "invalid phone" {
		t.Fatalf("claim after fail: %d %v", status, m)
	}
	past := time.Now().Add(-time.Minute).Format(time.RFC3339)
	if status, m, _ := a.call("POST", "/v1/effects/capi:Purchase:o1/claim", `{"deadline":"`+past+`"}`); status != 410 || m["state"] != "expired" {
		t.Fatalf("claim past its deadline: %d %v", status, m)
	}
}

// Bad input gets a clear 400 and changes nothing; the API needs a token,
// and a read-only token may not change anything.
func TestHTTPBadInputAndTokens(t *testing.T) {
	gw, a := startGateway(t)
	long := strings.Repeat("k", effect.MaxKeyLen+1)
	cases := []struct{ path, body, field string }{
		{"/v1/effects/" + long + "/claim", `{}`, "key"},
		{"/v1/effects/k/claim", `{"lease":"0s"}`, "lease"},
		{"/v1/effects/k/claim", `{"lease":"11m"}`, "lease"},
		{"/v1/effects/k/claim", `{"lease":"soon"}`, ""},
		{"/v1/effects/k/claim", `{"lease":`, ""},
		{"/v1/effects/k/claim", `{"leese":"1s"}`, ""},
		{"/v1/effects/k/complete", `{"token":"","result":1}`, "token"},
		{"/v1/effects/k/complete", `{"token":"t","result":{"big":"` + strings.Repeat("x", 70<<10) + `"}}`, ""},
		{"/v1/effects/" + url.PathEscape("a\x01b") + "/claim", `{}`, "key"},
		// Found from outside: each of these named no field, or answered 500
		// on PostgreSQL, or let an invisible character into a key.
		{"/v1/effects/k/claim", `{"lease":"abc"}`, "lease"},
		{"/v1/effects/k/claim", `{"lease":1e300}`, "lease"},
		{"/v1/effects/k/claim", `{"lease":"99999d"}`, "lease"},
		{"/v1/effects/k/claim", `{"deadline":"tomorrow"}`, "deadline"},
		{"/v1/effects/k/claim", `{"fingerprint":5}`, "fingerprint"},
		{"/v1/effects/k/claim", `{"fingerprint":"a\u0000b"}`, "fingerprint"},
		{"/v1/effects/k/fail", `{"token":"t","error":"a\u0000b"}`, "error"},
		{"/v1/effects/k/release", `{"token":"t","error":"a\u0000b"}`, "error"},
		{"/v1/effects/k/claim", `{"leese":"1s"}`, "leese"},
		{"/v1/effects/" + url.PathEscape("a\u0085b") + "/claim", `{}`, "key"},
		{"/v1/effects/" + url.PathEscape("pay\u202egnp") + "/claim", `{}`, "key"},
		{"/v1/effects/" + url.PathEscape("a\u200bb") + "/claim", `{}`, "key"},
	}
	for _, c := range cases {
		status, m, _ := a.call("POST", c.path, c.body)
		if status != 400 && status != 413 {
			t.Errorf("POST %.60s %.40s: %d %v, want 400", c.path, c.body, status, m)
		}
		if msg, _ := m["error"].(string); strings.Contains(msg, "parsing time") || strings.Contains(msg, "want more than 0") && strings.Contains(c.body, "e300") {
			t.Errorf("POST %.60s %.40s: %q is Go's words or the wrong ones", c.path, c.body, msg)
		}
		if c.field != "" && m["field"] != c.field {
			t.Errorf("POST %.60s: field %v, want %s", c.path, m["field"], c.field)
		}
	}
	if st, _ := gw.Store().Stats(context.Background()); len(st.Effects) != 0 {
		t.Fatalf("bad input left records: %v", st.Effects)
	}
	if status, m, h := (api{t: t, base: a.base}).call("POST", "/v1/effects/k/claim", `{}`); status != 401 || m["reason"] != "unauthorized" || h.Get("WWW-Authenticate") == "" {
		t.Fatalf("no token: %d %v", status, m)
	}
	if status, _, _ := (api{t: t, base: a.base, token: "ops-token-0123456788"}).call("GET", "/v1/effects/k", ""); status != 401 {
		t.Fatalf("a wrong token: %d", status)
	}
	ro := api{t: t, base: a.base, token: "ro-token-0123456789"}
	if status, m, _ := ro.call("POST", "/v1/effects/k/claim", `{}`); status != 403 || m["reason"] != "read_only" {
		t.Fatalf("a read-only token claiming: %d %v", status, m)
	}
	if status, _, _ := ro.call("GET", "/v1/effects?state=pending", ""); status != 200 {
		t.Fatalf("a read-only token listing: %d", status)
	}
	if status, _, _ := a.call("GET", "/v1/effects?state=lost", ""); status != 400 {
		t.Fatalf("a bad filter: %d", status)
	}
	// A misspelt filter is refused, as /v1/events refuses it, instead of
	// listing every record.
	for _, path := range []string{"/v1/effects?stat=pending", "/v1/effects/k?x=1"} {
		if status, m, _ := a.call("GET", path, ""); status != 400 || m["field"] == nil {
			t.Errorf("GET %s: %d %v, want 400 naming the parameter", path, status, m)
		}
	}
	// A lease in days, as the config writes it, and in plain seconds.
	if status, m, _ := a.call("POST", "/v1/effects/days/claim", `{"lease":"0d5m"}`); status != 201 {
		t.Errorf("a lease of 0d5m: %d %v", status, m)
	}
	if status, m, _ := a.call("POST", "/v1/effects/secs/claim", `{"lease":5}`); status != 201 {
		t.Errorf("a lease of 5 (seconds): %d %v", status, m)
	}
}

// Every error answer of the effects API has docs/api.md's one shape: a
// message in "error" and a code in "reason" (busy, failed, expired and a
// fingerprint mismatch included), whatever else it carries.
func TestHTTPErrorsHaveOneShape(t *testing.T) {
	_, a := startGateway(t)
	a.call("POST", "/v1/effects/busy/claim", `{"fingerprint":"f1"}`)
	status, m, _ := a.call("POST", "/v1/effects/busy/claim", `{"fingerprint":"f1"}`)
	check := func(what string, status, want int, m map[string]any, reason string) {
		t.Helper()
		if status != want || m["reason"] != reason {
			t.Errorf("%s: %d %v, want %d %s", what, status, m, want, reason)
		}
		if msg, _ := m["error"].(string); msg == "" {
			t.Errorf("%s: %v has no error message", what, m)
		}
		if _, ok := m["detail"]; ok {
			t.Errorf("%s: %v says detail, not error", what, m)
		}
	}
	check("busy", status, 409, m, "busy")
	status, m, _ = a.call("POST", "/v1/effects/busy/claim", `{"fingerprint":"f2"}`)
	check("another fingerprint", status, 422, m, "fingerprint_mismatch")
	if m["key"] != "busy" {
		t.Errorf("the 422 lost the record: %v", m)
	}
	_, c, _ := a.call("POST", "/v1/effects/failed/claim", `{}`)
	a.call("POST", "/v1/effects/failed/fail", `{"token":"`+c["token"].(string)+`","error":"card declined"}`)
	status, m, _ = a.call("POST", "/v1/effects/failed/claim", `{}`)
	check("failed", status, 409, m, "failed")
	status, m, _ = a.call("POST", "/v1/effects/late/claim", `{"deadline":"`+time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)+`"}`)
	check("expired", status, 410, m, "expired")
}

// Invariant 9 over HTTP: 100 concurrent claimers, one owner; once done,
// every later claimer gets the owner's result, byte for byte.
func TestHTTPOneOwnerAmongHundredClaimers(t *testing.T) {
	gw, _ := startGateway(t)
	transport := &http.Transport{MaxIdleConnsPerHost: 100}
	defer transport.CloseIdleConnections() // connections dialed and never used would hold the gateway's shutdown
	client := effect.NewClient(gw.APIURL, "ops-token-0123456789", &http.Client{Transport: transport})
	var mu sync.Mutex
	owners, busy := 0, 0
	var token string
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			c, err := client.Claim(context.Background(), "llm-summary:evt_1", effect.ClaimOptions{Lease: time.Minute})
			mu.Lock()
			defer mu.Unlock()
			var b *effect.BusyError
			switch {
			case err == nil && !c.AlreadyDone:
				owners++
				token = c.Token
			case errors.As(err, &b) && !b.RetryAfter.IsZero():
				busy++
			default:
				t.Errorf("claim: %+v %v", c, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if owners != 1 || busy != 99 {
		t.Fatalf("%d owners, %d busy: want 1 and 99", owners, busy)
	}
	result := json.RawMessage(`{"summary": "two  spaces"}`)
	if err := client.Complete(context.Background(), "llm-summary:evt_1", token, result); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		c, err := client.Claim(context.Background(), "llm-summary:evt_1", effect.ClaimOptions{})
		if err != nil || !c.AlreadyDone || string(c.Result) != string(result) {
			t.Fatalf("after done: %+v %v", c, err)
		}
	}
}

// Do runs the work once, however many callers ask at once, over HTTP and
// in process alike; a permanent error fails the key, a transient one
// releases it for the next caller.
func TestDoRunsTheWorkOnce(t *testing.T) {
	gw, _ := startGateway(t)
	transport := &http.Transport{}
	defer transport.CloseIdleConnections()
	ledgers := map[string]effect.Ledger{
		"in process": gw.Effects(),
		"over HTTP":  effect.NewClient(gw.APIURL, "ops-token-0123456789", &http.Client{Transport: transport}),
	}
	for name, l := range ledgers {
		t.Run(name, func(t *testing.T) {
			key := "send:" + name
			var mu sync.Mutex
			runs, replays := 0, 0
			var wg sync.WaitGroup
			for range 20 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						res, alreadyDone, err := effect.Do(context.Background(), l, key, effect.ClaimOptions{Lease: 5 * time.Second},
							func(ctx context.Context, c effect.Claim) (json.RawMessage, error) {
								mu.Lock()
								runs++
								mu.Unlock()
								time.Sleep(20 * time.Millisecond)
								return json.RawMessage(`{"sent":1}`), nil
							})
						var busy *effect.BusyError
						if errors.As(err, &busy) {
							time.Sleep(10 * time.Millisecond)
							continue
						}
						if err != nil || string(res) != `{"sent":1}` {
							t.Errorf("Do: %s %v", res, err)
						}
						if alreadyDone {
							mu.Lock()
							replays++
							mu.Unlock()
						}
						return
					}
				}()
			}
			wg.Wait()
			if runs != 1 || replays != 19 {
				t.Fatalf("the work ran %d times, %d callers got it replayed: want 1 and 19", runs, replays)
			}
			_, _, err := effect.Do(context.Background(), l, key+":bad", effect.ClaimOptions{}, func(context.Context, effect.Claim) (json.RawMessage, error) {
				return nil, effect.Permanent(errors.New("invalid phone number"))
			})
			var failed *effect.FailedError
			if _, _, err2 := effect.Do(context.Background(), l, key+":bad", effect.ClaimOptions{}, nil); err == nil || !errors.As(err2, &failed) {
				t.Fatalf("after a permanent error: %v, then %v; want the key failed for good", err, err2)
			}
			calls := 0
			for range 2 {
				effect.Do(context.Background(), l, key+":flaky", effect.ClaimOptions{}, func(_ context.Context, c effect.Claim) (json.RawMessage, error) {
					calls++
					if c.Attempt == 1 {
						return nil, errors.New("timeout")
					}
					return json.RawMessage(`2`), nil
				})
			}
			rec, err := l.Get(context.Background(), key+":flaky")
			if err != nil || calls != 2 || rec.State != "done" || rec.Attempt != 2 || len(rec.Attempts) != 2 || rec.Attempts[0].Outcome != "released" {
				t.Fatalf("after a transient error and a retry: %d calls, %+v %v", calls, rec, err)
			}
		})
	}
}

// The reconciliation list: pending effects whose owners stopped halfway
// (their leases expired), page by page.
func TestHTTPReconciliationList(t *testing.T) {
	gw, a := startGateway(t)
	for i := range 5 {
		if _, err := gw.Effects().Claim(context.Background(), fmt.Sprintf("half-%d", i), effect.ClaimOptions{Lease: 50 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := gw.Effects().Claim(context.Background(), "held", effect.ClaimOptions{Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	var keys []string
	cursor := ""
	for page := 0; page < 10; page++ {
		// stale is lease_expired's old name: page through with either.
		param := []string{"lease_expired", "stale"}[page%2]
		status, m, _ := a.call("GET", "/v1/effects?state=pending&"+param+"=true&limit=2&cursor="+url.QueryEscape(cursor), "")
		if status != 200 {
			t.Fatalf("list: %d %v", status, m)
		}
		for _, e := range m["effects"].([]any) {
			rec := e.(map[string]any)
			if rec["lease_expired"] != true || rec["stale"] != true {
				t.Errorf("listed as lease expired (and, by its old name, stale): %v", rec)
			}
			keys = append(keys, rec["key"].(string))
		}
		next, ok := m["next_cursor"].(string)
		if !ok {
			break
		}
		cursor = next
	}
	if fmt.Sprint(keys) != "[half-0 half-1 half-2 half-3 half-4]" {
		t.Fatalf("stale effects %v", keys)
	}
}

// The one reset over HTTP is the admin API's, audited in the reset's own
// transaction under the token's name; effect.Client reaches it. (The
// effects handler had a second, unaudited one, shadowed in the gateway.)
func TestHTTPResetIsAuditedOnce(t *testing.T) {
	gw, a := startGateway(t)
	_, c, _ := a.call("POST", "/v1/effects/pix:9/claim", `{}`)
	a.call("POST", "/v1/effects/pix:9/fail", `{"token":"`+c["token"].(string)+`","error":"no"}`)
	client := effect.NewClient(gw.APIURL, "ops-token-0123456789", nil)
	if err := client.Reset(context.Background(), "pix:9"); err != nil {
		t.Fatal(err)
	}
	if err := client.Reset(context.Background(), "pix:9"); !errors.Is(err, effect.ErrConflict) {
		t.Fatalf("a second reset: %v, want a conflict", err)
	}
	log, err := gw.Admin().Audit(context.Background(), "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(log.Entries) != 1 || log.Entries[0].Action != "effect_reset" || log.Entries[0].Actor != "token:ops" || log.Entries[0].Count != 1 {
		t.Fatalf("audit %+v, want one effect_reset by token:ops, count 1", log.Entries)
	}
}

// Do never hands work that ran to the next claimer: a result the ledger
// refuses (over effects.max_result, or not JSON) fails the key for good,
// saying why, where it was left pending, so that each caller after the
// lease ran the work again; and a reason the ledger would refuse (cut
// inside a character, or holding a NUL) is made one it takes.
func TestDoNeverRunsTheWorkAgainWhenTheLedgerRefusesItsOutcome(t *testing.T) {
	gw, _ := startGateway(t)
	ledgers := map[string]effect.Ledger{
		"in process": gw.Effects(),
		"over HTTP":  effect.NewClient(gw.APIURL, "ops-token-0123456789", nil),
	}
	huge := json.RawMessage(`"` + strings.Repeat("x", 70<<10) + `"`) // the gateway keeps at most 64 KiB
	for name, l := range ledgers {
		t.Run(name, func(t *testing.T) {
			cases := map[string]func() (json.RawMessage, error){
				"a result over max_result":  func() (json.RawMessage, error) { return huge, nil },
				"a result that is not JSON": func() (json.RawMessage, error) { return json.RawMessage(`{"sent":`), nil },
				"a long reason cut inside a character": func() (json.RawMessage, error) {
					return nil, effect.Permanent(errors.New("a" + strings.Repeat("é", 3000)))
				},
				"a reason with a NUL": func() (json.RawMessage, error) { return nil, effect.Permanent(errors.New("bad\x00byte")) },
			}
			for what, work := range cases {
				key := "refused:" + name + ":" + what
				runs := 0
				fn := func(context.Context, effect.Claim) (json.RawMessage, error) { runs++; return work() }
				_, _, err := effect.Do(context.Background(), l, key, effect.ClaimOptions{Lease: time.Second}, fn)
				if err == nil || strings.Contains(err.Error(), "effect: result: effect: result") {
					t.Errorf("%s: Do answered %.200v; want an error that says it once", what, err)
				}
				time.Sleep(1100 * time.Millisecond) // the first owner's lease would have run out
				_, _, err = effect.Do(context.Background(), l, key, effect.ClaimOptions{Lease: time.Second}, fn)
				var failed *effect.FailedError
				if runs != 1 || !errors.As(err, &failed) {
					t.Errorf("%s: the work ran %d times, and a later Do answered %.200v; want once, and the key failed for good", what, runs, err)
				}
			}
		})
	}
}

// Do keeps a result across a ledger out of reach for a moment (a gateway
// restarting as the work ends): it completes once the ledger answers, while
// the lease lasts, instead of leaving the key to be done again.
func TestDoKeepsAResultWhenTheLedgerIsOutOfReachForAMoment(t *testing.T) {
	gw, _ := startGateway(t)
	target, _ := url.Parse(gw.APIURL)
	// The first three completes' connections break before the gateway
	// sees them.
	front, cuts := testenv.CutFirst(t, httputil.NewSingleHostReverseProxy(target), "/complete", 3)
	l := effect.NewClient(front.URL, "ops-token-0123456789", nil)
	runs := 0
	res, _, err := effect.Do(context.Background(), l, "blip:1", effect.ClaimOptions{Lease: 5 * time.Second},
		func(context.Context, effect.Claim) (json.RawMessage, error) {
			runs++
			return json.RawMessage(`{"sent":1}`), nil
		})
	if err != nil || string(res) != `{"sent":1}` || cuts() != 3 {
		t.Fatalf("Do across 3 broken connections: %s %v (%d cut); want the result", res, err, cuts())
	}
	rec, err := gw.Effects().Get(context.Background(), "blip:1")
	if err != nil || rec.State != "done" || string(rec.Result) != `{"sent":1}` || runs != 1 {
		t.Fatalf("the record: %+v %v, %d runs; want done with the result, once", rec, err, runs)
	}
}

// "." and ".." are keys like any other over HTTP too: the client escapes
// them, where the gateway cleaned them away and answered another route
// (a claim of "." was "no such key").
func TestHTTPDotKeys(t *testing.T) {
	gw, _ := startGateway(t)
	l := effect.NewClient(gw.APIURL, "ops-token-0123456789", nil)
	ctx := context.Background()
	for _, key := range []string{".", "..", "..."} {
		c, err := l.Claim(ctx, key, effect.ClaimOptions{})
		if err != nil {
			t.Fatalf("claim %q: %v", key, err)
		}
		if err := l.Complete(ctx, key, c.Token, json.RawMessage(`{"k":1}`)); err != nil {
			t.Fatalf("complete %q: %v", key, err)
		}
		if rec, err := gw.Effects().Get(ctx, key); err != nil || rec.State != "done" {
			t.Fatalf("the record of %q: %+v %v", key, rec, err)
		}
	}
}

// The HTTP client takes what the in-process ledger takes: a renewal by 0
// is by the default lease (it was a 400 over HTTP), a refusal names its
// field once, and Do with a lease of a few nanoseconds runs (its renewal
// ticker panicked, taking the process down).
func TestHTTPClientTakesWhatTheLocalLedgerTakes(t *testing.T) {
	gw, _ := startGateway(t)
	ledgers := map[string]effect.Ledger{
		"in process": gw.Effects(),
		"over HTTP":  effect.NewClient(gw.APIURL, "ops-token-0123456789", nil),
	}
	ctx := context.Background()
	for name, l := range ledgers {
		c, err := l.Claim(ctx, "renew0:"+name, effect.ClaimOptions{Lease: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		until, err := l.Renew(ctx, "renew0:"+name, c.Token, 0)
		if left := time.Until(until); err != nil || left < 25*time.Second || left > 31*time.Second {
			t.Errorf("%s: Renew(0): %v left, %v; want the default lease", name, left, err)
		}
		_, err = l.Renew(ctx, "renew0:"+name, c.Token, -time.Second)
		var invalid *effect.InvalidError
		if !errors.As(err, &invalid) || invalid.Field != "lease" || strings.Count(err.Error(), "lease") != 1 {
			t.Errorf("%s: Renew(-1s): %v; want an InvalidError that names lease once", name, err)
		}
		res, _, err := effect.Do(ctx, l, "tiny:"+name, effect.ClaimOptions{Lease: 2}, func(context.Context, effect.Claim) (json.RawMessage, error) {
			time.Sleep(5 * time.Millisecond)
			return json.RawMessage(`1`), nil
		})
		if err != nil || string(res) != "1" {
			t.Errorf("%s: Do with a 2ns lease: %s %v", name, res, err)
		}
	}
}

// A result as large as effects.max_result may be (16 MiB) comes back over
// HTTP whole: the client read 16 MiB of the answer, which holds the result
// and more, and took the cut answer as a claim done with an empty result.
func TestHTTPLargestResultComesBackWhole(t *testing.T) {
	testenv.SlowUnderRace(t) // 16 MiB through JSON both ways: 25 s under -race
	gw := oncehooktest.Start(t, strings.Replace(gatewayConfig, "max_result: 64KiB", "max_result: 16MiB", 1))
	l := effect.NewClient(gw.APIURL, "ops-token-0123456789", nil)
	ctx := context.Background()
	result := json.RawMessage(`"` + strings.Repeat("x", 16<<20-2) + `"`)
	c, err := l.Claim(ctx, "huge", effect.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Complete(ctx, "huge", c.Token, result); err != nil {
		t.Fatal(err)
	}
	again, err := l.Claim(ctx, "huge", effect.ClaimOptions{})
	if err != nil || !again.AlreadyDone || !bytes.Equal(again.Result, result) {
		t.Fatalf("claim of a done key with a 16 MiB result: done %v, %d bytes, %v; want the result whole", again.AlreadyDone, len(again.Result), err)
	}
	rec, err := l.Get(ctx, "huge")
	if err != nil || len(rec.Result) != len(result) {
		t.Fatalf("its record: %d bytes, %v; want the result whole", len(rec.Result), err)
	}
}

// A ledger gone for good as the work ends (a gateway shut down) holds Do
// for a bounded time, not for the rest of a long lease.
func TestDoGivesUpRecordingWhenTheLedgerIsGone(t *testing.T) {
	defer effect.SetRecordFor(time.Second)()
	gw, _ := startGateway(t)
	target, _ := url.Parse(gw.APIURL)
	front := httptest.NewServer(httputil.NewSingleHostReverseProxy(target))
	l := effect.NewClient(front.URL, "ops-token-0123456789", nil)
	start := time.Now()
	_, _, err := effect.Do(context.Background(), l, "gone:1", effect.ClaimOptions{Lease: 10 * time.Minute},
		func(context.Context, effect.Claim) (json.RawMessage, error) {
			front.CloseClientConnections()
			front.Close()
			return json.RawMessage(`1`), nil
		})
	if took := time.Since(start); err == nil || took > 5*time.Second {
		t.Fatalf("Do with its ledger gone: %v after %s; want an error within the bound", err, took)
	}
}

// A record's result reads over HTTP as it was stored, byte for byte, in
// the record and in the reconciliation list, as a claim gives it back: an
// encoder compacted it there.
func TestHTTPRecordKeepsTheResultsBytes(t *testing.T) {
	gw, a := startGateway(t)
	l := effect.NewClient(gw.APIURL, "ops-token-0123456789", nil)
	ctx := context.Background()
	result := json.RawMessage(`{"a" :	[1, 2.50e0], "html": "<b>&</b>"}`)
	c, err := l.Claim(ctx, "raw:1", effect.ClaimOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Complete(ctx, "raw:1", c.Token, result); err != nil {
		t.Fatal(err)
	}
	rec, err := l.Get(ctx, "raw:1")
	if err != nil || string(rec.Result) != string(result) || rec.State != "done" || len(rec.Attempts) != 1 {
		t.Fatalf("Get over HTTP: %+v (result %s), %v; want the result as stored", rec, rec.Result, err)
	}
	status, page, _ := a.call("GET", "/v1/effects?state=done&limit=1", "")
	req, _ := http.NewRequest("GET", gw.APIURL+"/v1/effects?state=done&limit=1", nil)
	req.Header.Set("Authorization", "Bearer ops-token-0123456789")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var list struct {
		Effects    []struct{ Result json.RawMessage } `json:"effects"`
		NextCursor string                             `json:"next_cursor"`
	}
	if err := json.Unmarshal(raw, &list); status != 200 || err != nil || len(list.Effects) != 1 ||
		string(list.Effects[0].Result) != string(result) || list.NextCursor != "raw:1" || page["next_cursor"] != "raw:1" {
		t.Fatalf("the list: %d %s %v; want the result as stored and the cursor", status, raw, err)
	}
}
