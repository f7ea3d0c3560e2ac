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
	"strings"
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
	expires map[pair]int64 // unix nanos
}

// pair is a (source, key) as the map's key: looking one up builds
// nothing, where a joined string was an allocation on every request.
type pair struct{ source, key string }

// New returns a Set that holds about capacity keys. A capacity of zero or
// less returns nil, and a nil *Set holds nothing.
func New(capacity int) *Set {
	if capacity <= 0 {
		return nil
	}
	s := &Set{seed: maphash.MakeSeed(), perShard: max(1, capacity/shardCount)}
	for i := range s.shards {
		s.shards[i].expires = make(map[pair]int64)
	}
	return s
}

func (s *Set) shard(k pair) *shard {
	var h maphash.Hash
	h.SetSeed(s.seed)
	h.WriteString(k.source)
	h.WriteByte(0)
	h.WriteString(k.key)
	return &s.shards[h.Sum64()%shardCount]
}

// Has reports whether (source, key) is known committed and not expired at now.
func (s *Set) Has(source, key string, now time.Time) bool {
	if s == nil {
		return false
	}
	k := pair{source, key}
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
	// A copy of the key: one read out of a request's body must not keep
	// the body. The source is a name from the configuration, kept anyway.
	k := pair{source, strings.Clone(key)}
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
