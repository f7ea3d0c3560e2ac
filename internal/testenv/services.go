package testenv

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresBase is the server tests use; ONCEHOOK_TEST_POSTGRES overrides it.
func PostgresBase() string {
	return fromEnv("ONCEHOOK_TEST_POSTGRES", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
}

// RedisBase is the server tests use; ONCEHOOK_TEST_REDIS overrides it.
func RedisBase() string {
	return fromEnv("ONCEHOOK_TEST_REDIS", "redis://127.0.0.1:6379/0")
}

// fromEnv is the variable name's value, or def when it is unset: where a
// test service is, as a machine may override it.
func fromEnv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// reachable returns base after checking that its host accepts a TCP
// connection; a test that needs what (named in the message) is skipped,
// or failed under CI, when it does not.
func reachable(t testing.TB, what, base string) string {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.DialTimeout("tcp", u.Host, 2*time.Second)
	if err != nil {
		unavailable(t, what, err)
	}
	conn.Close()
	return base
}

// unavailable skips a test that needs a service this machine lacks, but
// fails it under CI, where the service must be there.
func unavailable(t testing.TB, what string, err error) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is required under CI: %v", what, err)
	}
	t.Skipf("%s not reachable (%v); set CI=1 to make this a failure", what, err)
}

// Postgres returns a URL to a fresh, empty schema of the test server,
// dropped when the test ends.
func Postgres(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, PostgresBase())
	if err != nil {
		unavailable(t, "PostgreSQL", err)
	}
	var b [6]byte
	rand.Read(b[:])
	schema := "oncehook_test_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		conn.Close(ctx)
		t.Fatal(err)
	}
	conn.Close(ctx)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if conn, err := pgx.Connect(ctx, PostgresBase()); err == nil {
			conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
			conn.Close(ctx)
		}
	})
	u, err := url.Parse(PostgresBase())
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// Redis returns the test Redis server's URL, after checking it answers.
func Redis(t testing.TB) string {
	t.Helper()
	return reachable(t, "Redis", RedisBase())
}

// MySQLBase is the MySQL or MariaDB server tests use (as a table source's
// url: reads it); ONCEHOOK_TEST_MYSQL overrides it.
func MySQLBase() string {
	return fromEnv("ONCEHOOK_TEST_MYSQL", "mysql://root@127.0.0.1:3306/test")
}

// MySQL returns the test MySQL or MariaDB server's URL, after checking it
// accepts a connection (CI starts one: .ci/run).
func MySQL(t testing.TB) string {
	t.Helper()
	return reachable(t, "MariaDB", MySQLBase())
}
