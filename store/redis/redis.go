// Package redis puts Redis in front of a store as a hot dedup layer shared
// by every replica.
//
// Redis is never the arbiter. It holds only keys the store has already
// committed, each until the stored key's own expiry (the store says when; a
// duplicate's copy never extends it), so a hit is a duplicate for certain
// and is answered without touching the store; a miss goes through the
// store's atomic claim as if Redis were not there. Hence:
//   - Redis flushed or restarted: every key is a miss, the store still
//     decides, and no duplicate gets through; intake is only slower.
//   - Redis down or slow: its errors count as misses (logged and counted),
//     and intake goes on on the store alone. Redis never causes a 5xx. After
//     a failure the layer stands aside for a second (Backoff), so a Redis
//     that hangs costs one timeout, not one per batch.
package redis

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/oncehook/oncehook/store"
)

// Options tune the layer.
type Options struct {
	// Prefix namespaces oncehook's keys in a shared Redis (default "oncehook:").
	Prefix string
	// Timeout bounds each Redis round trip, so a slow Redis cannot hold
	// intake up (default 100ms).
	Timeout time.Duration
	// Backoff is how long the layer stands aside after a failed call
	// (default 1s); claims go straight to the store meanwhile.
	Backoff time.Duration
	Logger  *slog.Logger
	// OnHit and OnError, when set, are told of each hit and each failed
	// Redis call, for metrics.
	OnHit   func(n int)
	OnError func(op string, err error)
}

// Store is a store.Store with a Redis hot layer in front of the claims of
// Commit. It embeds the store it wraps, so everything else (the operator's
// queries, flow control, sessions, and Listen when the inner store has it)
// is the wrapped store's own.
type Store struct {
	store.Store
	client *goredis.Client
	opts   Options
	// asideUntil (unix nanos) is when Redis may be tried again after a
	// failure.
	asideUntil atomic.Int64
}

// Open connects to the Redis at url (redis://host:port/db) and wraps inner.
// A Redis that is down at start is not an error: the layer misses until it
// is back.
func Open(url string, inner store.Store, opts Options) (*Store, error) {
	ro, err := goredis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 100 * time.Millisecond
	}
	ro.DialTimeout, ro.ReadTimeout, ro.WriteTimeout = opts.Timeout, opts.Timeout, opts.Timeout
	ro.MaxRetries = -1 // a miss is cheaper than a retry: the store is there
	return Wrap(goredis.NewClient(ro), inner, opts), nil
}

// Wrap puts client in front of inner.
func Wrap(client *goredis.Client, inner store.Store, opts Options) *Store {
	if opts.Prefix == "" {
		opts.Prefix = "oncehook:"
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 100 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Backoff <= 0 {
		opts.Backoff = time.Second
	}
	return &Store{Store: inner, client: client, opts: opts}
}

// redisKey names a committed key in Redis: the prefix, then the store's
// identity (so keys left by another database never answer for this one),
// then source and key.
func (s *Store) redisKey(e store.NewEvent) string {
	return s.opts.Prefix + s.Store.ID() + ":" + e.Source + "\x00" + e.Key
}

// Prefix is the namespace of this layer's keys in Redis.
func (s *Store) Prefix() string { return s.opts.Prefix }

func (s *Store) failed(op string, err error) {
	s.asideUntil.Store(time.Now().Add(s.opts.Backoff).UnixNano())
	s.opts.Logger.Warn("redis hot layer unavailable; the store alone decides", "op", op, "err", err)
	if s.opts.OnError != nil {
		s.opts.OnError(op, err)
	}
}

// Commit implements store.Store: the batch's events that Redis knows are
// duplicates; the rest of the batch (misses, outcomes, leases) goes to the
// wrapped store; what it commits (new or duplicate) is remembered.
func (s *Store) Commit(ctx context.Context, b store.Batch) (store.Committed, error) {
	events := b.Events
	claims := make([]store.Claim, len(events))
	var lookup []string
	var lookupIdx []int
	for i, e := range events {
		if !e.Keyless {
			lookup = append(lookup, s.redisKey(e))
			lookupIdx = append(lookupIdx, i)
		}
	}
	hit := make([]bool, len(events))
	aside := time.Now().UnixNano() < s.asideUntil.Load()
	if len(lookup) > 0 && !aside {
		rctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
		vals, err := s.client.MGet(rctx, lookup...).Result()
		cancel()
		if err != nil {
			s.failed("mget", err)
			aside = true // and do not try to remember either
		} else {
			hits := 0
			for j, v := range vals {
				// The value is the stored expiry (unix ms); anything else
				// was not written by this layer and is not trusted.
				text, _ := v.(string)
				expires, err := strconv.ParseInt(text, 10, 64)
				if v == nil || err != nil || expires <= time.Now().UnixMilli() {
					continue
				}
				i := lookupIdx[j]
				hit[i] = true
				claims[i] = store.Claim{Duplicate: true, ExpiresAt: time.UnixMilli(expires)}
				hits++
			}
			if hits > 0 && s.opts.OnHit != nil {
				s.opts.OnHit(hits)
			}
		}
	}
	var misses []store.NewEvent
	var missIdx []int
	for i, e := range events {
		if hit[i] {
			continue
		}
		misses = append(misses, e)
		missIdx = append(missIdx, i)
	}
	b.Events = misses
	got, err := s.Store.Commit(ctx, b)
	if err != nil {
		return store.Committed{}, err
	}
	for j, c := range got.Claims {
		claims[missIdx[j]] = c
	}
	if !aside && len(misses) > 0 {
		s.remember(ctx, misses, got.Claims)
	}
	got.Claims = claims
	if len(events) == 0 {
		got.Claims = nil
	}
	return got, nil
}

// remember records committed keys until the stored expiry the store
// reported for each; a key whose expiry the store could not say is left out.
func (s *Store) remember(ctx context.Context, events []store.NewEvent, claims []store.Claim) {
	now := time.Now()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.Timeout)
	defer cancel()
	pipe := s.client.Pipeline()
	queued := 0
	for i, e := range events {
		expires := claims[i].ExpiresAt
		if e.Keyless || !expires.After(now) {
			continue
		}
		pipe.SetArgs(rctx, s.redisKey(e), strconv.FormatInt(expires.UnixMilli(), 10), goredis.SetArgs{ExpireAt: expires})
		queued++
	}
	if queued == 0 {
		return
	}
	if _, err := pipe.Exec(rctx); err != nil {
		s.failed("set", err)
	}
}

// Close closes the Redis client and the wrapped store.
func (s *Store) Close() error {
	s.client.Close()
	return s.Store.Close()
}
