package redis_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/oncehook/oncehook/internal/testenv"
	"github.com/oncehook/oncehook/store"
	"github.com/oncehook/oncehook/store/postgres"
	"github.com/oncehook/oncehook/store/redis"
	"github.com/oncehook/oncehook/store/sqlite"
	"github.com/oncehook/oncehook/store/storetest"
)

func prefix() string {
	var b [6]byte
	rand.Read(b[:])
	return "oncehook-test-" + hex.EncodeToString(b[:]) + ":"
}

func openSQLite(t *testing.T) store.Store {
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "r.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func layer(t *testing.T, inner store.Store) *redis.Store {
	s, err := redis.Open(testenv.Redis(t), inner, redis.Options{Prefix: prefix()})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformanceOnSQLite(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return layer(t, openSQLite(t)) }, nil)
}

func TestConformanceOnPostgres(t *testing.T) {
	var urls sync.Map
	storetest.Run(t, func(t *testing.T) store.Store {
		url := testenv.Postgres(t)
		pg, err := postgres.Open(context.Background(), url, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		s := layer(t, pg)
		urls.Store(store.Store(s), url)
		return s
	}, func(t *testing.T, s store.Store) store.Store {
		url, _ := urls.Load(s)
		pg, err := postgres.Open(context.Background(), url.(string), postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		// Another replica: its own Redis client, the same Redis keys.
		return redis.Wrap(goredis.NewClient(mustParse(t, testenv.Redis(t))), pg, redis.Options{Prefix: s.(*redis.Store).Prefix()})
	})
}

func mustParse(t *testing.T, url string) *goredis.Options {
	o, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// counting counts the claims that reach the store behind the layer.
type counting struct {
	store.Store
	claimed atomic.Int64
}

func (c *counting) Commit(ctx context.Context, b store.Batch) (store.Committed, error) {
	c.claimed.Add(int64(len(b.Events)))
	return c.Store.Commit(ctx, b)
}

func ev(key string) store.NewEvent {
	now := time.Now()
	return store.NewEvent{Source: "src", Key: key, Body: []byte("{}"), ReceivedAt: now, ExpiresAt: now.Add(time.Hour), Destinations: []string{"d"}}
}

func claim(t *testing.T, s store.Store, key string) store.Claim {
	t.Helper()
	c, err := store.ClaimEvents(context.Background(), s, []store.NewEvent{ev(key)})
	if err != nil {
		t.Fatal(err)
	}
	return c[0]
}

func TestHitsSkipTheStoreAndAFlushLetsNoDuplicateThrough(t *testing.T) {
	inner := &counting{Store: openSQLite(t)}
	s := layer(t, inner)
	defer s.Close()
	if claim(t, s, "a").Duplicate {
		t.Fatal("first claim was a duplicate")
	}
	if !claim(t, s, "a").Duplicate || inner.claimed.Load() != 1 {
		t.Fatalf("second claim: want a duplicate answered by Redis, store saw %d claims", inner.claimed.Load())
	}
	// Redis loses everything (FLUSHALL, a restart without persistence).
	opts, _ := goredis.ParseURL(testenv.Redis(t))
	client := goredis.NewClient(opts)
	defer client.Close()
	if err := client.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	if !claim(t, s, "a").Duplicate {
		t.Fatal("after FLUSHALL a duplicate got through")
	}
	if inner.claimed.Load() != 2 {
		t.Fatalf("store saw %d claims, want 2 (the miss after the flush)", inner.claimed.Load())
	}
	if st, _ := s.Stats(context.Background()); st.Events != 1 || st.Pending != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// Redis down: intake goes on, on the store alone, and says so.
func TestRedisDownFallsBackToTheStore(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there
	var failures atomic.Int64
	s, err := redis.Open("redis://"+addr+"/0", openSQLite(t), redis.Options{OnError: func(string, error) { failures.Add(1) }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	if claim(t, s, "a").Duplicate || !claim(t, s, "a").Duplicate {
		t.Fatal("without Redis the store must still decide")
	}
	if failures.Load() == 0 {
		t.Fatal("Redis failures were not reported")
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("two claims took %s with Redis down", took)
	}
}

// A Redis left holding another database's keys (a fresh schema, a rebuilt
// server, a previous test run) must not answer for this one: that would
// call a new event a duplicate and lose it.
func TestKeysOfAnotherStoreNeverAnswer(t *testing.T) {
	shared := prefix()
	open := func() *redis.Store {
		s, err := redis.Open(testenv.Redis(t), openSQLite(t), redis.Options{Prefix: shared})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := open(), open()
	defer a.Close()
	defer b.Close()
	if claim(t, a, "k").Duplicate || !claim(t, a, "k").Duplicate {
		t.Fatal("store a")
	}
	if claim(t, b, "k").Duplicate {
		t.Fatal("store b took store a's Redis key for its own: the event would be lost")
	}
}

// A Redis that accepts connections and never answers (a hung server, a
// black-holed network) costs one timeout, then the layer stands aside and
// claims go straight to the store.
func TestHungRedisCostsOneTimeoutNotOnePerClaim(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // hold it open, say nothing
		}
	}()
	var failures atomic.Int64
	s, err := redis.Open("redis://"+ln.Addr().String()+"/0", openSQLite(t), redis.Options{
		Timeout: 200 * time.Millisecond, Backoff: time.Minute,
		OnError: func(string, error) { failures.Add(1) },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	start := time.Now()
	for i := range 20 {
		if claim(t, s, fmt.Sprint("k", i)).Duplicate {
			t.Fatal("a new key was a duplicate")
		}
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("20 claims took %s with a hung Redis: want one timeout, not twenty", took)
	}
	if failures.Load() != 1 {
		t.Fatalf("%d failed Redis calls, want 1 before standing aside", failures.Load())
	}
	if !claim(t, s, "k3").Duplicate {
		t.Fatal("the store must still decide while Redis stands aside")
	}
}

// Redis remembers a key only as long as the store keeps it: the stored
// key's expiry, not the window of the copy that came later (before, each
// duplicate pushed the Redis key past the store's, and after the sweep a
// copy was answered "duplicate" by Redis alone).
func TestRedisNeverOutlivesTheStoredKey(t *testing.T) {
	s := layer(t, openSQLite(t))
	defer s.Close()
	now := time.Now()
	first := ev("short")
	first.ExpiresAt = now.Add(3 * time.Second)
	if _, err := store.ClaimEvents(context.Background(), s, []store.NewEvent{first}); err != nil {
		t.Fatal(err)
	}
	late := ev("short")
	late.ExpiresAt = now.Add(time.Hour)
	c, err := store.ClaimEvents(context.Background(), s, []store.NewEvent{late})
	if err != nil || !c[0].Duplicate {
		t.Fatalf("copy: %+v %v", c, err)
	}
	if d := c[0].ExpiresAt.Sub(first.ExpiresAt); d > time.Millisecond || d < -time.Millisecond {
		t.Fatalf("the duplicate reports expiry %v, want the stored %v", c[0].ExpiresAt, first.ExpiresAt)
	}
	opts, _ := goredis.ParseURL(testenv.Redis(t))
	client := goredis.NewClient(opts)
	defer client.Close()
	keys, err := client.Keys(context.Background(), s.Prefix()+"*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("redis keys %v (%v)", keys, err)
	}
	ttl, err := client.PTTL(context.Background(), keys[0]).Result()
	if err != nil || ttl <= 0 || ttl > 3*time.Second {
		t.Fatalf("Redis keeps the key %s; the store keeps it 3s", ttl)
	}
}
