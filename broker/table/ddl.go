package table

import (
	"fmt"
	"strings"
)

// DDL is the SQL that makes an outbox table (the Debezium layout) and its
// table for rejected rows in db (postgres or mysql), for the user to run
// (`oncehook outbox ddl`); with trigger, on PostgreSQL, also the trigger
// whose NOTIFY on DefaultChannel(table) wakes the consumer at each commit
// that inserted rows, instead of its poll.
//
// The payload is binary (bytea, LONGBLOB): the body is kept byte for
// byte, whatever it holds. The id is text: a UUID, a number or any other
// string the user's code makes. Rejected rows keep their columns, the
// reason intake gave (as counted: malformed, too_large, missing_key, ...)
// and its detail, and when.
func DDL(db, table string, trigger bool) (string, error) {
	if table == "" {
		table = DefaultTable
	}
	if !tableName(table) {
		return "", fmt.Errorf("table %q: %s", table, wantTable)
	}
	s := ConsumeSettings{Table: table}
	s = s.withDefaults()
	var b strings.Builder
	switch db {
	case "postgres", "postgresql":
		d := dialect{postgres: true}
		t, r := d.quote(s.Table), d.quote(s.Rejected)
		fmt.Fprintf(&b, `-- The outbox: your code inserts a row in its own transaction; oncehook
-- takes it once that commits, and deletes it after its own durable commit.
CREATE TABLE IF NOT EXISTS %s (
    id            text PRIMARY KEY,
    aggregatetype text,
    aggregateid   text,
    type          text,
    payload       bytea NOT NULL,
    headers       jsonb
);
-- Rows intake refused (reason as counted), moved aside so they never block.
CREATE TABLE IF NOT EXISTS %s (
    id            text NOT NULL,
    aggregatetype text,
    aggregateid   text,
    type          text,
    payload       bytea,
    headers       text,
    reason        text NOT NULL,
    detail        text NOT NULL,
    rejected_at   timestamptz NOT NULL DEFAULT now()
);
`, t, r)
		if trigger {
			fn := d.quote(s.Table + "_oncehook_notify") // in the table's schema
			name := d.quote("oncehook_notify")
			fmt.Fprintf(&b, `-- Wakes oncehook at the commit of each transaction that inserted rows
-- (a NOTIFY is sent at commit, never for a rollback); without it,
-- oncehook reads the table every poll_interval.
CREATE OR REPLACE FUNCTION %s() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('%s', '');
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS %s ON %s;
CREATE TRIGGER %s AFTER INSERT ON %s
    FOR EACH STATEMENT EXECUTE FUNCTION %s();
`, fn, s.Channel, name, t, name, t, fn)
		}
	case "mysql", "mariadb":
		if trigger {
			return "", fmt.Errorf("--trigger: MySQL and MariaDB have no NOTIFY; oncehook reads the table every poll_interval")
		}
		d := dialect{}
		t, r := d.quote(s.Table), d.quote(s.Rejected)
		fmt.Fprintf(&b, `-- The outbox: your code inserts a row in its own transaction; oncehook
-- takes it once that commits, and deletes it after its own durable commit.
-- MySQL 8 or MariaDB 10.6 and later (SELECT ... FOR UPDATE SKIP LOCKED).
CREATE TABLE IF NOT EXISTS %s (
    id            VARCHAR(255) NOT NULL PRIMARY KEY,
    aggregatetype VARCHAR(255) NULL,
    aggregateid   VARCHAR(255) NULL,
    type          VARCHAR(255) NULL,
    payload       LONGBLOB NOT NULL,
    headers       JSON NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
-- Rows intake refused (reason as counted), moved aside so they never block.
CREATE TABLE IF NOT EXISTS %s (
    seq           BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    id            VARCHAR(255) NOT NULL,
    aggregatetype VARCHAR(255) NULL,
    aggregateid   VARCHAR(255) NULL,
    type          VARCHAR(255) NULL,
    payload       LONGBLOB NULL,
    headers       LONGTEXT NULL,
    reason        VARCHAR(64) NOT NULL,
    detail        TEXT NOT NULL,
    rejected_at   TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
`, t, r)
	default:
		return "", fmt.Errorf("%q: want postgres or mysql", db)
	}
	return b.String(), nil
}
