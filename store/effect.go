package store

import "time"

// The effects ledger: before an external side effect (a WhatsApp message, a
// charge, an LLM call, a conversion sent to an ad platform), the caller
// claims a business key. The store keeps one record per key:
//
//	pending  leased to one owner (a token) until its lease expires
//	done     final, with the owner's result, which later claims get back
//	failed   final, set on purpose by the owner (a permanent error)
//	expired  final: its deadline passed before it was done
//
// A pending record whose lease expired (its owner crashed) is taken over by
// the next claim, which is told it is a reclaim and its attempt number, so it
// can check the outside world before acting again. Every transition is
// decided by Transition, below, in one place; each backend only loads the
// record (locked), writes what Transition returns, and records the attempt.

// Effect states.
const (
	EffectPending = "pending"
	EffectDone    = "done"
	EffectFailed  = "failed"
	EffectExpired = "expired"
	// EffectLeaseExpired is not a state but a count: the pending records
	// whose lease expired (their owner stopped halfway). It was "stale",
	// which is also the state of an ordered delivery held back.
	EffectLeaseExpired = "lease_expired"
)

// EffectOpKind is what an EffectOp does.
type EffectOpKind int

const (
	EffectClaim    EffectOpKind = iota // take the lease, or learn why not
	EffectComplete                     // done, with a result (the lease's owner)
	EffectRelease                      // a retryable failure: claimable again at once
	EffectFail                         // a permanent failure
	EffectRenew                        // extend the lease
	EffectReset                        // an operator reopens a failed or expired record
)

// EffectOp is one operation on one business key, committed with a Batch.
type EffectOp struct {
	Kind        EffectOpKind
	Key         string
	Token       string        // the owner's, for Complete, Release, Fail and Renew
	Lease       time.Duration // Claim and Renew
	Fingerprint string        // Claim: a hash of the request, to catch a key that is too coarse
	Deadline    time.Time     // Claim: after it, a record never done expires
	Result      []byte        // Complete: JSON
	Error       string        // Release and Fail
	Now         time.Time
	// Retention is how long a final record is kept (done, failed, expired),
	// for later claims to get its result back. It is the backend's to sweep.
	Retention time.Duration
	// Audit, when its Action is set (an operator's Reset), is written to
	// the audit log in the op's own transaction, at op.Now with Count 1,
	// when the op changed the record (EffectOK), and not otherwise: the log
	// says what happened, and holds nothing that did not.
	Audit AuditEntry
}

// EffectStatus is the answer to an EffectOp.
type EffectStatus int

const (
	EffectAcquired    EffectStatus = iota // Claim: the caller owns it now (HTTP 201)
	EffectAlreadyDone                     // Claim: already done; here is the result (200)
	EffectBusy                            // Claim: another owner holds an unexpired lease (409)
	EffectIsFailed                        // Claim: it failed for good (409)
	EffectMismatch                        // Claim: another fingerprint claimed this key (422)
	EffectIsExpired                       // Claim: its deadline passed before it was done (410)
	EffectOK                              // Complete, Release, Fail, Renew, Reset: done
	EffectStale                           // the token is not the owner's any more (409)
	EffectNotFound                        // no record (404)
	EffectConflict                        // Reset of a record that is not failed or expired (409)
)

// EffectRecord is what the ledger keeps for a key.
type EffectRecord struct {
	Key            string
	State          string
	Token          string // the current (or last) owner's; never shown to anyone else
	Attempt        int    // how many claims took the lease
	LeaseExpiresAt time.Time
	Fingerprint    string
	Deadline       time.Time
	Result         []byte
	Error          string
	CreatedAt      time.Time
	UpdatedAt      time.Time
	ExpiresAt      time.Time // when a final record is swept; zero while pending
	Attempts       []EffectAttempt
}

// EffectAttempt is one claim that took the lease, and how it ended.
type EffectAttempt struct {
	Attempt   int
	ClaimedAt time.Time
	EndedAt   time.Time // zero while it holds the lease
	Outcome   string    // done, released, failed, lease_expired, expired; empty while held
	Error     string
}

// EffectResult is what an EffectOp did.
type EffectResult struct {
	Status    EffectStatus
	Record    EffectRecord // the record after the op (for Mismatch: unchanged)
	Reclaimed bool         // Claim: the previous owner's lease expired without a word
}

// LeaseExpired reports whether the record is pending with a lease that
// expired: its owner stopped halfway (a crash), and nobody has taken it
// over yet.
func (r EffectRecord) LeaseExpired(now time.Time) bool {
	return r.State == EffectPending && !r.LeaseExpiresAt.IsZero() && !r.LeaseExpiresAt.After(now)
}

// EffectChange says how an op changes the stored attempts.
type EffectChange struct {
	// End, when set, ends attempt End.Attempt with its outcome.
	End *EffectAttempt
	// Start, when set, is a new attempt.
	Start *EffectAttempt
}

// Transition decides what op does to rec (nil when there is no record):
// the record to store (nil: store nothing), the answer, and the attempts to
// record. newToken is the token a successful Claim hands out. It is the
// whole meaning of the ledger; every backend applies it inside its own
// transaction, with the record locked.
func Transition(rec *EffectRecord, op EffectOp, newToken string) (*EffectRecord, EffectResult, EffectChange) {
	now := op.Now
	var ch EffectChange
	if rec == nil {
		if op.Kind != EffectClaim {
			return nil, EffectResult{Status: EffectNotFound}, ch
		}
		if !op.Deadline.IsZero() && !now.Before(op.Deadline) {
			return nil, EffectResult{Status: EffectIsExpired, Record: EffectRecord{Key: op.Key, State: EffectExpired, Deadline: op.Deadline}}, ch
		}
		next := &EffectRecord{
			Key: op.Key, State: EffectPending, Token: newToken, Attempt: 1, LeaseExpiresAt: now.Add(op.Lease),
			Fingerprint: op.Fingerprint, Deadline: op.Deadline, CreatedAt: now, UpdatedAt: now,
		}
		ch.Start = &EffectAttempt{Attempt: 1, ClaimedAt: now}
		return next, EffectResult{Status: EffectAcquired, Record: *next}, ch
	}
	next := *rec
	next.Attempts = nil
	final := func(state string) {
		next.State, next.LeaseExpiresAt, next.UpdatedAt = state, time.Time{}, now
		next.ExpiresAt = now.Add(op.Retention)
	}
	switch op.Kind {
	case EffectClaim:
		if op.Fingerprint != "" && rec.Fingerprint != "" && op.Fingerprint != rec.Fingerprint {
			return nil, EffectResult{Status: EffectMismatch, Record: *rec}, ch
		}
		switch rec.State {
		case EffectDone:
			return nil, EffectResult{Status: EffectAlreadyDone, Record: *rec}, ch
		case EffectFailed:
			return nil, EffectResult{Status: EffectIsFailed, Record: *rec}, ch
		case EffectExpired:
			return nil, EffectResult{Status: EffectIsExpired, Record: *rec}, ch
		}
		if rec.LeaseExpiresAt.After(now) {
			return nil, EffectResult{Status: EffectBusy, Record: *rec}, ch
		}
		deadline := rec.Deadline
		if deadline.IsZero() {
			deadline = op.Deadline
		}
		reclaimed := !rec.LeaseExpiresAt.IsZero() // its owner never released it
		if reclaimed {
			ch.End = &EffectAttempt{Attempt: rec.Attempt, EndedAt: rec.LeaseExpiresAt, Outcome: "lease_expired"}
		}
		if !deadline.IsZero() && !now.Before(deadline) {
			final(EffectExpired)
			next.Deadline = deadline
			return &next, EffectResult{Status: EffectIsExpired, Record: next}, ch
		}
		next.Token, next.Attempt, next.LeaseExpiresAt, next.UpdatedAt = newToken, rec.Attempt+1, now.Add(op.Lease), now
		next.Deadline = deadline
		if next.Fingerprint == "" {
			next.Fingerprint = op.Fingerprint
		}
		ch.Start = &EffectAttempt{Attempt: next.Attempt, ClaimedAt: now}
		return &next, EffectResult{Status: EffectAcquired, Record: next, Reclaimed: reclaimed}, ch

	case EffectComplete:
		if rec.State == EffectDone && rec.Token == op.Token && op.Token != "" {
			return nil, EffectResult{Status: EffectOK, Record: *rec}, ch // completing twice is idempotent
		}
		if rec.State != EffectPending || rec.Token != op.Token || op.Token == "" {
			return nil, EffectResult{Status: EffectStale, Record: *rec}, ch
		}
		final(EffectDone)
		next.Result, next.Error = op.Result, ""
		ch.End = &EffectAttempt{Attempt: rec.Attempt, EndedAt: now, Outcome: EffectDone}
		return &next, EffectResult{Status: EffectOK, Record: next}, ch

	case EffectRelease, EffectFail, EffectRenew:
		if rec.State != EffectPending || rec.Token != op.Token || op.Token == "" {
			return nil, EffectResult{Status: EffectStale, Record: *rec}, ch
		}
		switch op.Kind {
		case EffectRelease:
			// Claimable again at once; the old token completes nothing now.
			next.Token, next.LeaseExpiresAt, next.Error, next.UpdatedAt = "", time.Time{}, op.Error, now
			ch.End = &EffectAttempt{Attempt: rec.Attempt, EndedAt: now, Outcome: "released", Error: op.Error}
		case EffectFail:
			final(EffectFailed)
			next.Error = op.Error
			ch.End = &EffectAttempt{Attempt: rec.Attempt, EndedAt: now, Outcome: EffectFailed, Error: op.Error}
		case EffectRenew:
			next.LeaseExpiresAt, next.UpdatedAt = now.Add(op.Lease), now
		}
		return &next, EffectResult{Status: EffectOK, Record: next}, ch

	case EffectReset:
		if rec.State != EffectFailed && rec.State != EffectExpired {
			return nil, EffectResult{Status: EffectConflict, Record: *rec}, ch
		}
		next.State, next.Token, next.LeaseExpiresAt, next.ExpiresAt, next.UpdatedAt = EffectPending, "", time.Time{}, time.Time{}, now
		next.Deadline = time.Time{} // an operator's reset is a deliberate second chance
		return &next, EffectResult{Status: EffectOK, Record: next}, ch
	}
	return nil, EffectResult{Status: EffectNotFound}, ch
}

// EffectQuery selects records for the reconciliation list.
type EffectQuery struct {
	State        string    // pending, done, failed or expired; empty: any
	LeaseExpired bool      // only pending ones whose lease expired
	Now          time.Time // what "expired" is measured against
	After        string    // the cursor: keys after this one, in key order
	// Prefix keeps the keys that start with it (a tenant's namespace).
	Prefix string
	Limit  int
}
