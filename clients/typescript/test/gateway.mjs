// A real oncehook gateway for the tests: the binary, started on a SQLite
// store in a temporary folder, on ports it picks itself (read back from its
// banner). The binary is $ONCEHOOK_BIN, else built once from the checkout
// with go. Without either the tests skip, unless $CI is set, where they fail.

import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

export const TOKEN = "tok_clients_typescript_0123456789";
/** A consumer's token: pull: [laptop], and nothing else. */
export const PULL_TOKEN = "tok_clients_typescript_pull_0123456789";
export const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const HERE = dirname(fileURLToPath(import.meta.url));
const CHECKOUT = join(HERE, "..", "..", "..");

let built;

/** The gateway's binary, or undefined (and the reason) when the tests should skip. */
export function binary() {
  if (process.env.ONCEHOOK_BIN) return { bin: process.env.ONCEHOOK_BIN };
  if (built) return { bin: built };
  let go;
  try {
    go = execFileSync("sh", ["-c", "command -v go"], { encoding: "utf8" }).trim();
  } catch {
    go = "";
  }
  if (!go || !existsSync(join(CHECKOUT, "go.mod"))) {
    if (process.env.CI) throw new Error("no gateway binary: set ONCEHOOK_BIN, or run from the checkout with go installed");
    return { skip: "no gateway binary ($ONCEHOOK_BIN) and no go to build one" };
  }
  const folder = mkdtempSync(join(tmpdir(), "oncehook-bin-"));
  process.once("exit", () => rmSync(folder, { recursive: true, force: true }));
  built = join(folder, "oncehook");
  execFileSync(go, ["build", "-o", built, "./cmd/oncehook"], { cwd: CHECKOUT, stdio: "inherit" });
  return { bin: built };
}

export class Gateway {
  constructor(bin, sinkURL = "http://127.0.0.1:9/") {
    this.bin = bin;
    this.dir = mkdtempSync(join(tmpdir(), "oncehook-gw-"));
    this.config = join(this.dir, "oncehook.yaml");
    writeFileSync(this.config, `listen: 127.0.0.1:0
store: sqlite://${this.dir}/oncehook.db
api:
  listen: 127.0.0.1:0
  tokens:
    - {name: ops, token: "${TOKEN}"}
    - {name: dev, token: "${PULL_TOKEN}", pull: [laptop]}
sources:
  - name: orders
    outbox: true
    type: ["header:X-Event-Type"]
    destinations: [app]
  - name: jobs
    outbox: true
    type: ["header:X-Event-Type"]
    destinations: [laptop, other, routed]
destinations:
  - name: routed
    pull: {}
    transform:
      inline: 'addHandler("transform", (request) => { request.path = "/jobs/" + request.body.job; request.query = "v=2"; return request; })'
  - name: laptop
    pull: {}
    secret: "${SECRET}"
    retry: {max_attempts: 5, base_delay: 100ms, max_delay: 200ms}
  - name: other
    pull: {}
  - name: app
    url: "${sinkURL}"
    secret: "${SECRET}"
    timeout: 5s
    retry: {max_attempts: 5, base_delay: 100ms, max_delay: 200ms}
`);
    this.api = "";
    this.intake = "";
  }

  /** Start it; again on the same addresses after a stop. */
  async start() {
    const args = ["serve", "--config", this.config];
    if (this.api) args.push("--listen", this.intake.replace("http://", ""), "--api-listen", this.api.replace("http://", ""));
    const outPath = join(this.dir, "stdout.txt");
    writeFileSync(outPath, "");
    this.proc = spawn(this.bin, args, { cwd: this.dir, stdio: ["ignore", openSync(outPath, "w"), openSync(join(this.dir, "stderr.txt"), "a")] });
    const exited = new Promise((resolve) => this.proc.once("exit", resolve));
    this.exited = exited;
    const giveUp = Date.now() + 30_000;
    while (Date.now() < giveUp) {
      const text = readFileSync(outPath, "utf8");
      const api = /api:\s+(http:\/\/[0-9.:]+)/.exec(text);
      const intake = /listening on (http:\/\/[0-9.:]+)/.exec(text);
      if (api && intake) {
        this.api = api[1];
        this.intake = intake[1];
        return this;
      }
      if (this.proc.exitCode !== null) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`the gateway did not start: ${this.log()}`);
  }

  async stop() {
    if (this.proc && this.proc.exitCode === null && this.proc.signalCode === null) {
      this.proc.kill("SIGTERM");
      const t = setTimeout(() => this.proc.kill("SIGKILL"), 20_000);
      await this.exited;
      clearTimeout(t);
    }
    this.proc = undefined;
  }

  async close() {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }

  log() {
    return ["stdout.txt", "stderr.txt"].map((f) => {
      try {
        return readFileSync(join(this.dir, f), "utf8").slice(-4000);
      } catch {
        return "";
      }
    }).join("\n");
  }

  /** test/worker.mjs in a process of its own, configured from the environment. */
  worker(...args) {
    const child = spawn(process.execPath, [join(HERE, "worker.mjs"), ...args], {
      env: { ...process.env, ONCEHOOK_API: this.api, ONCEHOOK_API_TOKEN: TOKEN },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.setEncoding("utf8").on("data", (d) => (out += d));
    child.stderr.setEncoding("utf8").on("data", (d) => (err += d));
    child.result = new Promise((resolve, reject) => {
      child.once("exit", (code, signal) => {
        if (code === 0) resolve(JSON.parse(out));
        else reject(new Error(`worker ${args.join(" ")} exited ${code ?? signal}: ${err}`));
      });
    });
    child.result.catch(() => {}); // awaited by the test, or the worker was killed on purpose
    return child;
  }
}
