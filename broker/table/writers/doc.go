// Package writers holds writers of an outbox table in three languages other
// than Go (writer.py through psycopg2 on PostgreSQL, writer.mjs through pg on
// PostgreSQL, writer.php through PDO on MariaDB), and the test that drives
// them against real gateway processes: issue 43's proof that a table source
// delivers what any language commits once, and what it rolls back never.
//
// They live beside the table source they exercise rather than under
// examples/: each is a program a user could copy (one order and its outbox
// row per transaction, a retry that is the same key), but their knobs (a
// fifth rolled back, a tenth retried) are the test's. The test is a package
// of its own so that it stays out of the root package's and cmd/oncehook's
// test runs, CI's longest.
package writers
