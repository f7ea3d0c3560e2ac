package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/effect"
	"github.com/oncehook/oncehook/examples/internal/metacapi"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/oncehooktest"
)

func hotmart(id, event, transaction string) string {
	return fmt.Sprintf(`{"id":%q,"creation_date":%d,"event":%q,"version":"2.0.0","data":{"buyer":{"email":"Ana@Example.com"},"purchase":{"transaction":%q,"status":"APPROVED","price":{"value":97.0,"currency_value":"BRL"}}}}`,
		id, time.Now().UnixMilli(), event, transaction)
}

// Hotmart's purchase webhooks through a real gateway: an order approved and
// then completed, a manual resend, a second order, an unrelated event, and
// an operator's replay from the store a moment later. Meta receives one
// Purchase per order, with the order's business key as its event_id.
func TestOnePurchasePerOrder(t *testing.T) {
	capi := metacapi.New(t, 0)
	rp := &Reporter{CAPI: capi.URL, HTTP: &http.Client{Timeout: 5 * time.Second}}
	app := httptest.NewServer(rp)
	defer app.Close()
	gw := oncehooktest.Start(t, `
store: sqlite://$DIR/oncehook.db
sources:
  - {name: hotmart, preset: hotmart, secrets: [hottok-test], destinations: [capi]}
destinations:
  - {name: capi, url: `+app.URL+`, retry: {max_attempts: 5, base_delay: 10ms, max_delay: 100ms}}
`)
	rp.Ledger = effect.NewClient(gw.APIURL, gw.APIToken, nil)
	send := func(body string) {
		req, _ := http.NewRequest(http.MethodPost, gw.URL+"/in/hotmart", strings.NewReader(body))
		req.Header.Set("X-HOTMART-HOTTOK", "hottok-test")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("hotmart: %v %v", resp, err)
		}
		resp.Body.Close()
	}
	approved := hotmart("3f1c0d2e-approved", "PURCHASE_APPROVED", "HP0001")
	send(approved)
	send(hotmart("7a9b1c3d-complete", "PURCHASE_COMPLETE", "HP0001"))
	send(approved) // Hotmart's manual resend: a duplicate, answered by intake
	send(hotmart("5e6f7a8b-approved", "PURCHASE_APPROVED", "HP0002"))
	send(hotmart("9c8d7e6f-cart", "PURCHASE_OUT_OF_SHOPPING_CART", "HP0003"))
	want := map[string]int{"Purchase capi:Purchase:HP0001": 1, "Purchase capi:Purchase:HP0002": 1}
	if !testenv.WaitFor(10*time.Second, func() bool { st, _ := gw.Store().Stats(context.Background()); return st.Delivered == 4 }) {
		st, _ := gw.Store().Stats(context.Background())
		t.Fatalf("deliveries: %+v", st)
	}
	// An operator replays the approval (the dashboard's button does the
	// same): delivered again, and still one Purchase.
	before, _ := gw.Store().Stats(context.Background())
	if n, err := gw.Replay(context.Background(), "hotmart", "3f1c0d2e-approved"); err != nil || n != 1 {
		t.Fatalf("replay: %d %v", n, err)
	}
	if !testenv.WaitFor(10*time.Second, func() bool {
		st, _ := gw.Store().Stats(context.Background())
		return st.Attempts == before.Attempts+1 && st.Delivered == 4
	}) {
		st, _ := gw.Store().Stats(context.Background())
		t.Fatalf("the replay was not delivered: %+v", st)
	}
	time.Sleep(100 * time.Millisecond)
	if got := capi.Events(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Meta received %v, want %v", got, want)
	}
	rec, err := rp.Ledger.Get(context.Background(), "capi:Purchase:HP0001")
	if err != nil || rec.State != "done" || !strings.Contains(string(rec.Result), "fbtrace_id") {
		t.Fatalf("ledger record %+v %v", rec, err)
	}
}
