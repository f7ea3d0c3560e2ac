package table

import (
	"database/sql"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/oncehook/oncehook/internal/redact"
)

// dialect is what differs between PostgreSQL and MySQL/MariaDB: how a
// connection is opened, and how SQL names things and numbers parameters.
// Everything else (the statements, the transaction) is the same.
type dialect struct {
	name     string // postgres or mysql
	postgres bool
	pg       *pgx.ConnConfig // PostgreSQL's, also for LISTEN
	my       *mysql.Config
}

const connectTimeout = 5 * time.Second

// dialectOf reads a checked URL.
func dialectOf(raw string) (dialect, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return dialect{}, fmt.Errorf("url %s: %w", redact.URL(raw), err)
	}
	switch u.Scheme {
	case "postgres", "postgresql":
		cfg, err := pgx.ParseConfig(raw)
		if err != nil {
			return dialect{}, fmt.Errorf("url %s: %w", redact.URL(raw), redact.Error(err))
		}
		if cfg.ConnectTimeout == 0 {
			cfg.ConnectTimeout = connectTimeout
		}
		return dialect{name: "postgres", postgres: true, pg: cfg}, nil
	case "mysql":
		// mysql://user:password@host:port/db?param=value, as a DSN
		// (user:password@tcp(host:port)/db?param=value): the driver's
		// own parser reads the address, database and parameters; the
		// user and password are set apart, so that neither may hold what
		// a DSN would read as a separator.
		host := u.Host
		if u.Port() == "" {
			host += ":3306"
		}
		cfg, err := mysql.ParseDSN("tcp(" + host + ")/" + strings.Trim(u.Path, "/") + "?" + u.RawQuery)
		if err != nil {
			return dialect{}, fmt.Errorf("url %s: %w", redact.URL(raw), err)
		}
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
		if cfg.Timeout == 0 {
			cfg.Timeout = connectTimeout
		}
		return dialect{name: "mysql", my: cfg}, nil
	}
	return dialect{}, fmt.Errorf("url %s: want postgres:// or mysql://", redact.URL(raw))
}

// open is a pool on the database; it does not connect yet.
func (d dialect) open() (*sql.DB, error) {
	if d.postgres {
		return stdlib.OpenDB(*d.pg.Copy()), nil
	}
	conn, err := mysql.NewConnector(d.my.Clone())
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(conn), nil
}

// quote is a (schema.)name as the database reads it whatever it holds:
// the settings' check allows only identifiers, and quoting keeps one that
// is a reserved word (type, order) a name.
func (d dialect) quote(name string) string {
	q := `"`
	if !d.postgres {
		q = "`"
	}
	parts := strings.Split(name, ".")
	for i, p := range parts {
		parts[i] = q + p + q
	}
	return strings.Join(parts, ".")
}

// param is the n-th (from 1) parameter's placeholder.
func (d dialect) param(n int) string {
	if d.postgres {
		return fmt.Sprintf("$%d", n)
	}
	return "?"
}

// params is n placeholders from the first, comma-separated.
func (d dialect) params(first, n int) string {
	p := make([]string, n)
	for i := range p {
		p[i] = d.param(first + i)
	}
	return strings.Join(p, ", ")
}

// statements are a table's SQL, written once from its settings.
type statements struct {
	// take locks up to $1 rows no other consumer holds, in order.
	take string
	// probe reads no row of each table: whether they are there.
	probe, probeRejected string
	// moveAside copies a row ($3: its id) to the rejected table with its
	// reason ($1) and detail ($2).
	moveAside string
	d         dialect
	table, id string
}

func newStatements(d dialect, s ConsumeSettings) statements {
	c := s.Columns
	headers := "NULL"
	if c.Headers != NoColumn {
		headers = d.quote(c.Headers)
	}
	cols := strings.Join([]string{d.quote(c.ID), d.quote(c.AggregateType), d.quote(c.AggregateID),
		d.quote(c.Type), d.quote(c.Payload), headers}, ", ")
	t, r := d.quote(s.Table), d.quote(s.Rejected)
	return statements{
		// READ COMMITTED (Begin's), so that MySQL takes no gap lock: the
		// user's inserts never wait for a batch in flight. SKIP LOCKED:
		// rows another consumer holds are that consumer's; nobody waits.
		take: fmt.Sprintf("SELECT %s FROM %s ORDER BY %s LIMIT %s FOR UPDATE SKIP LOCKED",
			cols, t, d.quote(s.OrderBy), d.param(1)),
		probe: fmt.Sprintf("SELECT %s FROM %s WHERE 1 = 0", cols, t),
		probeRejected: fmt.Sprintf("SELECT id, aggregatetype, aggregateid, type, payload, headers, reason, detail, rejected_at FROM %s WHERE 1 = 0",
			r),
		moveAside: fmt.Sprintf("INSERT INTO %s (id, aggregatetype, aggregateid, type, payload, headers, reason, detail) SELECT %s, %s, %s FROM %s WHERE %s = %s",
			r, cols, d.param(1), d.param(2), t, d.quote(c.ID), d.param(3)),
		d: d, table: t, id: d.quote(c.ID),
	}
}

// remove deletes n rows by id.
func (s statements) remove(n int) string {
	return fmt.Sprintf("DELETE FROM %s WHERE %s IN (%s)", s.table, s.id, s.d.params(1, n))
}

// Open is a pool on the database a table source's url names (postgres://
// or mysql://), opened as the consumer opens it: for the user's own tools
// and tests that write the outbox in Go. It does not connect yet.
func Open(url string) (*sql.DB, error) {
	d, err := dialectOf(url)
	if err != nil {
		return nil, err
	}
	return d.open()
}
