// Package oncehook is an inbound webhook gateway that makes every provider
// event take effect exactly once.
//
// Providers (Stripe, GitHub, anything speaking Standard Webhooks, ...)
// deliver at least once: they resend on timeouts, on 5xx, after network cuts,
// and by hand days later. oncehook sits in front of your service and keeps
// three promises:
//
//   - Claim first. Each event's stable provider key is claimed by one atomic
//     store operation (INSERT ... ON CONFLICT DO NOTHING). The store, not the
//     process, decides every race: five concurrent copies of an event produce
//     one event and four "duplicate" answers.
//   - Durable before 200. A request is answered 200 only after the
//     transaction holding its events has committed (SQLite in WAL mode with
//     synchronous=FULL by default). Concurrent requests share commits through
//     a group committer, so durability does not cost throughput. If the store
//     cannot commit, the answer is 503 and the provider retries.
//   - Leases, not hope. Delivery to your service runs asynchronously from the
//     store: a worker leases due deliveries, POSTs them with the event's key
//     as Idempotency-Key, retries with exponential backoff and jitter, and
//     dead-letters what cannot succeed. A crashed worker's leases expire and
//     its deliveries are taken over, so nothing acknowledged is lost.
//
// The quickest way in is the binary: `oncehook serve` with no configuration
// starts on SQLite in the working directory with a demo source. From Go, load
// a config and run a Gateway with the kinds of store and broker it may use
// (this package imports none: kinds.All() is every one oncehook ships, and
// a build that names fewer links no other client):
//
//	k := oncehook.Kinds{Stores: []store.Kind{sqlite.Kind()}} // or kinds.All()
//	cfg, err := oncehook.LoadConfig("oncehook.yaml", k) // checked whole: each field, the kinds, the parts built from it
//	if err != nil { ... }
//	gw, err := oncehook.New(ctx, cfg, oncehook.Options{Kinds: k, Logger: logger})
//	if err != nil { ... }
//	ln, err := net.Listen("tcp", cfg.Listen)
//	if err != nil { ... }
//	err = gw.Serve(ctx, ln) // until ctx ends, then a graceful shutdown
//
// Events can also come from your own code, in your own transaction (the
// outbox, as River's InsertTx writes a job): an Outbox's PublishTx claims
// the event with your domain write, on the gateway's database, and the
// gateway delivers it once your transaction has committed, never if it
// rolled back:
//
//	outbox, err := oncehook.NewOutbox(cfg, postgres.TxDriver{})
//	...
//	pub, err := outbox.PublishTx(ctx, tx, "orders", order.ID, purchaseJSON, nil) // in your pgx.Tx
package oncehook
