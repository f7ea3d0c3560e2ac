package effect

import (
	"context"
	"encoding/json"

	"github.com/oncehook/oncehook/store"
)

// TxLedger is the ledger inside the caller's own transactions, on
// oncehook's database, the way River's InsertTx works: "mark
// done" commits or rolls back together with the caller's domain write (an
// order marked "reminder sent", a row in an outbox table). TTx is the
// backend's transaction type, and the backend provides the driver that
// applies the ledger's operations in it: postgres.TxDriver for a pgx.Tx,
// sqlite.TxDriver for a *sql.Tx on the SQLite file (opened with
// _txlock=immediate, so that it holds the write lock from its start).
//
// It takes the same Options as New, and checks every call by the same
// rules (limits, retention by key prefix) as the in-process and HTTP
// ledgers.
//
// Over HTTP (NewClient) the ledger cannot join the caller's transaction: a
// crash between the caller's commit and Complete leaves the key pending, and
// its lease expires. What covers that is the key itself: send it downstream
// as that API's idempotency key (Meta CAPI's event_id, a payment provider's
// Idempotency-Key), so a repeat is deduplicated there, and the
// reconciliation list (pending, and those whose lease expired) shows what
// was left halfway.
type TxLedger[TTx any] struct {
	rules
	driver store.TxDriver[TTx]
}

// NewTx returns the ledger that works in transactions of the driver's kind.
// opts.Commit is not used: the caller's transaction is the commit.
func NewTx[TTx any](driver store.TxDriver[TTx], opts Options) *TxLedger[TTx] {
	opts.defaults()
	return &TxLedger[TTx]{rules: rules{opts}, driver: driver}
}

func (l *TxLedger[TTx]) apply(ctx context.Context, tx TTx, c checked) (store.EffectResult, error) {
	if c.err != nil {
		return store.EffectResult{}, c.err
	}
	return l.driver.ApplyEffect(ctx, tx, l.stamp(c.op))
}

func (l *TxLedger[TTx]) do(ctx context.Context, tx TTx, c checked) error {
	res, err := l.apply(ctx, tx, c)
	if err != nil {
		return err
	}
	return errorOf(res)
}

// Claim claims key in tx, as Ledger's Claim does.
func (l *TxLedger[TTx]) Claim(ctx context.Context, tx TTx, key string, opts ClaimOptions) (Claim, error) {
	res, err := l.apply(ctx, tx, l.claim(key, opts))
	if err != nil {
		return Claim{}, err
	}
	return claimOf(res)
}

// Complete marks key done with result in tx, as Ledger's Complete does.
func (l *TxLedger[TTx]) Complete(ctx context.Context, tx TTx, key, token string, result json.RawMessage) error {
	return l.do(ctx, tx, l.complete(key, token, result))
}

// Release gives the lease back in tx, as Ledger's Release does.
func (l *TxLedger[TTx]) Release(ctx context.Context, tx TTx, key, token, reason string) error {
	return l.do(ctx, tx, l.end(store.EffectRelease, key, token, reason))
}

// Fail marks key failed for good in tx, as Ledger's Fail does.
func (l *TxLedger[TTx]) Fail(ctx context.Context, tx TTx, key, token, reason string) error {
	return l.do(ctx, tx, l.end(store.EffectFail, key, token, reason))
}
