package receive_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/route"
	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/provider"
	"github.com/oncehook/oncehook/receive"
	"github.com/oncehook/oncehook/store"
	"github.com/oncehook/oncehook/store/postgres"
	"github.com/oncehook/oncehook/store/sqlite"
)

// onEachBackend runs test on a fresh SQLite store and a fresh PostgreSQL
// schema: what one keeps, the other must.
func onEachBackend(t *testing.T, test func(t *testing.T, st store.Store)) {
	t.Run("sqlite", func(t *testing.T) {
		st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "a.db"), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		test(t, st)
	})
	t.Run("postgres", func(t *testing.T) {
		st, err := postgres.Open(context.Background(), testenv.Postgres(t), postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		test(t, st)
	})
}

// queueHandler serves one queue source on st, keyed by the body's
// order_id, delivering to "app"; order, when set, orders it by the
// body's entity and version.
func queueHandler(t *testing.T, st store.Store, order *receive.Order) *receive.Handler {
	t.Helper()
	orders, err := provider.New("generic", provider.Options{Unsigned: true, Key: []string{"json:order_id"}})
	if err != nil {
		t.Fatal(err)
	}
	return receive.New(receive.Options{
		Sources: []receive.Source{{Name: "orders", Preset: orders, Window: time.Hour, Routes: route.To("app"),
			Order: order, Elsewhere: "a queue"}},
		Claimer: &countingClaimer{Store: st}, MaxBodySize: 2 << 20,
	})
}

// leaseAll leases every delivery due now.
func leaseAll(t *testing.T, st store.Store) map[string]store.LeasedDelivery {
	t.Helper()
	leased, err := store.LeaseDeliveries(context.Background(), st, time.Now().Add(time.Second), time.Minute, 1000)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]store.LeasedDelivery{}
	for _, d := range leased {
		out[d.Key] = d
	}
	return out
}

// Invariant 23: a Content-Type or a trace parent is stored and sent back
// out with every delivery, and one that no store or destination would
// take (a line break, a NUL, a control byte, bytes that are not UTF-8,
// over 256 bytes; a queue's message or an outbox publish can hold them,
// an HTTP request mostly cannot) is left out: the event is taken, stored
// with the content type a message without one gets, and no trace.
// Before, such a Content-Type was refused as malformed (400, a queue's
// message terminated or dead-lettered), and such a trace parent from
// NATS or Kafka was stored as it came, which PostgreSQL refused
// (store_rejected: 500, terminated).
func TestAValueADeliveryCannotCarryIsLeftOutNotRefused(t *testing.T) {
	const trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	onEachBackend(t, func(t *testing.T, st store.Store) {
		h := queueHandler(t, st, nil)
		ctx := context.Background()
		take := func(key, contentType, tp string) {
			t.Helper()
			body := `{"order_id":"` + key + `"}`
			resp, err := h.Accept(ctx, "orders", receive.Envelope{
				Header: http.Header{"Content-Type": {contentType}}, Body: []byte(body), Trace: tp, SkipVerify: true,
			})
			if err != nil || resp.Status != receive.StatusAccepted {
				t.Errorf("Content-Type %.40q, trace %.40q: %+v %v, want accepted", contentType, tp, resp, err)
			}
		}
		bad := []string{"text/plain\r\nX-Evil: 1", "application/json\n", "text/plain\x00", "text/\x7fplain",
			"application/json; charset=\xff", "text/plain; x=\xed\xa0\x80", "text/plain; x=" + strings.Repeat("a", 300)}
		for i, ct := range bad {
			take(fmt.Sprintf("ct-%d", i), ct, "")
		}
		take("ct-ok", "text/plain;\tcharset=\"é\"", "") // what a header may hold beside visible ASCII
		for i, tp := range []string{trace + "\x00", trace[:20] + "\xff" + trace[21:], "\x00", trace + strings.Repeat("x", 1<<20)} {
			take(fmt.Sprintf("tp-%d", i), "application/json", tp)
		}
		take("tp-ok", "application/json", trace)

		got := leaseAll(t, st)
		if len(got) != len(bad)+6 {
			t.Fatalf("%d deliveries, want %d", len(got), len(bad)+6)
		}
		for key, d := range got {
			want, wantTrace := "application/json", ""
			switch key {
			case "ct-ok":
				want = "text/plain;\tcharset=\"é\""
			case "tp-ok":
				wantTrace = trace
			}
			if d.ContentType != want || d.Trace != wantTrace {
				t.Errorf("%s stored Content-Type %q and trace %q, want %q and %q", key, d.ContentType, d.Trace, want, wantTrace)
			}
		}
	})
}

// Invariant 23 for order entities (issue 41): an entity PostgreSQL cannot
// store as it is (a NUL, a byte that is not UTF-8, a lone surrogate
// escape, a megabyte of text) still orders its events, on both
// backends: each is one entity (its older event is stale once its newer
// one is delivered), distinct from every other, however alike they
// look. Before, PostgreSQL refused the whole event (store_rejected: an
// HTTP 500, a queue message terminated, a PublishTx rolled back).
func TestAnEntityNoStoreCanHoldStillOrdersItsEvents(t *testing.T) {
	rule, err := provider.ParseOrderRule("json:entity", "json:version", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	entities := []string{`a\u0000b`, "a\xffb", `a\ud800b`, `a\udc00b`, `a\ufffdb`, `%a%00b`, "a%00b", strings.Repeat("m", 1_000_000), strings.Repeat("m", 1_000_001)}
	onEachBackend(t, func(t *testing.T, st store.Store) {
		h := queueHandler(t, st, &receive.Order{Rule: rule, Mode: store.OrderLatest})
		ctx := context.Background()
		take := func(key, entity string, version int) {
			t.Helper()
			body := fmt.Sprintf(`{"order_id":%q,"entity":"%s","version":%d}`, key, entity, version)
			resp, err := h.Accept(ctx, "orders", receive.Envelope{Body: []byte(body), SkipVerify: true})
			if err != nil || resp.Status != receive.StatusAccepted {
				t.Fatalf("entity %.20q: %+v %v, want accepted", entity, resp, err)
			}
		}
		for i, e := range entities {
			take(fmt.Sprintf("new-%d", i), e, 2)
		}
		// One delivery of each entity at a time: every entity is its own.
		first := leaseAll(t, st)
		if len(first) != len(entities) {
			t.Fatalf("leased %d deliveries, want one for each of the %d entities", len(first), len(entities))
		}
		seen := map[string]bool{}
		var outcomes []store.Outcome
		for _, d := range first {
			if seen[d.Entity] || !d.Ordered {
				t.Errorf("%s: entity %.40q (ordered %v) leased twice", d.Key, d.Entity, d.Ordered)
			}
			seen[d.Entity] = true
			outcomes = append(outcomes, store.Outcome{DeliveryID: d.ID, LeaseToken: d.LeaseToken, Kind: store.OutcomeDelivered,
				Attempt: d.Attempt, StartedAt: time.Now(), Ordered: true})
		}
		if err := store.CompleteDeliveries(ctx, st, outcomes); err != nil {
			t.Fatal(err)
		}
		// An older event of each is stale, a newer one is delivered.
		for i, e := range entities {
			take(fmt.Sprintf("old-%d", i), e, 1)
			take(fmt.Sprintf("newer-%d", i), e, 3)
		}
		second := leaseAll(t, st)
		for i := range entities {
			if _, ok := second[fmt.Sprintf("newer-%d", i)]; !ok {
				t.Errorf("entity %d: its newer event was not leased (%d leased)", i, len(second))
			}
			if _, ok := second[fmt.Sprintf("old-%d", i)]; ok {
				t.Errorf("entity %d: its older event was leased, not stale", i)
			}
		}
		if s, err := st.Stats(ctx); err != nil || s.Stale != int64(len(entities)) {
			t.Errorf("stats %+v %v: want %d stale", s, err, len(entities))
		}
	})
}
