package store

import "context"

// TxDriver works inside a transaction the caller opened on the backend's
// database, the way River's drivers do: the effects ledger's operations
// (effect.NewTx) and the outbox's events (oncehook's Outbox) commit or
// roll back with the caller's own writes. Each backend provides one for
// its transaction type (postgres.TxDriver for a pgx.Tx, sqlite.TxDriver
// for a *sql.Tx), so that neither the ledger nor the outbox depends on a
// backend.
type TxDriver[TTx any] interface {
	// ApplyEffect applies one effects ledger operation in tx.
	ApplyEffect(ctx context.Context, tx TTx, op EffectOp) (EffectResult, error)

	// ClaimEvents claims events in tx as Commit claims Batch.Events, with
	// the same statements: each (source, key) by the unique constraint
	// (INSERT ... ON CONFLICT DO NOTHING), and each one new stored with a
	// pending delivery per destination, due at its ReceivedAt and leased
	// to nobody (a worker of the gateway leases it once tx commits:
	// PostgreSQL's NOTIFY rides the commit, SQLite's worker finds it when
	// it next looks). A key already committed is a Duplicate and writes
	// nothing; a key another open transaction holds waits for it (the
	// store decides, as for intake). Nothing is durable before the
	// caller's commit, and nothing stays after its rollback.
	ClaimEvents(ctx context.Context, tx TTx, events []NewEvent) ([]Claim, error)

	// AddCounts adds hourly counters and duplicate copies in tx, as a
	// Commit's Stats and Copies, under rows no other open transaction
	// writes (so that publishers never wait on each other's counters):
	// what a publish counts is counted exactly when it commits.
	AddCounts(ctx context.Context, tx TTx, stats []StatDelta, copies []Copy) error
}
