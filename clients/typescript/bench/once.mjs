// What ledger.once costs over the raw HTTP calls it makes: against a real
// gateway (the tests' one: $ONCEHOOK_BIN, or built from the checkout),
// N keys a round through `await ledger.once(key, fn)` and N through the
// same two calls made by hand with fetch (claim, complete), alternating
// which goes first. Prints each round and the median ratio.
//
//   npm ci && ONCEHOOK_BIN=./oncehook node clients/typescript/bench/once.mjs [N] [ROUNDS]
import { Ledger } from "oncehook";
import { Gateway, TOKEN, binary } from "../test/gateway.mjs";

const n = Number(process.argv[2] ?? 200);
const rounds = Number(process.argv[3] ?? 6);
const gw = await new Gateway(binary().bin).start();
try {
  const ledger = new Ledger({ url: gw.api, token: TOKEN });
  const post = async (path, body) => {
    const r = await fetch(gw.api + path, {
      method: "POST", body: JSON.stringify(body),
      headers: { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/json" },
    });
    const text = await r.text();
    return [r.status, text];
  };
  const byHand = async (key) => {
    const [s1, t1] = await post(`/v1/effects/${key}/claim`, { lease: "30s" });
    if (s1 !== 201) throw new Error(`claim ${s1} ${t1}`);
    const [s2, t2] = await post(`/v1/effects/${key}/complete`, { token: JSON.parse(t1).token, result: { ok: true } });
    if (s2 !== 200) throw new Error(`complete ${s2} ${t2}`);
  };
  const time = async (f) => {
    const t0 = performance.now();
    for (let i = 0; i < n; i++) await f(i);
    return (performance.now() - t0) / n;
  };
  const ratios = [];
  for (let r = 0; r < rounds; r++) {
    const client = () => time((i) => ledger.once(`bench:once:${r}:${i}`, async () => ({ ok: true })));
    const hand = () => time((i) => byHand(`bench:raw:${r}:${i}`));
    let c, h;
    if (r % 2) { h = await hand(); c = await client(); } else { c = await client(); h = await hand(); }
    ratios.push(c / h);
    console.log(`round ${r + 1}: once() ${c.toFixed(2)} ms, raw claim+complete ${h.toFixed(2)} ms: ${(c / h).toFixed(2)}x`);
  }
  ratios.sort((a, b) => a - b);
  console.log(`median ratio over ${rounds} rounds: ${ratios[Math.floor(rounds / 2)].toFixed(2)}x`);
} finally {
  await gw.close();
}
