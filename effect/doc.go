// Package effect is oncehook's effects ledger: every side effect happens
// once.
//
// Inbound dedup stops a provider's resend. It cannot stop your own worker
// from running twice: a retry after a timeout, a deploy that kills a job
// midway, a reconciliation sweep, a replay from the dashboard, a cron that
// fires on two replicas. Those send the same WhatsApp reminder twice, charge
// twice, pay again for the same LLM call, or report one sale to Meta as two.
//
// So, before an external side effect, claim a business key
// ("pix-reminder:HP123:24h", "capi:Purchase:order-987", "llm-summary:evt_1").
// The ledger, in the same store as the events, guarantees:
//
//   - one owner at a time: a claim takes a lease, with a token that fences
//     it; everyone else is told it is busy until the lease expires;
//   - a final state with the stored result: once done, every later claim
//     gets the owner's result back, byte for byte, instead of doing the work
//     again; failed is final too, until an operator resets it;
//   - safe takeover: an owner that crashed leaves a lease that expires; the
//     next claim takes over, told it is a reclaim and its attempt number, so
//     it can look up whether the effect already happened before acting; the
//     dead owner's late complete is refused;
//   - a way to find what was left halfway: the reconciliation list of
//     pending effects whose leases expired, and of failed ones.
//
// Do wraps all of it around a function. Claim, Complete, Release, Fail and
// Renew are the steps, for work that does not fit one call.
//
// # Two kinds of key
//
// The key of a delivery (its Idempotency-Key header, "stripe:evt_1") makes
// "handle this event once". A business key derived from the payload makes
// "do this business action once, whichever events ask for it": one Purchase
// conversion per order, whether it arrives as Hotmart's PURCHASE_APPROVED or
// PURCHASE_COMPLETE, or is replayed from the dashboard a week later. Send the
// same key downstream as that API's own idempotency key: Meta CAPI's
// event_id, Google Ads' order_id, a payment or email provider's
// Idempotency-Key.
//
// # Where it runs
//
// In process: New over a store (a Gateway's Effects() shares the gateway's
// group commit, so thousands of claims share a few fsyncs). Over HTTP:
// NewClient against a running gateway's API listener, with a bearer token;
// Handler is that API. And inside your own database transaction (NewTx, with
// the backend's driver: postgres.TxDriver or sqlite.TxDriver), so that
// "done" commits or rolls back with your own write, in your transaction.
// The HTTP client cannot join your transaction; the key sent downstream and
// the reconciliation list cover the gap between your commit and Complete.
package effect
