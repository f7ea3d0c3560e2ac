// Package seen is intake's hot dedup layer inside the process: a bounded
// set of (source, key) pairs known to be committed in the store.
//
// It only ever answers "yes, committed": a key enters after the store has
// durably committed it (as new or as a duplicate), so a hit is a duplicate
// for certain and can be answered without queueing for the store's single
// writer. A miss proves nothing and goes through the store's atomic claim,
// which stays the only arbiter. Losing the set (a restart, an eviction)
// costs speed, never correctness.
package seen

import (
	"hash/maphash"
	"sync"
	"time"
)

const shardCount = 64

// Set is a concurrent, bounded set of committed keys with expiry.
type Set struct {
	seed     maphash.Seed
	perShard int
	shards   [shardCount]shard
}

type shard struct {
	mu      sync.Mutex
	expires map[string]int64 // unix nanos
}

// New returns a Set that holds about capacity keys. A capacity of zero or
// less returns nil, and a nil *Set holds nothing.
func New(capacity int) *Set {
	if capacity <= 0 {
		return nil
	}
	s := &Set{seed: maphash.MakeSeed(), perShard: max(1, capacity/shardCount)}
	for i := range s.shards {
		s.shards[i].expires = make(map[string]int64)
	}
	return s
}

func id(source, key string) string { return source + "\x00" + key }

func (s *Set) shard(k string) *shard {
	return &s.shards[maphash.String(s.seed, k)%shardCount]
}

// Has reports whether (source, key) is known committed and not expired at now.
func (s *Set) Has(source, key string, now time.Time) bool {
	if s == nil {
		return false
	}
	k := id(source, key)
	sh := s.shard(k)
	sh.mu.Lock()
	exp, ok := sh.expires[k]
	if ok && exp <= now.UnixNano() {
		delete(sh.expires, k)
		ok = false
	}
	sh.mu.Unlock()
	return ok
}

// Add records (source, key) as committed until expires. Call it only after
// the store's commit has succeeded.
func (s *Set) Add(source, key string, expires time.Time) {
	if s == nil {
		return
	}
	k := id(source, key)
	sh := s.shard(k)
	sh.mu.Lock()
	if len(sh.expires) >= s.perShard {
		// Evict a tenth of the shard, in map order (which Go randomizes):
		// cheap, and good enough for a cache that can only cost speed.
		n := s.perShard / 10
		for victim := range sh.expires {
			delete(sh.expires, victim)
			if n--; n <= 0 {
				break
			}
		}
	}
	sh.expires[k] = expires.UnixNano()
	sh.mu.Unlock()
}

// Len is how many keys the set holds, expired ones included.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	n := 0
	for i := range s.shards {
		s.shards[i].mu.Lock()
		n += len(s.shards[i].expires)
		s.shards[i].mu.Unlock()
	}
	return n
}
