package effect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/oncehook/oncehook/store"
)

// Ledger is the effects ledger, in-process (New) or over HTTP (NewClient).
// Both behave the same; the HTTP one reaches a running gateway's API.
type Ledger interface {
	// Claim takes key's lease, or says why not: a Claim with AlreadyDone set
	// (done before: use its Result instead of doing the work again), or an
	// error: *BusyError (another owner holds the lease), *FailedError
	// (failed for good), ErrFingerprint (the key was claimed for another
	// request), ErrExpired (its deadline passed), or *InvalidError.
	Claim(ctx context.Context, key string, opts ClaimOptions) (Claim, error)
	// Complete marks key done with result (JSON), which later claims get
	// back byte for byte. Completing twice with the same token is fine; a
	// token that is not the owner's any more gets ErrStaleToken.
	Complete(ctx context.Context, key, token string, result json.RawMessage) error
	// Release gives the lease back after a retryable failure: key is
	// claimable again at once, as the next attempt.
	Release(ctx context.Context, key, token, reason string) error
	// Fail marks key failed for good; only an operator's reset reopens it.
	Fail(ctx context.Context, key, token, reason string) error
	// Renew extends the lease for long work (by DefaultLease when lease is
	// 0) and returns its new expiry.
	Renew(ctx context.Context, key, token string, lease time.Duration) (time.Time, error)
	// Get returns key's record, with its attempts, or ErrNotFound.
	Get(ctx context.Context, key string) (Record, error)
}

// ClaimOptions tune a claim.
type ClaimOptions struct {
	// Lease is how long the claim is the caller's (default DefaultLease).
	// Renew it for longer work; once it expires, the next claim takes over.
	Lease time.Duration
	// Fingerprint, when set, is a hash of the request the key stands for:
	// the same key claimed with another fingerprint is refused
	// (ErrFingerprint), which catches a key that is too coarse.
	Fingerprint string
	// Deadline, when set, is when the effect stops being worth doing (an
	// ad platform dedupes conversions only inside a window): after it, a
	// key never done is expired, and claims get ErrExpired.
	Deadline time.Time
}

// Claim is a successful claim.
type Claim struct {
	// Owned: the caller holds the lease, under Token, until LeaseExpiresAt.
	Token          string
	Attempt        int
	LeaseExpiresAt time.Time
	// Reclaimed says the previous owner's lease expired without a word (it
	// crashed, or hung): check the outside world (was the message sent?)
	// before acting again.
	Reclaimed bool

	// AlreadyDone: the key was done before; Result is what its owner stored.
	// Nothing is owned, and there is nothing to complete.
	AlreadyDone bool
	Result      json.RawMessage
}

// Record is what the ledger keeps for a key.
type Record struct {
	Key            string     `json:"key"`
	State          string     `json:"state"` // pending, done, failed, expired
	Attempt        int        `json:"attempt"`
	LeaseExpiresAt *time.Time `json:"lease_expires_at,omitempty"`
	LeaseExpired   bool       `json:"lease_expired,omitempty"` // pending, its lease expired: left halfway
	// Stale is LeaseExpired under its old name, which also named an
	// ordered delivery held back.
	//
	// Deprecated: read LeaseExpired; stale is written for one release more.
	Stale       bool            `json:"stale,omitempty"`
	Fingerprint string          `json:"fingerprint,omitempty"`
	Deadline    *time.Time      `json:"deadline,omitempty"`
	Result      json.RawMessage `json:"result,omitempty"`
	Error       string          `json:"error,omitempty"`
	CreatedAt   time.Time       `json:"created_at"`
	UpdatedAt   time.Time       `json:"updated_at"`
	Attempts    []Attempt       `json:"attempts,omitempty"`
}

// Attempt is one claim that took the lease, and how it ended.
type Attempt struct {
	Attempt   int        `json:"attempt"`
	ClaimedAt time.Time  `json:"claimed_at"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
	Outcome   string     `json:"outcome,omitempty"` // done, released, failed, lease_expired; empty while held
	Error     string     `json:"error,omitempty"`
}

// Errors of the ledger. Use errors.Is, and errors.As for the typed ones.
var (
	ErrBusy        = errors.New("effect: another owner holds the lease")
	ErrFailed      = errors.New("effect: failed for good")
	ErrFingerprint = errors.New("effect: the key was claimed with another fingerprint")
	ErrExpired     = errors.New("effect: its deadline passed before it was done")
	ErrStaleToken  = errors.New("effect: the token is not the owner's (the lease expired and was taken over, or was released)")
	ErrNotFound    = errors.New("effect: no such key")
	ErrConflict    = errors.New("effect: the record is not in a state this operation applies to")
	ErrInvalid     = errors.New("effect: invalid request")
)

// BusyError is ErrBusy with when the current lease expires.
type BusyError struct{ RetryAfter time.Time }

func (e *BusyError) Error() string {
	return fmt.Sprintf("%v until %s", ErrBusy, e.RetryAfter.Format(time.RFC3339Nano))
}
func (e *BusyError) Unwrap() error { return ErrBusy }

// FailedError is ErrFailed with the owner's reason.
type FailedError struct{ Reason string }

func (e *FailedError) Error() string { return fmt.Sprintf("%v: %s", ErrFailed, e.Reason) }
func (e *FailedError) Unwrap() error { return ErrFailed }

// InvalidError is ErrInvalid with the field at fault.
type InvalidError struct{ Field, Reason string }

func (e *InvalidError) Error() string { return fmt.Sprintf("effect: %s: %s", e.Field, e.Reason) }
func (e *InvalidError) Unwrap() error { return ErrInvalid }

// Limits and defaults.
const (
	MaxKeyLen        = 512
	MaxFingerprint   = 256
	MaxReason        = 4096
	DefaultLease     = 30 * time.Second
	DefaultMaxLease  = time.Hour
	DefaultMaxResult = 1 << 20
	DefaultRetention = 30 * 24 * time.Hour
)

// Options configure an in-process ledger.
type Options struct {
	// Retention is how long a final record (done, failed, expired) is kept
	// for later claims (default 30 days); RetentionByPrefix overrides it
	// for keys with a prefix (the longest prefix wins).
	Retention         time.Duration
	RetentionByPrefix map[string]time.Duration
	// MaxLease bounds a lease (default 1 hour); MaxResult, a result's size
	// (default 1 MiB).
	MaxLease  time.Duration
	MaxResult int
	// Commit applies operations, many in one transaction: the gateway's
	// writer. Nil: each operation commits on its own.
	Commit func(ctx context.Context, ops []store.EffectOp) ([]store.EffectResult, error)
	Now    func() time.Time
}

func (o *Options) defaults() {
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.MaxLease <= 0 {
		o.MaxLease = DefaultMaxLease
	}
	if o.MaxResult <= 0 {
		o.MaxResult = DefaultMaxResult
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// retention is how long key's final record is kept.
func (o *Options) retention(key string) time.Duration {
	best, d := -1, o.Retention
	for p, r := range o.RetentionByPrefix {
		if strings.HasPrefix(key, p) && len(p) > best {
			best, d = len(p), r
		}
	}
	return d
}

// Local is the in-process ledger over a store.
type Local struct {
	rules
	store store.Store
}

var _ Ledger = (*Local)(nil)

// New returns the in-process ledger over s. A Gateway's Effects() is one,
// sharing the gateway's writer; one made here on a bare store commits each
// operation on its own.
func New(s store.Store, opts Options) *Local {
	opts.defaults()
	if opts.Commit == nil {
		opts.Commit = func(ctx context.Context, ops []store.EffectOp) ([]store.EffectResult, error) {
			c, err := s.Commit(ctx, store.Batch{Effects: ops})
			return c.Effects, err
		}
	}
	return &Local{rules: rules{opts}, store: s}
}

// ValidKey checks a business key: 1 to 512 bytes of UTF-8, without control
// or invisible characters: no C0 or C1 control (U+0085 included), no
// format character (bidi controls such as U+202E, zero-width spaces and
// joiners, the BOM) and no line or paragraph separator. A key travels in
// URLs, logs and the dashboard and downstream as an idempotency key: two
// keys that look alike there must be the same key.
func ValidKey(key string) error {
	switch {
	case key == "":
		return &InvalidError{"key", "empty"}
	case len(key) > MaxKeyLen:
		return &InvalidError{"key", fmt.Sprintf("%d bytes; at most %d", len(key), MaxKeyLen)}
	case !utf8.ValidString(key):
		return &InvalidError{"key", "not UTF-8"}
	}
	for _, r := range key {
		switch {
		case unicode.IsControl(r):
			return &InvalidError{"key", fmt.Sprintf("holds the control character %U", r)}
		case unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp):
			return &InvalidError{"key", fmt.Sprintf("holds the invisible character %U", r)}
		}
	}
	return nil
}

// validText checks a text field the ledger stores (an error, a
// fingerprint): at most max bytes of UTF-8 without NUL. PostgreSQL's text
// cannot hold a NUL and SQLite's can, so the ledger refuses it before any
// store sees it: every backend answers alike (400, naming the field).
func validText(field, s string, max int) error {
	switch {
	case len(s) > max:
		return &InvalidError{field, fmt.Sprintf("%d bytes; at most %d", len(s), max)}
	case !utf8.ValidString(s):
		return &InvalidError{field, "not UTF-8"}
	case strings.IndexByte(s, 0) >= 0:
		return &InvalidError{field, "holds a NUL character (U+0000), which no store keeps"}
	}
	return nil
}

func validToken(token string) error {
	if token == "" || len(token) > 128 {
		return &InvalidError{"token", "missing"}
	}
	return nil
}

func validReason(reason string) error { return validText("error", reason, MaxReason) }

func validFingerprint(fp string) error { return validText("fingerprint", fp, MaxFingerprint) }

// apply commits a checked call's operation, or returns its refusal.
func (l *Local) apply(ctx context.Context, c checked) (store.EffectResult, error) {
	if c.err != nil {
		return store.EffectResult{}, c.err
	}
	res, err := l.opts.Commit(ctx, []store.EffectOp{l.stamp(c.op)})
	if err != nil {
		return store.EffectResult{}, err
	}
	return res[0], nil
}

// do is apply for the calls whose answer is only an error.
func (l *Local) do(ctx context.Context, c checked) error {
	res, err := l.apply(ctx, c)
	if err != nil {
		return err
	}
	return errorOf(res)
}

// Claim implements Ledger.
func (l *Local) Claim(ctx context.Context, key string, opts ClaimOptions) (Claim, error) {
	res, err := l.apply(ctx, l.claim(key, opts))
	if err != nil {
		return Claim{}, err
	}
	return claimOf(res)
}

// claimOf turns a claim's result into a Claim or its error.
func claimOf(res store.EffectResult) (Claim, error) {
	r := res.Record
	switch res.Status {
	case store.EffectAcquired:
		return Claim{Token: r.Token, Attempt: r.Attempt, LeaseExpiresAt: r.LeaseExpiresAt, Reclaimed: res.Reclaimed}, nil
	case store.EffectAlreadyDone:
		return Claim{AlreadyDone: true, Result: json.RawMessage(r.Result)}, nil
	}
	return Claim{}, errorOf(res)
}

// errorOf is the error for a result that is not a success.
func errorOf(res store.EffectResult) error {
	switch res.Status {
	case store.EffectBusy:
		return &BusyError{RetryAfter: res.Record.LeaseExpiresAt}
	case store.EffectIsFailed:
		return &FailedError{Reason: res.Record.Error}
	case store.EffectMismatch:
		return ErrFingerprint
	case store.EffectIsExpired:
		return ErrExpired
	case store.EffectStale:
		return ErrStaleToken
	case store.EffectNotFound:
		return ErrNotFound
	case store.EffectConflict:
		return ErrConflict
	}
	return nil
}

// Complete implements Ledger.
func (l *Local) Complete(ctx context.Context, key, token string, result json.RawMessage) error {
	return l.do(ctx, l.complete(key, token, result))
}

// Release implements Ledger.
func (l *Local) Release(ctx context.Context, key, token, reason string) error {
	return l.do(ctx, l.end(store.EffectRelease, key, token, reason))
}

// Fail implements Ledger.
func (l *Local) Fail(ctx context.Context, key, token, reason string) error {
	return l.do(ctx, l.end(store.EffectFail, key, token, reason))
}

// Renew implements Ledger.
func (l *Local) Renew(ctx context.Context, key, token string, lease time.Duration) (time.Time, error) {
	res, err := l.apply(ctx, l.renew(key, token, lease))
	if err != nil {
		return time.Time{}, err
	}
	return res.Record.LeaseExpiresAt, errorOf(res)
}

// Reset reopens a failed or expired record: an operator's deliberate
// second chance. Claims then take it as the next attempt.
func (l *Local) Reset(ctx context.Context, key string) error {
	return l.ResetAudited(ctx, key, store.AuditEntry{})
}

// ResetAudited is Reset with its audit entry written in the reset's own
// transaction (and only when the reset happened): how an operator's
// reset, from the API, the dashboard or the CLI, is recorded.
func (l *Local) ResetAudited(ctx context.Context, key string, audit store.AuditEntry) error {
	return l.do(ctx, checked{store.EffectOp{Kind: store.EffectReset, Key: key, Audit: audit}, ValidKey(key)})
}

// Get implements Ledger.
func (l *Local) Get(ctx context.Context, key string) (Record, error) {
	if err := ValidKey(key); err != nil {
		return Record{}, err
	}
	r, err := l.store.Effect(ctx, key)
	if errors.Is(err, store.ErrNotFound) {
		return Record{}, ErrNotFound
	}
	if err != nil {
		return Record{}, err
	}
	return recordOf(r, l.opts.Now()), nil
}

// List returns the records the query selects (the reconciliation list:
// pending with its lease expired, failed), in key order; pass the last key as the next
// query's After.
func (l *Local) List(ctx context.Context, q store.EffectQuery) ([]Record, error) {
	// A cursor is a key a list gave: one no key can be (not UTF-8, a NUL)
	// is refused alike on every backend, not by PostgreSQL's text (503).
	if err := validText("cursor", q.After, MaxKeyLen); err != nil {
		return nil, err
	}
	q.Now = l.opts.Now()
	rs, err := l.store.ListEffects(ctx, q)
	if err != nil {
		return nil, err
	}
	out := make([]Record, len(rs))
	for i, r := range rs {
		out[i] = recordOf(r, q.Now)
	}
	return out, nil
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// recordOf is what a record shows; never its token.
func recordOf(r store.EffectRecord, now time.Time) Record {
	out := Record{
		Key: r.Key, State: r.State, Attempt: r.Attempt, LeaseExpiresAt: timePtr(r.LeaseExpiresAt), LeaseExpired: r.LeaseExpired(now),
		Fingerprint: r.Fingerprint, Deadline: timePtr(r.Deadline), Error: r.Error,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
	out.Stale = out.LeaseExpired
	if r.Result != nil {
		out.Result = json.RawMessage(r.Result)
	}
	for _, a := range r.Attempts {
		out.Attempts = append(out.Attempts, Attempt{Attempt: a.Attempt, ClaimedAt: a.ClaimedAt.UTC(), EndedAt: timePtr(a.EndedAt), Outcome: a.Outcome, Error: a.Error})
	}
	return out
}
