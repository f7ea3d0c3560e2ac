package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/oncehook/oncehook/store"
)

// SQLite has one writer per database file. The gateway's writer is one
// connection (Store.write); a caller's own transaction on the file (the
// outbox's PublishTx, an effect in the caller's transaction, both opened
// with _txlock=immediate), a CLI command on the store or another process
// is another connection, and holds the write lock from its BEGIN to its
// end. Meanwhile the writer's BEGIN IMMEDIATE waits in SQLite's busy
// handler, and every webhook's claim waits with it. The wait is bounded by
// the commit's context (the group committer's CommitTimeout), not by the
// busy timeout alone, and it is reported (LockWait) while it lasts.

const (
	// lockWaitMin is the shortest BEGIN counted as a wait for a holder:
	// one that met none takes microseconds (a few milliseconds on a
	// machine short of CPU), and SQLite's busy handler has slept 18 ms by
	// its fifth try. Shorter waits concern nobody.
	lockWaitMin = 10 * time.Millisecond
	// lockWaitJoin: a wait that starts within this of one that gave up
	// (a commit that timed out, and the next one) continues it, so the
	// wait reported is the holder's, not the latest commit's.
	lockWaitJoin = 10 * time.Second
)

// lockWaits tracks the writer's waits for the write lock. One connection
// writes, so one BEGIN waits at a time.
type lockWaits struct {
	mu      sync.Mutex
	began   time.Time // the BEGIN in progress (zero: none)
	since   time.Time // when the wait it belongs to began
	gaveUp  time.Time // when the last wait ended without the lock (zero: it got it)
	settled time.Duration
}

func (w *lockWaits) start(now time.Time) {
	w.mu.Lock()
	if w.gaveUp.IsZero() || now.Sub(w.gaveUp) > lockWaitJoin {
		w.since = now
	}
	w.began = now
	w.mu.Unlock()
}

func (w *lockWaits) end(now time.Time, locked bool) {
	w.mu.Lock()
	if d := now.Sub(w.began); d >= lockWaitMin {
		w.settled += d
	}
	w.began = time.Time{}
	if locked {
		w.gaveUp = time.Time{}
	} else {
		w.gaveUp = now
	}
	w.mu.Unlock()
}

func (w *lockWaits) report(now time.Time) store.LockWait {
	w.mu.Lock()
	defer w.mu.Unlock()
	lw := store.LockWait{Total: w.settled}
	if !w.began.IsZero() {
		if d := now.Sub(w.began); d >= lockWaitMin {
			lw.Total += d // the wait in progress counts as it goes: a counter of it moves during a long one
		}
		if d := now.Sub(w.since); d >= lockWaitMin {
			lw.For = d
		}
	}
	return lw
}

// LockWait implements store.Store.
func (s *Store) LockWait() store.LockWait { return s.waits.report(time.Now()) }

// begin starts an IMMEDIATE transaction on the writer's connection, which
// takes the write lock at once; every write of the writer's begins here,
// so that each of its waits for the lock is seen. When another connection
// holds the lock, the BEGIN waits: SQLite's busy handler gives up after
// busy_timeout (10 s), and the BEGIN is tried again for as long as ctx has
// time left, so a commit waits its own bound, not the busy timeout's. Only
// the BEGIN's own wait is counted as the lock's: the connection is taken
// from the pool first. op names the write in errors. done gives the
// connection back, once the transaction has ended.
//
// A wait that ended without the lock wraps store.ErrLocked and
// store.ErrUnavailable; so does a wait for the connection that ended
// while the write holding it waited for the lock.
func (s *Store) begin(ctx context.Context, op string) (tx *sql.Tx, done func(), err error) {
	conn, err := s.write.Conn(ctx)
	if err != nil {
		if lock := s.LockWait(); lock.For > 0 {
			return nil, nil, locked(op, lock.For, err)
		}
		return nil, nil, unavailable(op, err)
	}
	began := time.Now()
	s.waits.start(began)
	_, bounded := ctx.Deadline()
	for {
		tx, err = conn.BeginTx(ctx, nil)
		if err == nil {
			s.waits.end(time.Now(), true)
			return tx, func() { conn.Close() }, nil
		}
		if !busy(err) || !bounded || ctx.Err() != nil {
			break
		}
	}
	now := time.Now()
	s.waits.end(now, false)
	conn.Close()
	if waited := now.Sub(began); busy(err) || (ctx.Err() != nil && waited >= lockWaitMin) {
		return nil, nil, locked(op, waited, err)
	}
	return nil, nil, unavailable(op, err)
}

func locked(op string, waited time.Duration, err error) error {
	return fmt.Errorf("sqlite: %s: %w: %w (the writer waited %s): %w", op, store.ErrUnavailable, store.ErrLocked, waited.Round(time.Millisecond), err)
}

// execWrite runs one write statement in a transaction of its own, begun
// as every write is (begin), and returns how many rows it changed.
func (s *Store) execWrite(ctx context.Context, op, query string, args ...any) (int, error) {
	tx, done, err := s.begin(ctx, op)
	if err != nil {
		return 0, err
	}
	defer done()
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, unavailable(op, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, unavailable(op, err)
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}

// busy reports whether err is SQLite's "database is locked": its busy
// handler gave up on a lock another connection holds.
func busy(err error) bool {
	var e *sqlite.Error
	return errors.As(err, &e) && e.Code()&0xff == sqlite3.SQLITE_BUSY
}
