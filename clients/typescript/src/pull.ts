// Taking a pull destination's deliveries: POST /v1/destinations/{name}/pull,
// then POST /v1/deliveries/{id}/ack with each one's outcome. For a service
// with no inbound port: the gateway keeps the deliveries until a consumer
// takes them, and hands one out again (next attempt, same Idempotency-Key)
// when its lease ends unacked.

import { Buffer } from "node:buffer";
import { Api, type ClientOptions, bodyOf, errorFor, parseTime, pathEscape } from "./api.js";
import { ConflictError, InvalidError, Permanent, StaleTokenError, UnreachableError } from "./errors.js";
import { verifyDelivery, type Delivery, type VerifyOptions } from "./verify.js";

/**
 * One delivery a pull leased to this consumer: what a push delivery carries
 * (`headers`, `body` byte for byte) and the lease to ack it under (`token`,
 * until `leaseExpiresAt`). `attempt` counts the destination's attempts (1 on
 * the first); `idempotencyKey` is the same on every attempt: dedupe on it.
 */
export interface PulledDelivery {
  id: string;
  source: string;
  key: string;
  type: string | undefined;
  attempt: number;
  idempotencyKey: string;
  token: string;
  leaseExpiresAt: Date | undefined;
  receivedAt: Date | undefined;
  headers: Headers;
  body: Uint8Array;
  /** Set when the destination's transformation set the request's path ("" otherwise): it replaces your URL's, as an HTTP destination's. */
  path: string;
  /** Likewise the query, encoded ("a=1&b=2"). */
  query: string;
  /** Check the destination's signature over the body, as verifyDelivery does for a push. */
  verify(secret: string | string[], opts?: VerifyOptions): Delivery;
}

export interface PullOptions {
  /** At most this many deliveries (default 16, at most 1000). */
  max?: number;
  /** Each is leased this long (default 30 s): ack before it ends, or it is handed out again. */
  leaseMs?: number;
  /** Wait this long for the first (a long poll; default 20 s, at most 60 s). */
  waitMs?: number;
}

/**
 * What the consumer says of one delivery, classified by the gateway as an
 * HTTP destination's answer is: a 2xx `status` is delivered; 400, 401, 403,
 * 404, 410, 422 or a 3xx is permanent (a dead letter); anything else, or an
 * `error` without a status, is retried with the destination's backoff
 * (`retryAfterMs` honoured with a 429 or a 503). Outcome.delivered(),
 * Outcome.retry() and Outcome.permanent() build one.
 */
export interface Outcome {
  status?: number;
  error?: string;
  retryAfterMs?: number;
  latencyMs?: number;
  /** The start of the app's answer, for the operator. */
  response?: string;
}

type Extra = { latencyMs?: number; response?: string };

export const Outcome = {
  delivered(status = 200, extra: Extra = {}): Outcome {
    return { status, ...extra };
  },
  /** Retried: with `afterMs`, not before then (sent as a 503 with Retry-After unless `status` says 429). */
  retry(error = "", opts: Extra & { afterMs?: number; status?: number } = {}): Outcome {
    const { afterMs, status, ...extra } = opts;
    const s = status ?? (afterMs !== undefined ? 503 : undefined);
    return { status: s, error: error || (s ? undefined : "retry"), retryAfterMs: afterMs, ...extra };
  },
  /** Never retried: a dead letter (status 422 unless given). */
  permanent(error = "", opts: Extra & { status?: number } = {}): Outcome {
    const { status, ...extra } = opts;
    return { status: status ?? 422, error: error || undefined, ...extra };
  },
};

export type AckOutcome = "delivered" | "retry" | "permanent";

export interface ConsumerOptions extends ClientOptions {
  /** Which consumer this is: the attempts record it after the token's name. */
  name?: string;
}

export interface ConsumeOptions extends PullOptions {
  /** Stops the loop (checked between pulls: within waitMs). */
  signal?: AbortSignal;
  /** Told of what the loop goes on after: an ack refused, a gateway out of reach (default console.warn). */
  onWarning?: (message: string) => void;
}

/**
 * Takes a pull destination's deliveries (pull: {}) and acks them. `url`
 * defaults to $ONCEHOOK_API (else http://127.0.0.1:8081), `token` to
 * $ONCEHOOK_API_TOKEN (a consumer's token, pull: [names], or one that may
 * change anything); `timeoutMs` bounds each call beyond a pull's wait.
 */
export class Consumer {
  readonly #api: Api;
  readonly name: string;

  constructor(opts: ConsumerOptions = {}) {
    this.#api = new Api(opts);
    this.name = opts.name ?? "";
  }

  /**
   * Lease up to `max` of `destination`'s due deliveries for `leaseMs` each,
   * waiting up to `waitMs` for the first: [] when none came.
   */
  async pull(destination: string, opts: PullOptions = {}): Promise<PulledDelivery[]> {
    if (!destination || destination.includes("/")) {
      throw new InvalidError(`${JSON.stringify(destination)} is not a destination's name`, { field: "destination" });
    }
    const waitMs = opts.waitMs ?? 20_000;
    const body: Record<string, unknown> = { max: opts.max ?? 16, lease: ms(opts.leaseMs ?? 30_000), wait: ms(waitMs) };
    if (this.name) body.consumer = this.name;
    const a = await this.#api.request("POST", `/v1/destinations/${pathEscape(destination)}/pull`, JSON.stringify(body), {}, undefined, waitMs);
    if (a.status !== 200) throw errorFor(a, `pull from ${JSON.stringify(destination)}`);
    const ds = bodyOf(a).deliveries;
    return Array.isArray(ds) ? ds.filter((d) => d && typeof d === "object").map(fromWire) : [];
  }

  /**
   * End `delivery`'s lease with `outcome` (delivered when none), and answer
   * how the gateway classified it. A lease that ended first (it expired: the
   * delivery is handed out again) rejects with ConflictError (lease_unknown)
   * or StaleTokenError.
   */
  async ack(delivery: PulledDelivery, outcome: Outcome = Outcome.delivered()): Promise<AckOutcome> {
    const b: Record<string, unknown> = { token: delivery.token };
    if (outcome.status) b.status = outcome.status;
    if (outcome.error) b.error = outcome.error.slice(0, 4096);
    if (outcome.retryAfterMs !== undefined) b.retry_after = ms(outcome.retryAfterMs);
    if (outcome.latencyMs !== undefined) b.latency = ms(outcome.latencyMs);
    if (outcome.response) b.response = outcome.response.slice(0, 512);
    const a = await this.#api.request("POST", `/v1/deliveries/${pathEscape(delivery.id)}/ack`, JSON.stringify(b));
    if (a.status !== 200) throw errorFor(a, `ack of ${delivery.id}`);
    return String(bodyOf(a).outcome ?? "") as AckOutcome;
  }

  /**
   * Pull `destination` in a loop, run `handler` on each delivery and ack it
   * with its outcome: what the handler resolves to (an Outcome, or a number
   * as a status; nothing is delivered), a retry when it throws, permanent
   * when it throws Permanent. Resolves once `signal` aborts. A gateway out of
   * reach is tried again with backoff; an error answer (403: the token may
   * not pull it, 404: no such pull destination) rejects.
   */
  async consume(destination: string, handler: (d: PulledDelivery) => unknown, opts: ConsumeOptions = {}): Promise<void> {
    const warn = opts.onWarning ?? ((m: string) => console.warn(m));
    let backoff = 500;
    while (!opts.signal?.aborted) {
      let batch: PulledDelivery[];
      try {
        batch = await this.pull(destination, opts);
      } catch (err) {
        if (!(err instanceof UnreachableError)) throw err;
        warn(`oncehook: pull from ${destination}: ${err.message}; again in ${backoff} ms`);
        await sleep(backoff, opts.signal);
        backoff = Math.min(backoff * 2, 30_000);
        continue;
      }
      backoff = 500;
      for (const d of batch) await this.#handle(d, handler, warn);
    }
  }

  async #handle(d: PulledDelivery, handler: (d: PulledDelivery) => unknown, warn: (m: string) => void): Promise<void> {
    const start = performance.now();
    let out: Outcome;
    try {
      const got = await handler(d);
      if (typeof got === "number") out = { status: got };
      else if (got && typeof got === "object" && ("status" in got || "error" in got)) out = { ...(got as Outcome) };
      else out = Outcome.delivered();
    } catch (err) {
      const why = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
      out = err instanceof Permanent ? Outcome.permanent(why) : Outcome.retry(why);
    }
    out.latencyMs ??= performance.now() - start;
    try {
      await this.ack(d, out);
    } catch (err) {
      // The lease ended first, or the ack did not arrive: the delivery comes again, same key.
      if (!(err instanceof ConflictError || err instanceof StaleTokenError || err instanceof UnreachableError)) throw err;
      warn(`oncehook: ack of ${d.id} (${d.idempotencyKey}): ${err.message}`);
    }
  }
}

function fromWire(d: Record<string, unknown>): PulledDelivery {
  const headers = new Headers();
  const raw = d.headers && typeof d.headers === "object" ? (d.headers as Record<string, unknown>) : {};
  for (const [name, values] of Object.entries(raw)) {
    for (const v of Array.isArray(values) ? values : [values]) headers.append(name, String(v));
  }
  const source = String(d.source ?? "");
  const key = String(d.key ?? "");
  const body = new Uint8Array(Buffer.from(typeof d.body === "string" ? d.body : "", "base64"));
  return {
    id: String(d.id ?? ""), source, key, type: typeof d.type === "string" && d.type ? d.type : undefined,
    attempt: Number(d.attempt ?? 0), idempotencyKey: headers.get("idempotency-key") ?? `${source}:${key}`,
    token: String(d.token ?? ""), leaseExpiresAt: parseTime(d.lease_expires_at), receivedAt: parseTime(d.received_at),
    headers, body, path: typeof d.path === "string" ? d.path : "", query: typeof d.query === "string" ? d.query : "",
    verify(secret, opts) {
      return verifyDelivery(body, headers, secret, opts);
    },
  };
}

/** Milliseconds as the API's duration. */
function ms(n: number): string {
  return `${Math.max(Math.round(n), 0)}ms`;
}

function sleep(t: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, t);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}
