package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook/store"
)

// testAlertIssues: replicas that see one condition begin at once open one
// issue (invariant 27); its notices are marked once each, by compare and
// set; an acknowledgement and a resolution are audited in their
// transaction and told on its timeline; once resolved, the same condition
// opens a new issue.
func testAlertIssues(t *testing.T, stores []store.Store) {
	ctx := context.Background()
	a, b := stores[0], stores[len(stores)-1]
	open := store.NewIssue{Kind: "dead_letters", Scope: store.ScopeDestination, Name: "billing", At: base,
		Figures: store.IssueFigures{Message: "destination billing: 12 dead letters", Value: 12, Threshold: 10}}

	var wg sync.WaitGroup
	var mu sync.Mutex
	opened, ids := 0, map[int64]bool{}
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			is, ok, err := stores[i%len(stores)].OpenIssue(ctx, open)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			ids[is.ID] = true
			if ok {
				opened++
			}
		}()
	}
	wg.Wait()
	if opened != 1 || len(ids) != 1 {
		t.Fatalf("8 opens of one condition on %d replicas: %d opened, issues %v; want one", len(stores), opened, ids)
	}
	var id int64
	for id = range ids {
	}
	later := open
	later.At, later.Figures.Value = base.Add(time.Minute), 15
	is, ok, err := b.OpenIssue(ctx, later)
	if err != nil || ok || is.ID != id || is.Figures.Value != 15 || is.State != store.IssueOpen || !is.OpenedAt.Equal(base) {
		t.Fatalf("the condition still holding: %+v opened=%v %v; want issue %d with the new figures", is, ok, err, id)
	}

	// The opening notice: two replicas saw it through; one marks it.
	m1, err1 := a.MarkIssueNotified(ctx, id, store.NoticeOpened, 1, base.Add(time.Second))
	m2, err2 := b.MarkIssueNotified(ctx, id, store.NoticeOpened, 1, base.Add(2*time.Second))
	if err := errors.Join(err1, err2); err != nil || m1 == m2 {
		t.Fatalf("the opening notice marked by two replicas: %v %v %v; want one", m1, m2, err)
	}

	ack := store.AuditEntry{At: base.Add(3 * time.Minute), Actor: "ops", Action: "acknowledge", Target: "issue"}
	is, ok, err = b.AcknowledgeIssue(ctx, id, ack)
	if err != nil || !ok || is.State != store.IssueAcknowledged || is.AcknowledgedBy != "ops" || !is.AcknowledgedAt.Equal(ack.At) {
		t.Fatalf("acknowledge: %+v %v %v", is, ok, err)
	}
	if is, ok, err = a.AcknowledgeIssue(ctx, id, ack); err != nil || ok || is.State != store.IssueAcknowledged {
		t.Fatalf("acknowledge again: %+v %v %v; want unchanged", is, ok, err)
	}
	if _, _, err := a.AcknowledgeIssue(ctx, id+1000, ack); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("acknowledge an unknown issue: %v", err)
	}
	if _, ok, _ := a.OpenIssue(ctx, later); ok {
		t.Fatal("an acknowledged issue's condition opened a second issue")
	}

	is, ok, err = a.ResolveIssue(ctx, id, base.Add(5*time.Minute), "", store.AuditEntry{})
	if err != nil || !ok || is.State != store.IssueResolved || is.ResolvedBy != "" || !is.ResolvedAt.Equal(base.Add(5*time.Minute)) {
		t.Fatalf("resolve by itself: %+v %v %v", is, ok, err)
	}
	if _, ok, err = b.ResolveIssue(ctx, id, base.Add(6*time.Minute), "ops", store.AuditEntry{At: base, Actor: "ops", Action: "resolve"}); err != nil || ok {
		t.Fatalf("resolve again: %v %v; want unchanged", ok, err)
	}
	if _, _, err := b.AcknowledgeIssue(ctx, id, ack); !errors.Is(err, store.ErrIssueResolved) {
		t.Fatalf("acknowledge a resolved issue: %v; want ErrIssueResolved", err)
	}
	if got, err := a.Issues(ctx, store.IssueQuery{Unnotified: true}); err != nil || len(got) != 1 || got[0].ID != id {
		t.Fatalf("resolved, its resolution not yet notified: %+v %v", got, err)
	}
	if m, err := b.MarkIssueNotified(ctx, id, store.NoticeResolved, 2, base.Add(5*time.Minute)); err != nil || !m {
		t.Fatalf("mark the resolution: %v %v", m, err)
	}
	if got, err := a.Issues(ctx, store.IssueQuery{Unnotified: true}); err != nil || len(got) != 0 {
		t.Fatalf("every resolution notified, yet listed: %+v %v", got, err)
	}

	// A check that measured before the resolution (another replica's,
	// slower) does not open it again: its measure is older.
	stale := open
	stale.At = base.Add(4 * time.Minute)
	if is, ok, err := b.OpenIssue(ctx, stale); err != nil || ok || is.ID != 0 {
		t.Fatalf("a measure older than the resolution: %+v opened=%v %v; want nothing opened", is, ok, err)
	}

	// The condition again: a new issue.
	again := open
	again.At = base.Add(10 * time.Minute)
	is2, ok, err := b.OpenIssue(ctx, again)
	if err != nil || !ok || is2.ID == id {
		t.Fatalf("the condition after its issue resolved: %+v %v %v; want a new issue", is2, ok, err)
	}
	other := open
	other.Name = "crm"
	if _, ok, err := a.OpenIssue(ctx, other); err != nil || !ok {
		t.Fatalf("another destination's condition: %v %v", ok, err)
	}

	list, err := a.Issues(ctx, store.IssueQuery{States: []string{store.IssueOpen, store.IssueAcknowledged}})
	if err != nil || len(list) != 2 || list[0].ID < list[1].ID {
		t.Fatalf("active issues: %+v %v; want 2, newest first", list, err)
	}
	if page, err := a.Issues(ctx, store.IssueQuery{Before: list[0].ID, Limit: 1}); err != nil || len(page) != 1 || page[0].ID != list[1].ID {
		t.Fatalf("a page after the newest: %+v %v", page, err)
	}
	if res, err := a.Issues(ctx, store.IssueQuery{States: []string{store.IssueResolved}}); err != nil || len(res) != 1 || res[0].ID != id {
		t.Fatalf("resolved issues: %+v %v", res, err)
	}

	got, err := b.Issue(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var timeline []string
	for _, e := range got.Timeline {
		timeline = append(timeline, e.Event+":"+e.Detail+":"+e.By)
	}
	want := []string{"opened::", "notified:opened:", "acknowledged::ops", "resolved::", "notified:resolved:"}
	if len(timeline) != len(want) {
		t.Fatalf("timeline %q; want %q", timeline, want)
	}
	for i := range want {
		if timeline[i] != want[i] {
			t.Fatalf("timeline %q; want %q", timeline, want)
		}
	}
	if got.Notices != 2 || got.Notified != store.NoticeResolved || got.Figures.Message != open.Figures.Message {
		t.Fatalf("the issue read back: %+v", got)
	}
	if _, err := a.Issue(ctx, id+1000); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an unknown issue: %v", err)
	}
	audit, err := a.ListAudit(ctx, 0, 10)
	if err != nil || len(audit) != 1 || audit[0].Action != "acknowledge" || audit[0].Actor != "ops" {
		t.Fatalf("audit: %+v %v; want the one acknowledgement (a resolution by itself and a no-op are not audited)", audit, err)
	}
}
