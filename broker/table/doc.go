// Package table is an outbox table in the user's own database as a source
// (`consume: {table: {url: ..., table: outbox}}`): the user's code, in any
// language, inserts a row into its own table in its own transaction, and
// oncehook takes it once that transaction has committed. Rolled back, the
// row never existed, and nothing is delivered.
//
// The table has the Debezium outbox layout (id, aggregatetype,
// aggregateid, type, payload, headers; the columns can be renamed in the
// settings), on PostgreSQL or MySQL/MariaDB; DDL prints it. Each row is an
// event: its id the key (unless the source's key rules say otherwise),
// its type the event type, its aggregateid the entity `order:` keeps in
// order, its payload the body byte for byte, its headers (a JSON object)
// the headers, which the source's rules may read as a queue's.
//
// What acknowledged means here (invariant 19): the consumer locks a batch
// of rows (SELECT ... FOR UPDATE SKIP LOCKED, so that several replicas
// share one table and none takes a row another holds), hands each to
// intake's core through broker.Intake, and deletes the rows intake has
// committed in the same transaction that locked them. A crash between
// intake's commit and the delete leaves the rows: they are taken again,
// are duplicates, and are deleted then. A row no retry would make
// acceptable (its headers not a JSON object, a payload over the size
// limit, no key) is moved to the rejected table with its reason, in the
// same transaction, and counted as rejected by reason: it never blocks the
// table. A row the store could not take now is left for later, with
// backoff.
//
// Latency: on PostgreSQL the consumer LISTENs on a channel, and the
// trigger DDL prints (with trigger) NOTIFYs it at each commit that
// inserted rows; otherwise, and on MySQL, it reads the table every
// poll_interval (1 s by default).
//
// A reconciliation pass (the user's code inserting again what it is not
// sure was delivered) marks its rows with the header
// Oncehook-Reconcile: true in the headers column (HeaderReconcile): an id
// already stored is then counted as republished, not as a duplicate
// (receive.Envelope.Reconcile), and the mark is taken out of the headers
// the source's rules read.
package table
