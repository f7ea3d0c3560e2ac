// Compiled, not run (tsc -p test): the package's declarations as a user's
// TypeScript sees them, through the package's own name.
import { BusyError, Ledger, Outbox, Permanent, RawJSON, verifyDelivery, type Delivery, type Effect, type Published } from "oncehook";

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
