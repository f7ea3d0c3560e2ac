// Package sqlitetest is what tests do to a gateway's SQLite file from
// outside, as another process would. It stands apart from testenv so that
// only the tests that need the SQLite driver link it.
package sqlitetest

import (
	"context"
	"database/sql"
	"sync"
	"testing"

	_ "modernc.org/sqlite" // to hold a gateway's database from outside, as another process would
)

// Lock takes the write lock of the SQLite database at path from a
// connection of its own, as another process would: from then on the
// gateway's writer can commit nothing. It waits (up to 10s) for a writer
// that is mid-commit rather than failing at once with "database is
// locked". unlock rolls back and closes the connection, letting the writer
// go; the test's end does the same if it has not.
func Lock(t testing.TB, path string) (unlock func() error) {
	t.Helper()
	ctx := context.Background()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "PRAGMA busy_timeout = 10000"); err != nil {
		conn.Close()
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		conn.Close()
		t.Fatal(err)
	}
	var once sync.Once
	var rolledBack error
	unlock = func() error {
		once.Do(func() {
			_, rolledBack = conn.ExecContext(ctx, "ROLLBACK")
			conn.Close()
		})
		return rolledBack
	}
	t.Cleanup(func() { unlock() })
	return unlock
}

// Open opens the SQLite file at path as a shop's own code would to publish
// through the outbox: its writes wait for the gateway's (busy_timeout), are
// durable (synchronous FULL) and take the write lock at BEGIN
// (_txlock=immediate). It is closed when the test ends.
func Open(tb testing.TB, path string) *sql.DB {
	tb.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=synchronous(FULL)&_txlock=immediate")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}
