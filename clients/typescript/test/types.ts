// Compiled, not run (tsc -p test): the package's declarations as a user's
// TypeScript sees them, through the package's own name.
import {
  BusyError, Consumer, Ledger, Outbox, Outcome, Permanent, RawJSON, verifyDelivery, type AckOutcome, type Delivery, type Effect,
  type PulledDelivery, type Published,
} from "oncehook";

const ledger = new Ledger({ url: "http://127.0.0.1:8081", token: "t", leaseMs: 30_000 });

export async function summarize(eventId: string): Promise<{ summary: string }> {
  return ledger.once(`llm-summary:${eventId}`, async (effect: Effect) => {
    if (effect.reclaimed) effect.check();
    const res = await fetch("http://model.invalid", { signal: effect.signal });
    if (res.status === 400) throw new Permanent("the model refused the input");
    return { summary: await res.text() };
  }, { waitMs: 5_000, deadline: new Date(Date.now() + 3600_000), isPermanent: (e) => e instanceof RangeError });
}

export async function raw(): Promise<unknown> {
  return ledger.once("k", () => new RawJSON('{"a": 1}'));
}

export function busy(e: unknown): Date | undefined {
  return e instanceof BusyError ? e.retryAfter : undefined;
}

export async function publish(): Promise<Published> {
  return new Outbox().publish("orders", "ord_1042", { event_name: "Purchase" }, { headers: { "X-Event-Type": "purchase" } });
}

export async function reconcile(): Promise<boolean> {
  const p = await new Outbox().publish("orders", "ord_1042", { event_name: "Purchase" }, { reconcile: true });
  return p.republished;
}

export function check(body: Uint8Array, headers: Record<string, string | string[] | undefined>): Delivery {
  return verifyDelivery(body, headers, ["whsec_a", "whsec_b"], { toleranceSec: 300 });
}

export async function consume(): Promise<void> {
  const consumer = new Consumer({ name: "billing-1" });
  const stop = new AbortController();
  await consumer.consume("billing", async (d: PulledDelivery) => {
    if (d.attempt > 3) return Outcome.permanent("gave up", { status: 410 });
    return d.body.byteLength ? undefined : 204;
  }, { max: 16, leaseMs: 30_000, waitMs: 20_000, signal: stop.signal });
  const [d] = await consumer.pull("billing", { max: 1 });
  if (d) {
    const how: AckOutcome = await consumer.ack(d, Outcome.retry("db down", { afterMs: 30_000 }));
    void how;
  }
}
