package receive_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/seen"
	"github.com/oncehook/oncehook/provider"
	"github.com/oncehook/oncehook/receive"
	"github.com/oncehook/oncehook/store"
	"github.com/oncehook/oncehook/store/sqlite"
)

// countingClaimer claims in a real SQLite store and counts the trips.
type countingClaimer struct {
	store.Store
	calls atomic.Int64
}

func (c *countingClaimer) Claim(ctx context.Context, evs []store.NewEvent) ([]store.Claim, error) {
	c.calls.Add(1)
	return store.ClaimEvents(ctx, c.Store, evs)
}

func newHandler(t *testing.T, hot *seen.Set) (*receive.Handler, *countingClaimer) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "r.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p, err := provider.New("github", provider.Options{Secrets: []string{"s"}})
	if err != nil {
		t.Fatal(err)
	}
	claimer := &countingClaimer{Store: st}
	h := receive.New(receive.Options{
		Sources: []receive.Source{{Name: "gh", Preset: p, Window: time.Hour}},
		Claimer: claimer, Seen: hot,
	})
	return h, claimer
}

func post(t *testing.T, h http.Handler, delivery string) receive.Response {
	t.Helper()
	body := []byte(`{"action":"opened"}`)
	p, _ := provider.New("github", provider.Options{Secrets: []string{"s"}})
	req := httptest.NewRequest(http.MethodPost, "/in/gh", bytes.NewReader(body))
	req.SetPathValue("source", "gh")
	provider.SignHTTP(p, req, body, "s", time.Now(), delivery)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	var resp receive.Response
	if err := json.Unmarshal(rec.Body.Bytes(), &resp); err != nil {
		t.Fatal(err)
	}
	return resp
}

// Once a key is committed, its duplicates are answered from the hot set
// without a trip to the store; without the set, the store answers them.
func TestDuplicatesOfCommittedKeysSkipTheStore(t *testing.T) {
	for _, withSet := range []bool{true, false} {
		var hot *seen.Set
		if withSet {
			hot = seen.New(1000)
		}
		h, claimer := newHandler(t, hot)
		if r := post(t, h, "d-1"); r.Status != receive.StatusAccepted {
			t.Fatalf("first: %+v", r)
		}
		for range 5 {
			if r := post(t, h, "d-1"); r.Status != receive.StatusDuplicate || r.Events[0].Status != receive.StatusDuplicate {
				t.Fatalf("repeat: %+v", r)
			}
		}
		want := int64(1)
		if !withSet {
			want = 6
		}
		if got := claimer.calls.Load(); got != want {
			t.Errorf("with hot set %v: %d trips to the store, want %d", withSet, got, want)
		}
		if st, _ := claimer.Stats(context.Background()); st.Events != 1 {
			t.Errorf("stored %d events", st.Events)
		}
	}
}

// A WhatsApp POST can carry an update without an id (account_update)
// beside messages that have one. On a source that rejects events without
// a key, the batch is refused whole, and Meta retries it, messages and all:
// the answer says which event has no key and that the batch went with it,
// where it said only "no event key found in the request".
func TestARejectedKeylessEventOfABatchIsNamed(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "r.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p, err := provider.New("whatsapp", provider.Options{Secrets: []string{"s"}})
	if err != nil {
		t.Fatal(err)
	}
	claimer := &countingClaimer{Store: st}
	h := receive.New(receive.Options{
		Sources: []receive.Source{{Name: "wa", Preset: p, Window: time.Hour, RejectMissingKey: true}},
		Claimer: claimer,
	})
	body := []byte(`{"object":"whatsapp_business_account","entry":[{"id":"WABA","changes":[` +
		`{"field":"messages","value":{"metadata":{"phone_number_id":"P1"},"messages":[{"from":"551","id":"wamid.1","type":"text"}]}},` +
		`{"field":"account_update","value":{"event":"VERIFIED_ACCOUNT"}}]}]}`)
	req := httptest.NewRequest(http.MethodPost, "/in/wa", bytes.NewReader(body))
	req.SetPathValue("source", "wa")
	provider.SignHTTP(p, req, body, "s", time.Now(), "")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var got receive.ErrorResponse
	json.Unmarshal(rec.Body.Bytes(), &got)
	if rec.Code != http.StatusUnprocessableEntity || got.Reason != receive.ReasonMissingKey ||
		!strings.Contains(got.Error, "event 2 of the batch's 2 (account_update) has no key") || !strings.Contains(got.Error, "the whole batch is refused") {
		t.Fatalf("got %d %+v, want 422 missing_key naming event 2 (account_update) and the batch refused with it", rec.Code, got)
	}
	if n := claimer.calls.Load(); n != 0 {
		t.Fatalf("%d claims: a refused batch stores nothing", n)
	}
}
