package metrics

import (
	"sync"
	"time"

	"github.com/oncehook/oncehook/store"
)

// MaxCopyKeys bounds the distinct events whose copies wait for a commit:
// past it, copies of further events are not counted until the next commit
// takes what is there (a storm of a million distinct duplicates in one
// second is counted in part, and memory stays bounded).
const MaxCopyKeys = 100_000

// Copies accumulates, per stored event, the duplicates intake answered,
// until the writer takes them into a commit (store.Batch.Copies): the
// event page says how many copies of an event arrived and when the last
// did. Counting costs a map update; the store sees one update per event
// per commit.
type Copies struct {
	mu sync.Mutex
	m  map[copyKey]*store.Copy
}

type copyKey struct{ source, key string }

// NewCopies returns an empty accumulator.
func NewCopies() *Copies { return &Copies{m: map[copyKey]*store.Copy{}} }

// Add counts one more copy of source/key, arrived at at.
func (c *Copies) Add(source, key string, at time.Time) {
	if c == nil {
		return
	}
	c.mu.Lock()
	c.addLocked(source, key, 1, at)
	c.mu.Unlock()
}

// addLocked counts n copies of source/key, the last at at, unless the
// accumulator is full.
func (c *Copies) addLocked(source, key string, n int64, at time.Time) {
	k := copyKey{source, key}
	e := c.m[k]
	if e == nil {
		if len(c.m) >= MaxCopyKeys {
			return // full: see MaxCopyKeys
		}
		e = &store.Copy{Source: source, Key: key}
		c.m[k] = e
	}
	e.N += n
	if at.After(e.Last) {
		e.Last = at
	}
}

// Take returns the copies counted so far and starts afresh.
func (c *Copies) Take() []store.Copy {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	m := c.m
	if len(m) == 0 {
		c.mu.Unlock()
		return nil
	}
	c.m = make(map[copyKey]*store.Copy, len(m))
	c.mu.Unlock()
	out := make([]store.Copy, 0, len(m))
	for _, e := range m {
		out = append(out, *e)
	}
	return out
}

// Restore puts back copies a failed commit did not write.
func (c *Copies) Restore(copies []store.Copy) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, x := range copies {
		c.addLocked(x.Source, x.Key, x.N, x.Last)
	}
}
