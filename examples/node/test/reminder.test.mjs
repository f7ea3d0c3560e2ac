// reminder.mjs against a real gateway (the binary: $ONCEHOOK_BIN): each
// appointment comes from two sources (the clinic's system and the CRM), each
// delivered to its own replica of the service, and each source sends it
// twice; the messaging API receives one WhatsApp message per appointment and
// step. Without a binary the test skips, unless $CI is set, where it fails.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer, request } from "node:http";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const HERE = dirname(fileURLToPath(import.meta.url));
const TOKEN = "tok_examples_node_0123456789";
const SECRET = "whsec_ZXhhbXBsZXMtbm9kZS1zZWNyZXQtMDEyMw==";
const bin = process.env.ONCEHOOK_BIN;
if (!bin && process.env.CI) throw new Error("set ONCEHOOK_BIN to a built gateway");

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const listen = (server) => new Promise((r) => server.listen(0, "127.0.0.1", () => r(`http://127.0.0.1:${server.address().port}`)));

/** A WhatsApp-like messaging API: counts the messages sent per key. */
function messagingAPI() {
  const sent = new Map();
  const server = createServer(async (req, res) => {
    const url = new URL(req.url, "http://x");
    if (req.method === "GET") {
      const m = sent.get(url.searchParams.get("key"));
      res.writeHead(m ? 200 : 404, { "content-type": "application/json" }).end(JSON.stringify(m?.answer ?? {}));
      return;
    }
    let body = "";
    for await (const c of req) body += c;
    const key = JSON.parse(body).biz_opaque_callback_data;
    await sleep(100); // long enough for the other replica to reach the key
    const m = sent.get(key) ?? { n: 0, answer: { messages: [{ id: `wamid.${sent.size + 1}` }] } };
    m.n++;
    sent.set(key, m);
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(m.answer));
  });
  return { server, sent };
}

/** A front the gateway delivers to, forwarding to a replica once it is up. */
function front() {
  const f = { target: undefined, ok: 0 };
  f.server = createServer((req, res) => {
    if (!f.target) return res.writeHead(503, { "retry-after": "1" }).end();
    const out = request(f.target + req.url, { method: req.method, headers: req.headers }, (up) => {
      if (up.statusCode === 200) f.ok++;
      res.writeHead(up.statusCode, up.headers);
      up.pipe(res);
    });
    out.on("error", () => res.writeHead(502).end());
    req.pipe(out);
  });
  return f;
}

/** Spawns a process and resolves with it once a line of its output matches. */
function started(cmd, args, opts, pattern, stderr = "inherit") {
  const proc = spawn(cmd, args, { ...opts, stdio: ["ignore", "pipe", stderr] });
  return new Promise((resolve, reject) => {
    let text = "";
    proc.stdout.on("data", (d) => {
      text += d;
      const m = pattern.exec(text);
      if (m) resolve({ proc, match: m });
    });
    proc.once("exit", (code) => reject(new Error(`${cmd} ${args.join(" ")} exited ${code}: ${text}`)));
  });
}

test("one reminder per appointment and step, from two sources to two replicas", { skip: !bin && "no $ONCEHOOK_BIN" }, async () => {
  const n = 25;
  const api = messagingAPI();
  const messagingURL = await listen(api.server);
  const fronts = [front(), front()];
  const frontURLs = await Promise.all(fronts.map((f) => listen(f.server)));
  const dir = mkdtempSync(join(tmpdir(), "oncehook-example-node-"));
  const procs = [];
  try {
    const key = `key: ["json:appointment_id", "json:step"]`;
    writeFileSync(join(dir, "oncehook.yaml"), `listen: 127.0.0.1:0
store: sqlite://${dir}/oncehook.db
api:
  listen: 127.0.0.1:0
  tokens: [{name: ops, token: "${TOKEN}"}]
sources:
  - {name: clinic, preset: generic, unsigned: true, ${key}, destinations: [reminder-a]}
  - {name: crm, preset: generic, unsigned: true, ${key}, destinations: [reminder-b]}
destinations:
  - {name: reminder-a, url: "${frontURLs[0]}", secret: "${SECRET}", retry: {base_delay: 50ms, max_delay: 300ms}}
  - {name: reminder-b, url: "${frontURLs[1]}", secret: "${SECRET}", retry: {base_delay: 50ms, max_delay: 300ms}}
`);
    const gw = await started(bin, ["serve", "--config", join(dir, "oncehook.yaml")], { cwd: dir },
      /listening on (http:\/\/[0-9.:]+)[\s\S]*api:\s+(http:\/\/[0-9.:]+)|api:\s+(http:\/\/[0-9.:]+)[\s\S]*listening on (http:\/\/[0-9.:]+)/,
      openSync(join(dir, "stderr.txt"), "w"));
    procs.push(gw.proc);
    const intake = gw.match[1] ?? gw.match[4];
    const apiURL = gw.match[2] ?? gw.match[3];
    for (const f of fronts) {
      const r = await started(process.execPath, [join(HERE, "..", "reminder.mjs")], {
        env: { ...process.env, ONCEHOOK_API: apiURL, ONCEHOOK_API_TOKEN: TOKEN, WEBHOOK_SECRET: SECRET,
          MESSAGING_URL: messagingURL, LISTEN: "127.0.0.1:0" },
      }, /reminder: listening on (http:\/\/[0-9.:]+)/);
      procs.push(r.proc);
      f.target = r.match[1];
    }

    const posts = [];
    for (let i = 0; i < n; i++) {
      const body = JSON.stringify({ appointment_id: `apt-${i}`, step: "24h", phone: `+55119${String(i).padStart(8, "0")}`,
        text: "Your appointment is tomorrow at 10:00" });
      for (const source of ["clinic", "crm", "clinic", "crm"]) {
        posts.push(fetch(`${intake}/in/${source}`, { method: "POST", headers: { "content-type": "application/json" }, body })
          .then((r) => assert.equal(r.status, 200)));
      }
    }
    await Promise.all(posts);
    // Each replica answers each appointment's delivery 200: one sent the
    // message, the other waited on the key and got the stored result.
    const giveUp = Date.now() + 60_000;
    while ((fronts[0].ok < n || fronts[1].ok < n) && Date.now() < giveUp) await sleep(100);
    assert.deepEqual(fronts.map((f) => f.ok), [n, n], "deliveries answered 200 by each replica");
    await sleep(500);
    assert.equal(api.sent.size, n, `${api.sent.size} of ${n} appointments reminded`);
    for (const [k, m] of api.sent) assert.equal(m.n, 1, `${k}: ${m.n} messages`);
  } catch (e) {
    try {
      console.error(readFileSync(join(dir, "stderr.txt"), "utf8").slice(-4000));
    } catch {}
    throw e;
  } finally {
    for (const p of procs) p.kill("SIGKILL");
    for (const s of [api.server, ...fronts.map((f) => f.server)]) s.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
