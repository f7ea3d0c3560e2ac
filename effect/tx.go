package effect

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncehook/oncehook/store"
	"github.com/oncehook/oncehook/store/postgres"
	"github.com/oncehook/oncehook/store/sqlite"
)

// The outbox: ClaimTx and CompleteTx run inside the caller's own
// transaction, on oncehook's database, so that "mark done" commits or rolls
// back together with the caller's domain write (an order marked "reminder
// sent", a row in an outbox table), the way River's InsertTx does. tx is a
// pgx.Tx on PostgreSQL, or a *sql.Tx on the SQLite file (opened with
// _txlock=immediate, so that it holds the write lock from its start).
//
// Over HTTP (NewClient) the ledger cannot join the caller's transaction: a
// crash between the caller's commit and Complete leaves the key pending, and
// its lease expires. What covers that is the key itself: send it downstream
// as that API's idempotency key (Meta CAPI's event_id, a payment provider's
// Idempotency-Key), so a repeat is deduplicated there, and the
// reconciliation list (pending and stale) shows what was left halfway.

// ClaimTx claims key in tx. Lease and deadline are as for Ledger.Claim.
func ClaimTx(ctx context.Context, tx any, key string, opts ClaimOptions) (Claim, error) {
	if err := ValidKey(key); err != nil {
		return Claim{}, err
	}
	if opts.Lease == 0 {
		opts.Lease = DefaultLease
	}
	if opts.Lease <= 0 || opts.Lease > DefaultMaxLease {
		return Claim{}, &InvalidError{"lease", fmt.Sprintf("%s: want more than 0 and at most %s", opts.Lease, DefaultMaxLease)}
	}
	if err := validFingerprint(opts.Fingerprint); err != nil {
		return Claim{}, err
	}
	res, err := applyTx(ctx, tx, store.EffectOp{Kind: store.EffectClaim, Key: key, Lease: opts.Lease, Fingerprint: opts.Fingerprint, Deadline: opts.Deadline})
	if err != nil {
		return Claim{}, err
	}
	return claimOf(res)
}

// CompleteTx marks key done with result in tx; the record is kept for
// DefaultRetention.
func CompleteTx(ctx context.Context, tx any, key, token string, result json.RawMessage) error {
	if err := ValidKey(key); err != nil {
		return err
	}
	if err := validToken(token); err != nil {
		return err
	}
	if len(result) == 0 {
		result = json.RawMessage("null")
	}
	if len(result) > DefaultMaxResult || !json.Valid(result) {
		return &InvalidError{"result", fmt.Sprintf("want JSON of at most %d bytes", DefaultMaxResult)}
	}
	res, err := applyTx(ctx, tx, store.EffectOp{Kind: store.EffectComplete, Key: key, Token: token, Result: result})
	if err != nil {
		return err
	}
	return errorOf(res)
}

func applyTx(ctx context.Context, tx any, op store.EffectOp) (store.EffectResult, error) {
	op.Now = time.Now()
	op.Retention = DefaultRetention
	switch t := tx.(type) {
	case pgx.Tx:
		return postgres.EffectTx(ctx, t, op)
	case *sql.Tx:
		return sqlite.EffectTx(ctx, t, op)
	}
	return store.EffectResult{}, fmt.Errorf("effect: a transaction of type %T: want a pgx.Tx (PostgreSQL) or a *sql.Tx (SQLite)", tx)
}
