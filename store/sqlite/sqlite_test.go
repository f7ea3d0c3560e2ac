package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/oncehook/oncehook/store"
	"github.com/oncehook/oncehook/store/sqlite"
	"github.com/oncehook/oncehook/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "test.db"), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestReopenKeepsEverythingAndSkipsApplied(t *testing.T) {
	path := filepath.Join(t.TempDir(), "reopen.db")
	ctx := context.Background()
	s, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ClaimEvents(ctx, []store.NewEvent{{Source: "s", Key: "k", Destinations: []string{"d"}}}); err != nil {
		t.Fatal(err)
	}
	id := s.ID()
	s.Close()
	s, err = sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	c, err := s.ClaimEvents(ctx, []store.NewEvent{{Source: "s", Key: "k"}})
	if err != nil || !c[0].Duplicate {
		t.Fatalf("after reopen: %+v %v, want a duplicate", c, err)
	}
	if s.ID() != id {
		t.Fatalf("store id changed on reopen: %s, then %s", id, s.ID())
	}
}

func TestSynchronousLevelIsValidated(t *testing.T) {
	_, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "x.db"), sqlite.Options{Synchronous: "SOMETIMES"})
	if err == nil {
		t.Fatal("an unknown synchronous level was accepted")
	}
}
