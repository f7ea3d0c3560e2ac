package admin_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/oncehook/oncehook/admin"
	"github.com/oncehook/oncehook/store"
)

// A tenant's audit shows the operator's changes to its data: a bulk
// replay, retry, purge or delivery whose filter names its source or its
// destination, and an acknowledgement or resolution of its alert issue,
// each with what it counted; a bulk change across every tenant, without
// its count (which counts the others' events too); one event's replay,
// skip or delivery, and an order reset of its source. Another tenant's, and
// one on a shared source only, are not in it. Both backends.
func TestATenantsAuditShowsTheOperatorsChangesToItsData(t *testing.T) {
	for name, open := range searchStores(t) {
		t.Run(name, func(t *testing.T) {
			st := open(t)
			ctx := context.Background()
			now := time.Now().UTC().Truncate(time.Second)
			var events []store.NewEvent
			for _, e := range []struct{ source, dest string }{{"acme-a", "acme-app"}, {"acme-b", "app"}, {"globex-a", "globex-app"}, {"shared", "app"}} {
				events = append(events, store.NewEvent{Source: e.source, Key: "evt-" + e.source, ContentType: "application/json", Body: []byte(`{}`),
					ReceivedAt: now, ExpiresAt: now.Add(24 * time.Hour), Destinations: []string{e.dest}})
			}
			if _, err := store.ClaimEvents(ctx, st, events); err != nil {
				t.Fatal(err)
			}
			svc, err := admin.New(admin.Options{Store: st,
				Sources:      []admin.Source{{Name: "acme-a", Tenant: "acme", Ordered: true}, {Name: "acme-b", Tenant: "acme"}, {Name: "globex-a", Tenant: "globex"}, {Name: "shared"}},
				Destinations: []admin.Destination{{Name: "acme-app", Tenant: "acme"}, {Name: "globex-app", Tenant: "globex"}, {Name: "app"}}})
			if err != nil {
				t.Fatal(err)
			}
			svc.SetTenantTokens(map[string]string{"ops": ""})
			issue, _, err := st.OpenIssue(ctx, store.NewIssue{Kind: "failure_rate", Scope: store.ScopeDestination, Name: "acme-app", At: now})
			if err != nil {
				t.Fatal(err)
			}
			ops := admin.WithActor(ctx, "token:ops")
			must := func(_ any, err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			must(svc.ReplayEvents(ops, admin.EventFilter{Source: "acme-a"}, false))
			must(svc.ReplayEvents(ops, admin.EventFilter{All: true}, false))
			must(svc.ReplayEvents(ops, admin.EventFilter{Source: "shared"}, false))
			must(svc.DeliverEvents(ops, admin.EventFilter{Source: "acme-b", Destination: "acme-app"}, false))
			must(svc.RetryDeadLetters(ops, admin.DeadFilter{Destination: "acme-app"}, false))
			must(svc.PurgeDeadLetters(ops, admin.DeadFilter{Source: "globex-a"}, false))
			// One event's changes, and an order reset, by the event's source.
			page, err := svc.Events(ctx, admin.EventFilter{Source: "globex-a"})
			if err != nil || len(page.Events) != 1 {
				t.Fatal(page, err)
			}
			globexEvent := page.Events[0].ID
			must(svc.ReplayEvent(ops, globexEvent))
			must(svc.SkipEvent(ops, globexEvent, "globex-app"))
			must(svc.ResetOrder(ops, "acme-a", "order-1", ""))
			must(svc.AcknowledgeIssue(ops, issue.ID))
			must(svc.ResolveIssue(ops, issue.ID))

			type seen struct {
				action, target string
				count          int
			}
			audit := func(op admin.Operator) []seen {
				t.Helper()
				page, err := op.Audit(ctx, "", 50)
				if err != nil {
					t.Fatal(err)
				}
				var out []seen
				for _, e := range page.Entries {
					out = append(out, seen{e.Action, e.Target, e.Count})
				}
				return out
			}
			issueTarget := "tenant acme: issue " + strconv.FormatInt(issue.ID, 10)
			want := map[string][]seen{
				"acme": {
					{"alert_resolve", issueTarget, 1},
					{"alert_acknowledge", issueTarget, 1},
					{"order_reset", "tenant acme: source acme-a entity order-1", 0},
					{"retry", "tenant acme: destination=acme-app", 0},
					{"deliver", "tenant acme: source=acme-b destination=acme-app", 1},
					{"replay", "every tenant: all events", 0},
					{"replay", "tenant acme: source=acme-a", 1},
				},
				"globex": {
					{"skip", "tenant globex: event " + strconv.FormatInt(globexEvent, 10) + " to globex-app", 1},
					{"replay", "tenant globex: event " + strconv.FormatInt(globexEvent, 10), 1},
					{"purge", "tenant globex: source=globex-a", 0},
					{"replay", "every tenant: all events", 0},
				},
			}
			for tenant, w := range want {
				if got := audit(svc.Tenant(tenant)); !slices.Equal(got, w) {
					t.Errorf("%s's audit:\n got %v\nwant %v", tenant, got, w)
				}
			}
			// The operator sees every entry, the bulk one with its count.
			all := audit(svc)
			if len(all) != 11 || all[10] != (seen{"replay", "tenant acme: source=acme-a", 1}) ||
				all[9] != (seen{"replay", "every tenant: all events", 4}) || all[8] != (seen{"replay", "source=shared", 1}) {
				t.Errorf("the operator's audit: %v", all)
			}
		})
	}
}
