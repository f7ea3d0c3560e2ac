// The effects ledger through once(), against a real gateway: several OS
// processes, a kill -9, a stopped owner, a gateway restarted mid-effect.

import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import {
  ApiError, BusyError, ExpiredError, FailedError, InvalidError, LeaseLostError, Ledger, Permanent, RawJSON,
  ResultRefusedError, UnreachableError,
} from "oncehook";
import { Gateway, TOKEN, binary } from "./gateway.mjs";

const { bin, skip } = binary();
let gw;

const read = (path) => {
  try {
    return readFileSync(path, "utf8").split("\n").filter(Boolean);
  } catch {
    return [];
  }
};

async function waitFor(cond, what, timeoutMs = 20_000) {
  const giveUp = Date.now() + timeoutMs;
  while (Date.now() < giveUp) {
    if (cond()) return;
    await sleep(20);
  }
  throw new Error(`${what} did not happen within ${timeoutMs} ms`);
}

describe("once", { skip }, () => {
  let ledger;
  let dir;
  let marks;
  let n = 0;
  const fresh = (name) => `${name}:${++n}:${process.pid}`;

  before(async () => {
    gw = await new Gateway(bin).start();
    ledger = new Ledger({ url: gw.api, token: TOKEN, leaseMs: 2000, waitMs: 10_000 });
  });
  const dirs = [];
  after(async () => {
    await gw?.close();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });
  const setup = () => {
    dir = mkdtempSync(join(tmpdir(), "oncehook-ts-"));
    dirs.push(dir);
    marks = join(dir, "marks");
  };

  test("two processes racing for the same keys run each effect once", async () => {
    setup();
    const go = join(dir, "go");
    const a = gw.worker("race", "100", marks, go);
    const b = gw.worker("race", "100", marks, go);
    await waitFor(() => read(marks).length === 2, "both processes' start");
    writeFileSync(go, "");
    const [ra, rb] = await Promise.all([a.result, b.result]);
    const runs = new Map();
    for (const line of read(marks).slice(2)) {
      const key = line.split(" ")[0];
      runs.set(key, (runs.get(key) ?? 0) + 1);
    }
    assert.equal(runs.size, 100, "every key's effect ran");
    assert.equal(Math.max(...runs.values()), 1, "an effect ran twice");
    assert.deepEqual(ra, rb, "each process got the one result: its own, or the other's, stored");
    const by = {};
    for (const r of Object.values(ra)) by[r.pid] = (by[r.pid] ?? 0) + 1;
    console.log(`  race: 100 keys, runs split ${JSON.stringify(Object.values(by).sort((x, y) => x - y))} between the two processes`);
  });

  test("an owner killed mid-effect is reclaimed once its lease expires", async () => {
    setup();
    const key = fresh("killed");
    const owner = gw.worker("hold", key, marks);
    await waitFor(() => read(marks).length > 0, "the owner's claim");
    owner.kill("SIGKILL");
    await new Promise((r) => owner.once("exit", r));
    const start = performance.now();
    let seen;
    const got = await ledger.once(key, async (effect) => {
      seen = { attempt: effect.attempt, reclaimed: effect.reclaimed };
      return "sent once";
    });
    assert.equal(got, "sent once");
    assert.deepEqual(seen, { attempt: 2, reclaimed: true });
    const rec = await ledger.get(key);
    assert.equal(rec.state, "done");
    assert.deepEqual(rec.attempts.map((a) => a.outcome), ["lease_expired", "done"]);
    console.log(`  killed owner: taken over after ${((performance.now() - start) / 1000).toFixed(1)}s (lease 2s)`);
  });

  test("a function longer than its lease is renewed and never taken over", async () => {
    setup();
    const key = fresh("long");
    const owner = gw.worker("long", key, "4", marks);
    await waitFor(() => read(marks).length > 0, "the long function's start");
    const other = gw.worker("poll", key, marks);
    const [done, polled] = await Promise.all([owner.result, other.result]);
    const lines = read(marks);
    assert.deepEqual(lines.filter((l) => l.startsWith("poll")), [], "the other process ran it");
    assert.match(lines.at(-1), /lost=false/);
    assert.equal(done.attempt, 1);
    assert.ok(polled.busy > 5, `the other process tried while it ran (${polled.busy} times)`);
    assert.deepEqual(polled.result, done, "and then got the owner's result");
    assert.equal((await ledger.get(key)).attempts.length, 1);
  });

  test("a dead owner's late complete is refused with StaleTokenError", async () => {
    setup();
    const key = fresh("late");
    const go = join(dir, "go");
    const owner = gw.worker("late", key, marks, go);
    await waitFor(() => read(marks).length > 0, "the owner's claim");
    owner.kill("SIGSTOP"); // hung: no renewal, as a stalled VM or a long pause
    let seen;
    try {
      const got = await ledger.once(key, async (effect) => {
        seen = { attempt: effect.attempt, reclaimed: effect.reclaimed };
        return { by: "survivor" };
      });
      assert.deepEqual(got, { by: "survivor" });
      assert.deepEqual(seen, { attempt: 2, reclaimed: true });
    } finally {
      writeFileSync(go, "");
      owner.kill("SIGCONT");
    }
    const late = await owner.result;
    assert.deepEqual([late.error, late.code], ["StaleTokenError", "stale_token"], JSON.stringify(late));
    assert.deepEqual((await ledger.get(key)).result, { by: "survivor" }, "the survivor's result stands");
  });

  test("a key busy past the wait bound rejects with BusyError", async () => {
    const key = fresh("busy");
    const held = await ledger.claim(key, { leaseMs: 30_000 });
    let ran = false;
    const start = performance.now();
    const err = await ledger.once(key, () => (ran = true), { waitMs: 500 }).catch((e) => e);
    const waited = performance.now() - start;
    assert.ok(err instanceof BusyError, String(err));
    assert.equal(ran, false);
    assert.ok(waited >= 500 && waited < 10_000, `waited ${waited} ms`);
    assert.deepEqual([err.code, err.status, err.name], ["busy", 409, "BusyError"]);
    assert.ok(err.retryAfter instanceof Date);
    assert.match(err.message, /\(busy 409\)/);
    await ledger.release(key, held.token, "test over");
  });

  test("a stored result comes back byte for byte", async () => {
    const key = fresh("raw");
    const raw = '{"z": 1,  "a": [1.50, "\\u00e9", "é", 1e2],\n "": null}';
    await ledger.once(key, () => new RawJSON(raw));
    assert.equal((await ledger.claim(key)).rawResult, raw);
    assert.deepEqual(await ledger.once(key, () => assert.fail("ran again")), JSON.parse(raw));
    // A value is stored as JSON.stringify writes it, and comes back equal.
    const k2 = fresh("value");
    const value = { b: "ação", a: [1, 2.5, null, true] };
    assert.deepEqual(await ledger.once(k2, () => value), value);
    assert.equal((await ledger.claim(k2)).rawResult, JSON.stringify(value));
    assert.deepEqual(await ledger.once(k2, () => assert.fail("ran again")), value);
  });

  test("an error releases the key for the next attempt", async () => {
    const key = fresh("released");
    await assert.rejects(ledger.once(key, async (effect) => {
      assert.deepEqual([effect.attempt, effect.reclaimed], [1, false]);
      throw new TypeError("the SMS gateway timed out");
    }), TypeError);
    const rec = await ledger.get(key);
    assert.equal(rec.attempts[0].outcome, "released");
    assert.match(rec.attempts[0].error, /TypeError: the SMS gateway timed out/);
    const got = await ledger.once(key, (effect) => [effect.attempt, effect.reclaimed]);
    assert.deepEqual(got, [2, false], "a release is no crash");
  });

  test("a permanent error fails the key for good", async () => {
    const key = fresh("permanent");
    await assert.rejects(ledger.once(key, () => { throw new Permanent("invalid phone number"); }), Permanent);
    const err = await ledger.once(key, () => assert.fail("ran a failed key")).catch((e) => e);
    assert.ok(err instanceof FailedError, String(err));
    assert.match(err.reason, /invalid phone number/);
    assert.equal(err.code, "failed");
    // Or as isPermanent says.
    const k2 = fresh("by-predicate");
    await assert.rejects(ledger.once(k2, () => { throw new RangeError("no such customer"); }, { isPermanent: (e) => e instanceof RangeError }), RangeError);
    await assert.rejects(ledger.once(k2, () => assert.fail("ran a failed key")), FailedError);
  });

  test("a result that is not JSON fails the key for good", async () => {
    const key = fresh("not-json");
    const err = await ledger.once(key, () => ({ n: 10n })).catch((e) => e);
    assert.ok(err instanceof ResultRefusedError, String(err));
    assert.equal(err.code, "result_refused");
    const again = await ledger.once(key, () => assert.fail("ran again")).catch((e) => e);
    assert.ok(again instanceof FailedError, String(again));
    assert.match(again.reason, /could not be stored/);
  });

  test("a deadline passed rejects with ExpiredError", async () => {
    const err = await ledger.once(fresh("expired"), () => assert.fail("ran past its deadline"), { deadline: new Date(Date.now() - 1000) }).catch((e) => e);
    assert.ok(err instanceof ExpiredError, String(err));
    assert.deepEqual([err.code, err.status], ["expired", 410]);
    assert.equal(await ledger.once(fresh("later"), () => 1, { deadline: new Date(Date.now() + 48 * 3600_000) }), 1);
  });

  test("a lost lease aborts effect.signal", async () => {
    const key = fresh("lost");
    const err = await ledger.once(key, async (effect) => {
      // The key is released behind this run's back, as a takeover leaves it:
      // the next renewal is refused.
      await new Ledger({ url: gw.api, token: TOKEN }).release(key, effect.token, "taken away");
      await new Promise((resolve) => effect.signal.addEventListener("abort", resolve, { once: true }));
      assert.ok(effect.lost);
      assert.throws(() => effect.check(), LeaseLostError);
      throw effect.signal.reason;
    }).catch((e) => e);
    assert.ok(err instanceof LeaseLostError, String(err));
    assert.equal(err.code, "lease_lost");
  });

  test("a ledger out of reach rejects with UnreachableError and runs nothing", async () => {
    const l = new Ledger({ url: "http://127.0.0.1:1", token: TOKEN, timeoutMs: 2000 });
    const err = await l.once("k", () => assert.fail("ran without a claim")).catch((e) => e);
    assert.ok(err instanceof UnreachableError, String(err));
    assert.equal(err.code, "unreachable");
    assert.equal(err.status, undefined);
  });

  test("errors name the API's code", async () => {
    const err = await new Ledger({ url: gw.api, token: "not_the_token_0123456789" }).claim("k").catch((e) => e);
    assert.ok(err instanceof ApiError, String(err));
    assert.deepEqual([err.status, err.code], [401, "unauthorized"]);
    assert.match(err.message, /\(unauthorized 401\)/);
    const bad = await ledger.claim("a\u202ekey").catch((e) => e);
    assert.ok(bad instanceof InvalidError, String(bad));
    assert.deepEqual([bad.code, bad.field], ["invalid", "key"]);
  });

  test("config comes from the environment", async () => {
    const saved = { api: process.env.ONCEHOOK_API, token: process.env.ONCEHOOK_API_TOKEN };
    try {
      process.env.ONCEHOOK_API = gw.api;
      process.env.ONCEHOOK_API_TOKEN = TOKEN;
      assert.equal(await new Ledger().once(fresh("env"), () => "ok"), "ok");
      assert.equal(new Ledger().url, gw.api);
      delete process.env.ONCEHOOK_API_TOKEN;
      assert.throws(() => new Ledger(), (e) => e instanceof InvalidError && /ONCEHOOK_API_TOKEN/.test(e.message));
    } finally {
      for (const [k, v] of [["ONCEHOOK_API", saved.api], ["ONCEHOOK_API_TOKEN", saved.token]]) {
        if (v === undefined) delete process.env[k];
        else process.env[k] = v;
      }
    }
  });
});

describe("restart", { skip }, () => {
  test("the gateway restarted while the function runs loses no result", async () => {
    const g = await new Gateway(bin).start();
    try {
      const ledger = new Ledger({ url: g.api, token: TOKEN, leaseMs: 10_000 });
      let started;
      const running = new Promise((r) => (started = r));
      let finish;
      const mayFinish = new Promise((r) => (finish = r));
      const result = ledger.once("restart:k", async () => {
        started();
        await mayFinish;
        return { summary: "paid" };
      });
      await running;
      await g.stop();
      finish(); // the function ends while the ledger is gone
      await sleep(500);
      await g.start();
      assert.deepEqual(await result, { summary: "paid" });
      assert.equal((await ledger.get("restart:k")).state, "done");
    } finally {
      await g.close();
    }
  });
});
