// A pull destination's consumer against a real gateway: events published to
// the outbox, pulled, handled once each, a handler's exception retried under
// the same Idempotency-Key, and a consumer's token refused everywhere else.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { ApiError, ConflictError, Consumer, Ledger, Outbox, Outcome, Permanent } from "oncehook";
import { Gateway, PULL_TOKEN, SECRET, TOKEN, binary } from "./gateway.mjs";

const { bin, skip } = binary();

describe("pull", { skip }, () => {
  let gw;
  let outbox;
  let consumer;

  before(async () => {
    gw = await new Gateway(bin).start();
    outbox = new Outbox({ url: gw.api, token: TOKEN });
    consumer = new Consumer({ url: gw.api, token: PULL_TOKEN, name: "node-test" });
  });
  after(async () => {
    await gw?.close();
  });

  const publish = async (key, body) => {
    const p = await outbox.publish("jobs", key, body, { headers: { "X-Event-Type": "job.done" } });
    assert.equal(p.status, "accepted");
  };
  const pullN = async (n) => {
    const out = [];
    for (const giveUp = Date.now() + 15_000; out.length < n && Date.now() < giveUp;) {
      out.push(...(await consumer.pull("laptop", { max: n - out.length, leaseMs: 10_000, waitMs: 2000 })));
    }
    return out;
  };

  test("consume handles each once, and retries a throw under the same key", async () => {
    const keys = ["once-0", "once-1", "once-2", "once-3"];
    for (const k of keys) await publish(k, { job: k, note: "café ☃" });
    const seen = [];
    const done = new Set();
    const stop = new AbortController();
    const loop = consumer.consume("laptop", async (d) => {
      d.verify(SECRET); // signed as a push delivery is, over the same bytes
      seen.push([d.idempotencyKey, d.attempt, Buffer.from(d.body).toString("utf8")]);
      if (d.key === "once-2" && d.attempt === 1) throw new Error("the database was down");
      done.add(d.key);
      if (done.size === keys.length) stop.abort();
    }, { max: 8, leaseMs: 10_000, waitMs: 1000, signal: stop.signal });
    const timer = setTimeout(() => stop.abort(), 20_000);
    await loop;
    clearTimeout(timer);
    assert.deepEqual([...done].sort(), keys, JSON.stringify(seen));
    for (const k of keys) {
      const body = JSON.stringify({ job: k, note: "café ☃" });
      const got = seen.filter(([ik]) => ik === `jobs:${k}`).map(([, a, b]) => [a, b]);
      assert.deepEqual(got, k === "once-2" ? [[1, body], [2, body]] : [[1, body]], k);
    }
    // Acked: nothing is handed out again.
    assert.deepEqual(await consumer.pull("laptop", { max: 10, waitMs: 1500 }), []);
  });

  test("ack answers the gateway's classification", async () => {
    await publish("outcome-1", "one");
    const [d] = await pullN(1);
    assert.deepEqual([d.attempt, Buffer.from(d.body).toString(), d.headers.get("Idempotency-Key")], [1, "one", "jobs:outcome-1"]);
    assert.equal(await consumer.ack(d, Outcome.retry("busy", { afterMs: 1000 })), "retry");
    await assert.rejects(consumer.ack(d), (e) => e instanceof ConflictError && e.status === 409 && e.code === "lease_unknown");
    const [again] = await pullN(1); // after the backoff (Retry-After is bounded by retry.max_delay)
    assert.deepEqual([again.id, again.attempt, again.idempotencyKey], [d.id, 2, "jobs:outcome-1"]);
    assert.equal(await consumer.ack(again, Outcome.permanent("no such customer")), "permanent");
    await publish("outcome-2", "two");
    const [d2] = await pullN(1);
    assert.equal(await consumer.ack(d2, Outcome.delivered(204, { latencyMs: 12 })), "delivered");
  });

  test("a Permanent throw is not retried; a long poll outlasts the timeout", async () => {
    await publish("perm-1", "x");
    const got = [];
    const stop = new AbortController();
    await consumer.consume("laptop", (d) => {
      got.push(d.attempt);
      stop.abort();
      throw new Permanent("invalid phone number");
    }, { waitMs: 1000, signal: stop.signal });
    assert.deepEqual(got, [1]);
    const short = new Consumer({ url: gw.api, token: PULL_TOKEN, timeoutMs: 500 });
    assert.deepEqual(await short.pull("laptop", { waitMs: 1500 }), []);
  });

  test("a transformation's path and query come with the delivery", async () => {
    await publish("routed-1", { job: "resize" });
    const ops = new Consumer({ url: gw.api, token: TOKEN }); // a token that may change anything pulls too
    // Every jobs event goes to routed too: the others are acked on the way.
    let got;
    for (const giveUp = Date.now() + 15_000; !got && Date.now() < giveUp;) {
      for (const d of await ops.pull("routed", { max: 100, waitMs: 2000 })) {
        if (d.key === "routed-1") got = d;
        await ops.ack(d);
      }
    }
    assert.deepEqual(got && [got.path, got.query], ["/jobs/resize", "v=2"]);
    const [plain] = await pullN(1); // the same event through laptop, which has no transformation
    assert.deepEqual([plain.key, plain.path, plain.query], ["routed-1", "", ""]);
    await consumer.ack(plain);
  });

  test("a consumer's token is refused elsewhere", async () => {
    const refused = (status, code) => (e) => e instanceof ApiError && e.status === status && (!code || e.code === code);
    await assert.rejects(consumer.pull("other", { waitMs: 0 }), refused(403, "not_consumer"));
    await assert.rejects(consumer.consume("other", () => undefined), refused(403));
    await assert.rejects(new Outbox({ url: gw.api, token: PULL_TOKEN }).publish("jobs", "nope", "x"), refused(403));
    await assert.rejects(new Ledger({ url: gw.api, token: PULL_TOKEN }).claim("pull-token-claims"), refused(403, "pull_only"));
  });
});
