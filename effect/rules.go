package effect

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/oncehook/oncehook/store"
)

// checked is a call turned into its store operation, or refused (err).
type checked struct {
	op  store.EffectOp
	err error
}

// rules turn a call into the store operation it stands for, or refuse it:
// the one set of checks and defaults for every path (in process, in the
// caller's transaction, and over HTTP, whose handler is a Local), so that
// the same request gets the same answer however it arrives.
type rules struct{ opts Options }

// stamp sets what an operation takes from the ledger's options: the time,
// and how long key's final record is kept (RetentionByPrefix).
func (r rules) stamp(op store.EffectOp) store.EffectOp {
	op.Now = r.opts.Now()
	op.Retention = r.opts.retention(op.Key)
	return op
}

func (r rules) lease(d time.Duration) (time.Duration, error) {
	if d == 0 {
		d = DefaultLease
	}
	if d <= 0 || d > r.opts.MaxLease {
		return 0, &InvalidError{"lease", fmt.Sprintf("%s: want more than 0 and at most %s", d, r.opts.MaxLease)}
	}
	return d, nil
}

func (r rules) claim(key string, o ClaimOptions) checked {
	op := store.EffectOp{Kind: store.EffectClaim, Key: key, Fingerprint: o.Fingerprint, Deadline: o.Deadline}
	if err := ValidKey(key); err != nil {
		return checked{op, err}
	}
	lease, err := r.lease(o.Lease)
	if err != nil {
		return checked{op, err}
	}
	op.Lease = lease
	return checked{op, validFingerprint(o.Fingerprint)}
}

func (r rules) complete(key, token string, result json.RawMessage) checked {
	if len(result) == 0 {
		result = json.RawMessage("null")
	}
	op := store.EffectOp{Kind: store.EffectComplete, Key: key, Token: token, Result: result}
	if err := ValidKey(key); err != nil {
		return checked{op, err}
	}
	if err := validToken(token); err != nil {
		return checked{op, err}
	}
	if len(result) > r.opts.MaxResult {
		return checked{op, &InvalidError{"result", fmt.Sprintf("%d bytes; at most %d", len(result), r.opts.MaxResult)}}
	}
	if !json.Valid(result) {
		return checked{op, &InvalidError{"result", "not JSON"}}
	}
	return checked{op, nil}
}

// end is a Release or a Fail.
func (r rules) end(kind store.EffectOpKind, key, token, reason string) checked {
	op := store.EffectOp{Kind: kind, Key: key, Token: token, Error: reason}
	if err := ValidKey(key); err != nil {
		return checked{op, err}
	}
	if err := validToken(token); err != nil {
		return checked{op, err}
	}
	return checked{op, validReason(reason)}
}

func (r rules) renew(key, token string, lease time.Duration) checked {
	op := store.EffectOp{Kind: store.EffectRenew, Key: key, Token: token}
	if err := ValidKey(key); err != nil {
		return checked{op, err}
	}
	if err := validToken(token); err != nil {
		return checked{op, err}
	}
	var err error
	op.Lease, err = r.lease(lease)
	return checked{op, err}
}
