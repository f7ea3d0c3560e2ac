package storetest

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook/store"
)

// testObjects: a stored source is created at version 1, read back byte
// for byte (hostile bytes in its spec and actor), listed by kind, updated
// with a version bump only against its current version, refused when its
// name is taken or its version moved on, deleted, and every change that
// was made is in the audit log under its actor; a refused one is not.
func testObjects(t *testing.T, s store.Store) {
	ctx := context.Background()
	before := time.Now().Add(-time.Second)
	spec := []byte(`{"name":"acme","preset":"stripe","secrets":["ohsb1:AAAA"],"note":"\u0000 é 😀 '; DROP TABLE objects; --"}`)
	audit := func(action, actor string) store.AuditEntry {
		return store.AuditEntry{Actor: actor, Action: action, Target: "source acme"}
	}
	if _, err := s.Object(ctx, store.ObjectSource, "acme"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an object never stored: %v", err)
	}
	o, err := s.CreateObject(ctx, store.Object{Kind: store.ObjectSource, Name: "acme", Spec: spec}, audit("source_create", "token:ops'\"; --"))
	if err != nil {
		t.Fatal(err)
	}
	if o.Version != 1 || !bytes.Equal(o.Spec, spec) || o.CreatedBy != "token:ops'\"; --" || o.UpdatedBy != o.CreatedBy || o.CreatedAt.Before(before) || !o.UpdatedAt.Equal(o.CreatedAt) {
		t.Fatalf("created %+v", o)
	}
	// The same name of another kind is another object; of the same kind,
	// taken, whatever the tenant, and nothing of the refused create stays.
	if _, err := s.CreateObject(ctx, store.Object{Kind: store.ObjectDestination, Name: "acme", Spec: []byte(`{"name":"acme","url":"https://x"}`)}, audit("destination_create", "token:ops")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateObject(ctx, store.Object{Kind: store.ObjectSource, Name: "acme", Tenant: "other", Spec: []byte(`{}`)}, audit("source_create", "token:intruder")); !errors.Is(err, store.ErrObjectExists) {
		t.Fatalf("a name taken: %v", err)
	}
	got, err := s.Object(ctx, store.ObjectSource, "acme")
	if err != nil || !bytes.Equal(got.Spec, spec) || got.Version != 1 || got.Tenant != "" {
		t.Fatalf("read back %+v, %v", got, err)
	}
	if list, err := s.ListObjects(ctx, store.ObjectSource); err != nil || len(list) != 1 || list[0].Name != "acme" {
		t.Fatalf("sources listed: %+v, %v", list, err)
	}
	if list, err := s.ListObjects(ctx, ""); err != nil || len(list) != 2 || list[0].Kind != store.ObjectDestination {
		t.Fatalf("every object listed: %+v, %v", list, err)
	}

	spec2 := []byte(`{"name":"acme","preset":"stripe","secrets":["ohsb1:BBBB"]}`)
	up, err := s.UpdateObject(ctx, store.Object{Kind: store.ObjectSource, Name: "acme", Spec: spec2}, 1, audit("source_update", "token:rotator"))
	if err != nil || up.Version != 2 || !bytes.Equal(up.Spec, spec2) || up.UpdatedBy != "token:rotator" || up.CreatedBy != o.CreatedBy || !up.CreatedAt.Equal(o.CreatedAt) || up.UpdatedAt.Before(o.UpdatedAt) {
		t.Fatalf("updated %+v, %v", up, err)
	}
	if _, err := s.UpdateObject(ctx, store.Object{Kind: store.ObjectSource, Name: "acme", Spec: spec}, 1, audit("source_update", "token:late")); !errors.Is(err, store.ErrVersionConflict) {
		t.Fatalf("an update against version 1 once it is 2: %v", err)
	}
	if _, err := s.UpdateObject(ctx, store.Object{Kind: store.ObjectSource, Name: "nope", Spec: spec}, 1, audit("source_update", "token:late")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an update of nothing: %v", err)
	}
	if err := s.DeleteObject(ctx, store.ObjectSource, "acme", 1, audit("source_delete", "token:late")); !errors.Is(err, store.ErrVersionConflict) {
		t.Fatalf("a delete against an old version: %v", err)
	}
	if got, _ := s.Object(ctx, store.ObjectSource, "acme"); got.Version != 2 || !bytes.Equal(got.Spec, spec2) {
		t.Fatalf("a refused change wrote: %+v", got)
	}
	if err := s.DeleteObject(ctx, store.ObjectSource, "acme", 0, audit("source_delete", "token:remover")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Object(ctx, store.ObjectSource, "acme"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("read after delete: %v", err)
	}
	if err := s.DeleteObject(ctx, store.ObjectSource, "acme", 0, audit("source_delete", "token:remover")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a second delete: %v", err)
	}
	// Deleted, the name is free again, from version 1.
	if again, err := s.CreateObject(ctx, store.Object{Kind: store.ObjectSource, Name: "acme", Spec: spec}, audit("source_create", "token:ops")); err != nil || again.Version != 1 {
		t.Fatalf("re-created %+v, %v", again, err)
	}

	log, err := s.ListAudit(ctx, 0, 20)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for i := len(log) - 1; i >= 0; i-- {
		seen = append(seen, log[i].Action+" "+log[i].Actor)
	}
	want := []string{"source_create token:ops'\"; --", "destination_create token:ops", "source_update token:rotator", "source_delete token:remover", "source_create token:ops"}
	if len(seen) != len(want) {
		t.Fatalf("audit log %q, want %q", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Fatalf("audit log %q, want %q", seen, want)
		}
	}
}

// testObjectRace: replicas that create one name at once store it once;
// updates made at once against one version leave one winner, the others
// told the version moved on.
func testObjectRace(t *testing.T, replicas []store.Store) {
	ctx := context.Background()
	const n = 12
	var wg sync.WaitGroup
	var mu sync.Mutex
	created, taken := 0, 0
	for i := range n {
		wg.Go(func() {
			_, err := replicas[i%len(replicas)].CreateObject(ctx, store.Object{Kind: store.ObjectSource, Name: "race", Spec: []byte(`{}`)},
				store.AuditEntry{Actor: "t", Action: "source_create", Target: "source race"})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				created++
			case errors.Is(err, store.ErrObjectExists):
				taken++
			default:
				t.Errorf("create: %v", err)
			}
		})
	}
	wg.Wait()
	if created != 1 || taken != n-1 {
		t.Fatalf("%d created, %d told taken; want 1 and %d", created, taken, n-1)
	}
	won, lost := 0, 0
	for i := range n {
		wg.Go(func() {
			_, err := replicas[i%len(replicas)].UpdateObject(ctx, store.Object{Kind: store.ObjectSource, Name: "race", Spec: []byte(`{"n":1}`)}, 1,
				store.AuditEntry{Actor: "t", Action: "source_update", Target: "source race"})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case errors.Is(err, store.ErrVersionConflict):
				lost++
			default:
				t.Errorf("update: %v", err)
			}
		})
	}
	wg.Wait()
	if o, err := replicas[0].Object(ctx, store.ObjectSource, "race"); won != 1 || lost != n-1 || err != nil || o.Version != 2 {
		t.Fatalf("%d won, %d lost, now %+v %v", won, lost, o, err)
	}
}

// testObjectsMark: the objects' mark is the mark of what ListObjects
// lists (what a replica runs, once it read them), and moves with a
// create, an update and a delete, and with a delete and a create again
// of the same name and spec; a refused change leaves it.
func testObjectsMark(t *testing.T, s store.Store) {
	ctx := context.Background()
	marks := map[string]string{}
	mark := func(step string) string {
		t.Helper()
		m, err := s.ObjectsMark(ctx)
		if err != nil {
			t.Fatal(err)
		}
		list, err := s.ListObjects(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		if m != store.MarkOf(list) {
			t.Fatalf("%s: the mark %s is not the listed objects' %s", step, m, store.MarkOf(list))
		}
		if prev, ok := marks[m]; ok {
			t.Fatalf("%s: the mark did not move from %s", step, prev)
		}
		marks[m] = step
		return m
	}
	audit := store.AuditEntry{Actor: "token:ops", Action: "source_change", Target: "source m"}
	spec := []byte(`{"name":"m","preset":"stripe"}`)
	mark("none")
	if _, err := s.CreateObject(ctx, store.Object{Kind: store.ObjectSource, Name: "m", Spec: spec}, audit); err != nil {
		t.Fatal(err)
	}
	created := mark("created")
	if _, err := s.CreateObject(ctx, store.Object{Kind: store.ObjectSource, Name: "m", Spec: spec}, audit); !errors.Is(err, store.ErrObjectExists) {
		t.Fatal(err)
	}
	if m, _ := s.ObjectsMark(ctx); m != created {
		t.Fatal("a refused create moved the mark")
	}
	if _, err := s.UpdateObject(ctx, store.Object{Kind: store.ObjectSource, Name: "m", Spec: spec}, 1, audit); err != nil {
		t.Fatal(err)
	}
	mark("updated")
	if err := s.DeleteObject(ctx, store.ObjectSource, "m", 0, audit); err != nil {
		t.Fatal(err)
	}
	if m, _ := s.ObjectsMark(ctx); marks[m] != "none" {
		t.Fatalf("deleted: the mark is not the empty store's (%q)", marks[m])
	}
	time.Sleep(2 * time.Millisecond) // a store's clock may count milliseconds
	if _, err := s.CreateObject(ctx, store.Object{Kind: store.ObjectSource, Name: "m", Spec: spec}, audit); err != nil {
		t.Fatal(err)
	}
	mark("created again")
}
