package receive_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook/provider"
	"github.com/oncehook/oncehook/receive"
	"github.com/oncehook/oncehook/store"
	"github.com/oncehook/oncehook/store/sqlite"
)

// downClaimer is a store that cannot commit now.
type downClaimer struct{}

func (downClaimer) Claim(context.Context, []store.NewEvent) ([]store.Claim, error) {
	return nil, fmt.Errorf("commit: %w", store.ErrUnavailable)
}

// acceptHandler serves two sources on a real SQLite store: a Stripe one
// over HTTP, and a queue's (its events come from elsewhere), keyed by the
// body's order_id.
func acceptHandler(t *testing.T) (*receive.Handler, store.Store) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "a.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	stripe, err := provider.New("stripe", provider.Options{Secrets: []string{"whsec_s"}})
	if err != nil {
		t.Fatal(err)
	}
	orders, err := provider.New("generic", provider.Options{Unsigned: true, Key: []string{"json:order_id"}, Type: []string{"json:event"}})
	if err != nil {
		t.Fatal(err)
	}
	h := receive.New(receive.Options{
		Sources: []receive.Source{
			{Name: "stripe", Preset: stripe, Window: time.Hour},
			{Name: "orders", Preset: orders, Window: time.Hour, Elsewhere: "the NATS stream ORDERS"},
		},
		Claimer: &countingClaimer{Store: st}, MaxBodySize: 1 << 10,
	})
	return h, st
}

// The core every transport shares: an envelope gets the verdict a request
// with the same bytes would, only after its commit; a duplicate is a
// verdict, not an error; what cannot be taken is a named Rejection, and
// only a store that cannot commit now is Temporary (what a consumer leaves
// for its broker to redeliver: invariant 19).
func TestAcceptIsIntakeWithoutHTTP(t *testing.T) {
	h, st := acceptHandler(t)
	ctx := context.Background()
	env := func(body string) receive.Envelope {
		return receive.Envelope{Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(body), SkipVerify: true, Client: "test"}
	}
	resp, err := h.Accept(ctx, "orders", env(`{"order_id":"o-1","event":"order.paid"}`))
	if err != nil || resp.Status != receive.StatusAccepted || resp.Events[0].Key != "o-1" {
		t.Fatalf("first: %+v %v", resp, err)
	}
	resp, err = h.Accept(ctx, "orders", env(`{"order_id":"o-1","event":"order.paid","copy":2}`))
	if err != nil || resp.Status != receive.StatusDuplicate {
		t.Fatalf("re-published copy: %+v %v", resp, err)
	}
	if s, _ := st.Stats(ctx); s.Events != 1 {
		t.Fatalf("stored %d events, want 1", s.Events)
	}

	// A queue source takes no HTTP request: its preset is unsigned.
	req := httptest.NewRequest(http.MethodPost, "/in/orders", bytes.NewReader([]byte(`{"order_id":"o-2"}`)))
	req.SetPathValue("source", "orders")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotFound {
		t.Fatalf("POST /in/orders: %d %s, want 404", rec.Code, rec.Body)
	}

	var rej *receive.Rejection
	for _, c := range []struct {
		name, source string
		env          receive.Envelope
		reason       string
	}{
		{"no key", "orders", env(`{"event":"order.paid"}`), ""}, // accepted keyless (on_missing_key: accept)
		{"not JSON", "orders", env(`order_id=o-3`), receive.ReasonMalformed},
		{"trailing bytes", "orders", env(`{"order_id":"o-4"} {"order_id":"o-5"}`), receive.ReasonMalformed},
		{"over max_body_size", "orders", env(`{"order_id":"o-9","pad":"` + strings.Repeat("x", 1<<10) + `"}`), receive.ReasonTooLarge},
		{"unknown source", "nope", env(`{"order_id":"o-6"}`), receive.ReasonUnknownSource},
		{"a signed source's body without its signature", "stripe", receive.Envelope{Body: []byte(`{"id":"evt_1","type":"x"}`)}, receive.ReasonSignature},
		{"a key given with the body", "orders", receive.Envelope{Body: []byte(`{"order_id":"o-7"}`), SkipVerify: true, Key: "k"}, ""},
	} {
		_, err := h.Accept(ctx, c.source, c.env)
		if c.reason == "" {
			if err != nil {
				t.Errorf("%s: %v, want accepted", c.name, err)
			}
			continue
		}
		if !errors.As(err, &rej) || rej.Reason != c.reason || rej.Temporary() {
			t.Errorf("%s: %v, want a permanent %s", c.name, err, c.reason)
		}
	}

	// The caller's key (the outbox's Idempotency-Key) replaces the rules.
	resp, err = h.Accept(ctx, "orders", receive.Envelope{Body: []byte(`{"order_id":"o-8"}`), SkipVerify: true, Key: "given-1"})
	if err != nil || resp.Events[0].Key != "given-1" {
		t.Fatalf("given key: %+v %v", resp, err)
	}

	// Verified as intake verifies: the same bytes, signed, are taken.
	stripe, _ := provider.New("stripe", provider.Options{Secrets: []string{"whsec_s"}})
	body := []byte(`{"id":"evt_2","type":"invoice.paid"}`)
	signed := &provider.Request{Method: http.MethodPost, Header: http.Header{}, Body: body}
	if err := stripe.Sign(signed, "whsec_s", time.Now(), ""); err != nil {
		t.Fatal(err)
	}
	if resp, err := h.Accept(ctx, "stripe", receive.Envelope{Header: signed.Header, Body: body}); err != nil || resp.Events[0].Key != "evt_2" {
		t.Fatalf("signed envelope: %+v %v", resp, err)
	}
}

// A store that cannot commit answers every envelope with a Temporary
// rejection, never a verdict: nothing is acknowledged that is not durable.
func TestAcceptWithTheStoreDownIsTemporary(t *testing.T) {
	orders, _ := provider.New("generic", provider.Options{Unsigned: true, Key: []string{"json:order_id"}})
	h := receive.New(receive.Options{
		Sources: []receive.Source{{Name: "orders", Preset: orders, Window: time.Hour, Elsewhere: "a queue"}},
		Claimer: downClaimer{},
	})
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			_, err := h.Accept(context.Background(), "orders", receive.Envelope{Body: fmt.Appendf(nil, `{"order_id":"o-%d"}`, i), SkipVerify: true})
			var rej *receive.Rejection
			if !errors.As(err, &rej) || rej.Reason != receive.ReasonUnavailable || !rej.Temporary() {
				t.Errorf("store down: %v, want a temporary %s", err, receive.ReasonUnavailable)
			}
		})
	}
	wg.Wait()
}

// A forwarded header travels with every delivery, so a value no delivery
// could carry (a line break: a queue's message can hold one, an HTTP
// request cannot) is left out, and the event is taken without it
// (invariant 23; a Content-Type is: TestAValueADeliveryCannotCarryIsLeftOutNotRefused).
func TestAForwardedHeaderNoDeliveryCanCarryIsLeftOut(t *testing.T) {
	_, st := acceptHandler(t)
	ctx := context.Background()
	// GitHub's X-GitHub-Event is forwarded with every delivery: a value
	// with a line break is left out, and the event is taken without it.
	github, _ := provider.New("github", provider.Options{Secrets: []string{"s"}})
	gh := receive.New(receive.Options{
		Sources: []receive.Source{{Name: "gh", Preset: github, Window: time.Hour, Elsewhere: "a queue"}},
		Claimer: &countingClaimer{Store: st},
	})
	resp, err := gh.Accept(ctx, "gh", receive.Envelope{Header: http.Header{
		"X-Github-Event": {"push\r\nX-Evil: 1"}, "X-Github-Delivery": {"d-1"}, "Content-Type": {"application/json"},
	}, Body: []byte(`{}`), SkipVerify: true})
	if err != nil || resp.Status != receive.StatusAccepted {
		t.Fatalf("github: %+v %v", resp, err)
	}
	list, err := st.ListEvents(ctx, store.EventQuery{Source: "gh", Key: resp.Events[0].Key, Limit: 1})
	if err != nil || len(list) != 1 {
		t.Fatalf("stored %v %v", list, err)
	}
	ev, err := st.Event(ctx, list[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := ev.Header.Values("X-Github-Event"); len(got) != 0 || ev.Header.Get("X-Github-Delivery") != "d-1" {
		t.Fatalf("forwarded %v: want X-Github-Delivery alone", ev.Header)
	}
}
