package seen

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestHasOnlyWhatWasAddedAndNotExpired(t *testing.T) {
	s := New(1000)
	now := time.Now()
	if s.Has("src", "a", now) {
		t.Fatal("empty set has a key")
	}
	s.Add("src", "a", now.Add(time.Minute))
	if !s.Has("src", "a", now) {
		t.Fatal("added key missing")
	}
	if s.Has("other", "a", now) || s.Has("src", "b", now) {
		t.Fatal("a key is per source")
	}
	if s.Has("src", "a", now.Add(time.Minute)) {
		t.Fatal("expired key still present")
	}
	// "a\x00b" under source "s" must not collide with "b" under "s\x00a".
	s.Add("s", "a\x00b", now.Add(time.Minute))
	if s.Has("s\x00a", "b", now) && !s.Has("s", "a\x00b", now) {
		t.Fatal("collision")
	}
}

func TestBoundedUnderConcurrency(t *testing.T) {
	s := New(6400)
	now := time.Now()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 10000 {
				k := fmt.Sprintf("%d-%d", g, i)
				s.Add("src", k, now.Add(time.Hour))
				s.Has("src", k, now) // may be evicted already by another goroutine: a cache, not a record
			}
		}()
	}
	wg.Wait()
	if n := s.Len(); n > 6400 {
		t.Fatalf("holds %d keys, capacity 6400", n)
	}
}

func TestNilSetHoldsNothing(t *testing.T) {
	var s *Set = New(0)
	s.Add("src", "a", time.Now().Add(time.Hour))
	if s.Has("src", "a", time.Now()) || s.Len() != 0 {
		t.Fatal("nil set held a key")
	}
}

// BenchmarkHas is intake's check of every request's key: a hit (a
// duplicate) and a miss (a new event) both allocate nothing.
func BenchmarkHas(b *testing.B) {
	s := New(1 << 16)
	now := time.Now()
	for i := range 1000 {
		s.Add("github", fmt.Sprintf("5f0c1a2e-9b7d-11ef-8a3c-%012d", i), now.Add(time.Hour))
	}
	// GitHub's delivery GUIDs: 36 characters, as long as real keys are.
	hit, miss := "5f0c1a2e-9b7d-11ef-8a3c-000000000500", "5f0c1a2e-9b7d-11ef-8a3c-999999999999"
	b.ReportAllocs()
	for b.Loop() {
		if !s.Has("github", hit, now) || s.Has("github", miss, now) {
			b.Fatal("wrong answer")
		}
	}
}
