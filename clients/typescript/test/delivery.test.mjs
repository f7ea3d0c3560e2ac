// Publishing through the outbox, and the deliveries it makes checked as an
// app would check them: a real gateway delivering to a real HTTP server.

import assert from "node:assert/strict";
import { createServer } from "node:http";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { InvalidError, NotFoundError, OncehookError, Outbox, SignatureError, formatKey, readDelivery, verifyDelivery } from "oncehook";
import { Gateway, SECRET, TOKEN, binary } from "./gateway.mjs";

const { bin, skip } = binary();

describe("deliveries", { skip }, () => {
  let gw;
  let sink;
  const got = []; // [headers, raw body]

  before(async () => {
    // An app's webhook endpoint: keeps each request's headers and raw body,
    // and answers 500 to an event's first attempt (so that a second comes).
    sink = createServer((req, res) => {
      const chunks = [];
      req.on("data", (c) => chunks.push(c));
      req.on("end", () => {
        const first = !got.some(([h]) => h["idempotency-key"] === req.headers["idempotency-key"]);
        got.push([req.headers, Buffer.concat(chunks)]);
        res.writeHead(first ? 500 : 200).end();
      });
    });
    await new Promise((r) => sink.listen(0, "127.0.0.1", r));
    gw = await new Gateway(bin, `http://127.0.0.1:${sink.address().port}/hooks`).start();
  });
  after(async () => {
    await gw?.close();
    sink?.close();
  });

  test("a Latin-1 body is verified over its raw bytes", async () => {
    const body = Buffer.from("Pagamento aprovado: Conceição, R$ 9,90 - ação", "latin1");
    assert.throws(() => new TextDecoder("utf-8", { fatal: true }).decode(body), "not UTF-8");
    const pub = await new Outbox({ url: gw.api, token: TOKEN }).publish("orders", "ord-latin1", body, {
      contentType: "text/plain; charset=iso-8859-1", headers: { "X-Event-Type": "sale.approved" },
    });
    assert.deepEqual([pub.status, pub.key, pub.duplicate], ["accepted", "ord-latin1", false]);
    const mine = () => got.filter(([h]) => h["idempotency-key"] === "orders:ord-latin1");
    for (const giveUp = Date.now() + 20_000; mine().length < 2 && Date.now() < giveUp;) await sleep(20);
    assert.equal(mine().length, 2, "a first attempt answered 500, then a second");
    mine().forEach(([headers, raw], i) => {
      assert.ok(raw.equals(body), "delivered byte for byte");
      const d = verifyDelivery(raw, headers, SECRET);
      assert.deepEqual([d.idempotencyKey, d.source, d.key, d.type, d.attempt], ["orders:ord-latin1", "orders", "ord-latin1", "sale.approved", i + 1]);
      assert.match(d.deliveryId, /^dlv_/);
      assert.match(d.id, /^msg_/);
      assert.ok(Math.abs(d.timestamp.getTime() - Date.now()) < 60_000);
      assert.deepEqual(readDelivery(headers), d);
    });
    const [headers, raw] = mine().at(-1);
    // Headers as any server hands them: fetch's Headers, pairs, a plain object in any case.
    const asHeaders = new Headers(Object.entries(headers));
    assert.equal(verifyDelivery(raw, asHeaders, SECRET).attempt, 2);
    assert.equal(verifyDelivery(new Uint8Array(raw).buffer, Object.entries(headers), SECRET).key, "ord-latin1");
    assert.equal(verifyDelivery(raw, Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toUpperCase(), v])), SECRET).attempt, 2);
    // During a rotation, any of the secrets.
    const other = "whsec_QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=";
    assert.equal(verifyDelivery(raw, headers, [other, SECRET]).attempt, 2);

    const tampered = Buffer.from(raw);
    tampered[tampered.length - 1] ^= 0x01;
    for (const [name, call] of [
      ["tampered body", () => verifyDelivery(tampered, headers, SECRET)],
      ["another secret", () => verifyDelivery(raw, headers, other)],
    ]) {
      assert.throws(call, (e) => e instanceof SignatureError && e.code === "no_match", name);
    }
    assert.throws(() => verifyDelivery(raw, headers, SECRET, { now: Date.now() / 1000 + 3600 }),
      (e) => e instanceof SignatureError && e.code === "timestamp_out_of_tolerance");
    const unsigned = Object.fromEntries(Object.entries(headers).filter(([k]) => k !== "webhook-signature"));
    assert.throws(() => verifyDelivery(raw, unsigned, SECRET), (e) => e instanceof SignatureError && e.code === "missing_header");
    assert.throws(() => verifyDelivery(raw.toString("latin1"), headers, SECRET), (e) => e instanceof TypeError && /raw bytes/.test(e.message));
    assert.throws(() => verifyDelivery(raw, headers, "whsec_"), InvalidError);
  });

  test("a key published again is a duplicate", async () => {
    const outbox = new Outbox({ url: gw.api, token: TOKEN });
    const first = await outbox.publish("orders", "ord_1042", { event_name: "Purchase", value: 99.9 });
    const again = await outbox.publish("orders", "ord_1042", { event_name: "Purchase", value: 99.9 });
    assert.deepEqual([first.status, again.status, again.duplicate], ["accepted", "duplicate", true]);
  });

  test("a reconciliation pass is republished, not duplicates", async () => {
    const outbox = new Outbox({ url: gw.api, token: TOKEN });
    // oncehook_events_total, which the gateway counts as it answers.
    const counted = async (verdict) => {
      const text = await (await fetch(`${gw.intake}/metrics`)).text();
      const m = new RegExp(`^oncehook_events_total\\{source="orders",verdict="${verdict}"\\} (\\d+)$`, "m").exec(text);
      return m ? Number(m[1]) : 0;
    };
    const keys = [0, 1, 2, 3, 4].map((i) => `ord_rec_${i}`);
    for (const k of keys) assert.equal((await outbox.publish("orders", k, { order: k })).status, "accepted");
    const before = [await counted("republished"), await counted("duplicate")];
    for (const k of keys) {
      const again = await outbox.publish("orders", k, { order: k }, { reconcile: true });
      assert.deepEqual([again.status, again.duplicate, again.republished], ["republished", true, true]);
    }
    assert.deepEqual([(await counted("republished")) - before[0], (await counted("duplicate")) - before[1]], [keys.length, 0]);
    // A row whose publish was lost: new, so stored (and delivered).
    const lost = await outbox.publish("orders", "ord_rec_lost", { order: "lost" }, { reconcile: true });
    assert.deepEqual([lost.status, lost.duplicate, lost.republished], ["accepted", false, false]);
  });

  test("a key that is not a token is sent quoted and read as the same key", async () => {
    assert.equal(formatKey("ord 7"), '"ord 7"');
    assert.equal(formatKey('say "hi"\\'), '"say \\"hi\\"\\\\"');
    assert.equal(formatKey("stripe:evt_1/a"), "stripe:evt_1/a");
    const outbox = new Outbox({ url: gw.api, token: TOKEN });
    // The gateway keeps a key's space percent-encoded, as deliveries and the dashboard show it.
    assert.equal((await outbox.publish("orders", "ord 7", "{}")).key, "ord%207");
    assert.ok((await outbox.publish("orders", "ord 7", "{}")).duplicate);
    await assert.rejects(outbox.publish("orders", "pedido-ação", "{}"), (e) => e instanceof InvalidError && e.field === "Idempotency-Key");
  });

  test("refusals name the API's code", async () => {
    const outbox = new Outbox({ url: gw.api, token: TOKEN });
    await assert.rejects(outbox.publish("nope", "k", "{}"), (e) => e instanceof NotFoundError && e.code === "unknown_source" && e.status === 404);
    const err = await outbox.publish("orders", null, "{}").catch((e) => e);
    assert.ok(err instanceof OncehookError);
    assert.deepEqual([err.code, err.status], ["missing_key", 422]);
    assert.match(err.message, /\(missing_key 422\)/);
  });
});
