// The effects ledger over HTTP: every side effect once, however many
// processes ask for it, with the semantics of the Go package's effect.Do.

import { Api, type Answer, type ClientOptions, bodyOf, errorFor, parseTime, pathEscape, rawMember } from "./api.js";
import {
  ApiError, BusyError, InvalidError, LeaseLostError, OncehookError, Permanent, ResultRefusedError, UnreachableError,
} from "./errors.js";

/** How long a claim is the caller's (30 s), renewed every third of it while the work runs. */
export const DEFAULT_LEASE_MS = 30_000;
/** How long `once` waits, at most, while another owner holds the key (30 s). */
export const DEFAULT_WAIT_MS = 30_000;
/** How long, at most, an outcome is tried again while the ledger cannot be reached. */
const RECORD_FOR_MS = 30_000;
const MAX_REASON = 4096;
const MAX_KEY = 512;

/** JSON already encoded, completed as it is: the ledger stores this text and gives it back to every later claim as it is. */
export class RawJSON {
  constructor(readonly json: string) {}
}

/** A successful claim: owned (token, attempt, reclaimed, leaseExpiresAt) or alreadyDone, with the stored rawResult. */
export interface Claim {
  key: string;
  token: string;
  attempt: number;
  reclaimed: boolean;
  leaseExpiresAt: Date | undefined;
  alreadyDone: boolean;
  /** The stored result's JSON text, exactly as it was stored (alreadyDone only). */
  rawResult: string | undefined;
}

export interface LedgerOptions extends ClientOptions {
  /** The default lease of `once` and `claim` (30 s; at most the gateway's effects.max_lease). */
  leaseMs?: number;
  /** The default wait of `once` while a key is busy (30 s). */
  waitMs?: number;
}

export interface OnceOptions {
  /** How long a claim is the caller's; renewed every third of it while the function runs. */
  leaseMs?: number;
  /** How long to wait while another owner holds the key before rejecting with BusyError; 0 rejects at once. */
  waitMs?: number;
  /** When the effect stops being worth doing: after it a key never done is expired (ExpiredError). */
  deadline?: Date;
  /** A hash of the request the key stands for: the same key claimed with another is FingerprintError. */
  fingerprint?: string;
  /** Which errors fail the key for good rather than release it (besides Permanent). */
  isPermanent?: (err: unknown) => boolean;
}

export interface ClaimOptions {
  leaseMs?: number;
  deadline?: Date;
  fingerprint?: string;
  timeoutMs?: number;
}

/**
 * The claim a running effect holds. `attempt` counts the claims that took the
 * key; `reclaimed` says a previous owner stopped halfway (it crashed, or hung
 * until its lease expired), so check whether the side effect already happened
 * (look it up by the same key downstream) before doing it again.
 */
export interface Effect {
  readonly key: string;
  readonly token: string;
  readonly attempt: number;
  readonly reclaimed: boolean;
  readonly leaseMs: number;
  /** The lease's expiry, as last renewed. */
  readonly leaseExpiresAt: Date | undefined;
  /** Aborted, with a LeaseLostError as its reason, once the lease could not be kept: pass it to fetch and the like. */
  readonly signal: AbortSignal;
  /** True once the lease was lost: stop acting as the owner. */
  readonly lost: boolean;
  /** Throws the LeaseLostError if the lease was lost: call it before each step that acts on the outside world. */
  check(): void;
}

/**
 * oncehook's effects ledger on a running gateway's API listener. `url`
 * defaults to $ONCEHOOK_API (else http://127.0.0.1:8081), `token` to
 * $ONCEHOOK_API_TOKEN; `timeoutMs` bounds each HTTP call.
 */
export class Ledger {
  readonly #api: Api;
  readonly leaseMs: number;
  readonly waitMs: number;

  constructor(opts: LedgerOptions = {}) {
    this.#api = new Api(opts);
    this.leaseMs = positive(opts.leaseMs ?? DEFAULT_LEASE_MS, "leaseMs");
    this.waitMs = opts.waitMs ?? DEFAULT_WAIT_MS;
  }

  get url(): string {
    return this.#api.url;
  }

  /**
   * Run `fn` at most once for `key`: claim it; when it was done before, resolve
   * to the stored result without running `fn`; when it is busy, wait (up to
   * `waitMs`), then reject with BusyError; run `fn` while renewing the lease
   * every third of it; complete with fn's result (JSON), or, when `fn` throws,
   * release the key for a later attempt, or fail it for good when the error is
   * a Permanent (or `isPermanent` says so).
   */
  async once<T>(key: string, fn: (effect: Effect) => T | Promise<T>, opts: OnceOptions = {}): Promise<T> {
    const run = new Run(this, key, {
      leaseMs: positive(opts.leaseMs ?? this.leaseMs, "leaseMs"),
      waitMs: opts.waitMs ?? this.waitMs,
      deadline: opts.deadline,
      fingerprint: opts.fingerprint,
      isPermanent: opts.isPermanent,
    });
    const claim = await run.start();
    if (claim.alreadyDone) return JSON.parse(claim.rawResult ?? "null") as T;
    let result: T;
    try {
      result = await fn(run.effect!);
    } catch (err) {
      await run.failed(err);
      throw err;
    }
    await run.succeeded(result);
    return result;
  }

  // The steps, for work that does not fit one call.

  /**
   * Take `key`'s lease once, without waiting: a Claim, owned or alreadyDone;
   * or BusyError, FailedError, ExpiredError, FingerprintError, InvalidError,
   * UnreachableError.
   */
  async claim(key: string, opts: ClaimOptions = {}): Promise<Claim> {
    checkKey(key);
    const body: Record<string, unknown> = { lease: positive(opts.leaseMs ?? this.leaseMs, "leaseMs") / 1000 };
    if (opts.fingerprint) body.fingerprint = opts.fingerprint;
    if (opts.deadline) body.deadline = opts.deadline.toISOString();
    const a = await this.#api.request("POST", `/v1/effects/${pathEscape(key)}/claim`, JSON.stringify(body), {}, opts.timeoutMs);
    if (a.status === 201) {
      const b = bodyOf(a);
      return {
        key, token: String(b.token ?? ""), attempt: Number(b.attempt ?? 0), reclaimed: b.reclaimed === true,
        leaseExpiresAt: parseTime(b.lease_expires_at), alreadyDone: false, rawResult: undefined,
      };
    }
    if (a.status === 200) {
      const raw = rawMember(a.text, "result");
      if (raw === undefined) throw new ApiError(`claim ${JSON.stringify(key)}: a done answer without its result`, { code: "malformed", status: 200 });
      return { key, token: "", attempt: 0, reclaimed: false, leaseExpiresAt: undefined, alreadyDone: true, rawResult: raw };
    }
    throw errorFor(a, `claim ${JSON.stringify(key)}`);
  }

  /** Mark `key` done with `result` (any JSON value, or RawJSON stored as it is); StaleTokenError when the token is not the owner's. */
  async complete(key: string, token: string, result: unknown, opts: { timeoutMs?: number } = {}): Promise<void> {
    // Built by hand: the result is sent, stored and given back as this text.
    const body = `{"token":${JSON.stringify(token)},"result":${encodeResult(result)}}`;
    await this.#call(key, "complete", body, opts.timeoutMs);
  }

  /** Give the lease back after a retryable failure: claimable at once, as the next attempt. */
  async release(key: string, token: string, reason = "", opts: { timeoutMs?: number } = {}): Promise<void> {
    await this.#call(key, "release", JSON.stringify({ token, error: truncateReason(reason) }), opts.timeoutMs);
  }

  /** Mark `key` failed for good; only an operator's reset reopens it. */
  async fail(key: string, token: string, reason = "", opts: { timeoutMs?: number } = {}): Promise<void> {
    await this.#call(key, "fail", JSON.stringify({ token, error: truncateReason(reason) }), opts.timeoutMs);
  }

  /** Extend the lease by `leaseMs` from now; resolves to its new expiry. */
  async renew(key: string, token: string, leaseMs?: number, opts: { timeoutMs?: number } = {}): Promise<Date | undefined> {
    const lease = positive(leaseMs ?? this.leaseMs, "leaseMs") / 1000;
    const a = await this.#call(key, "renew", JSON.stringify({ token, lease }), opts.timeoutMs);
    return parseTime(bodyOf(a).lease_expires_at);
  }

  /** The key's record, with its attempts (never its token), as the API answers it; NotFoundError when there is none. */
  async get(key: string, opts: { timeoutMs?: number } = {}): Promise<Record<string, unknown>> {
    checkKey(key);
    const a = await this.#api.request("GET", `/v1/effects/${pathEscape(key)}`, undefined, {}, opts.timeoutMs);
    if (a.status !== 200) throw errorFor(a, `get ${JSON.stringify(key)}`);
    return bodyOf(a);
  }

  async #call(key: string, op: string, body: string, timeoutMs?: number): Promise<Answer> {
    checkKey(key);
    const a = await this.#api.request("POST", `/v1/effects/${pathEscape(key)}/${op}`, body, {}, timeoutMs);
    if (a.status !== 200) throw errorFor(a, `${op} ${JSON.stringify(key)}`);
    return a;
  }
}

interface RunOptions {
  leaseMs: number;
  waitMs: number;
  deadline: Date | undefined;
  fingerprint: string | undefined;
  isPermanent: ((err: unknown) => boolean) | undefined;
}

class RunningEffect implements Effect {
  readonly #abort = new AbortController();
  leaseExpiresAt: Date | undefined;
  readonly token: string;
  readonly attempt: number;
  readonly reclaimed: boolean;

  constructor(readonly key: string, claim: Claim, readonly leaseMs: number) {
    this.token = claim.token;
    this.attempt = claim.attempt;
    this.reclaimed = claim.reclaimed;
    this.leaseExpiresAt = claim.leaseExpiresAt;
  }

  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  get lost(): boolean {
    return this.#abort.signal.aborted;
  }

  get lostError(): LeaseLostError | undefined {
    return this.lost ? (this.#abort.signal.reason as LeaseLostError) : undefined;
  }

  lose(err: LeaseLostError): void {
    this.#abort.abort(err);
  }

  check(): void {
    if (this.lost) throw this.#abort.signal.reason;
  }
}

/** One call of `once`: claim (waiting while busy), renew while the work runs, then record its outcome. */
class Run {
  effect: RunningEffect | undefined;
  #until = 0; // the lease's end by this process's clock, as last known
  #stopped = false;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #renewing: Promise<void> | undefined;

  constructor(readonly ledger: Ledger, readonly key: string, readonly opts: RunOptions) {}

  /**
   * Claim the key, waiting as Retry-After says (checking sooner, since an
   * owner that completes early frees it) until waitMs runs out. An owned
   * claim starts the renewal.
   */
  async start(): Promise<Claim> {
    const giveUp = performance.now() + Math.max(this.opts.waitMs, 0);
    let pause = 50;
    for (;;) {
      const sent = performance.now();
      let c: Claim;
      try {
        c = await this.ledger.claim(this.key, { leaseMs: this.opts.leaseMs, deadline: this.opts.deadline, fingerprint: this.opts.fingerprint });
      } catch (err) {
        if (!(err instanceof BusyError)) throw err;
        const left = giveUp - performance.now();
        if (left <= 0) {
          const waited = this.opts.waitMs > 0 ? ` (waited ${this.opts.waitMs} ms)` : "";
          throw new BusyError(`${JSON.stringify(this.key)} is busy: another owner holds its lease${waited}`,
            { status: err.status, retryAfter: err.retryAfter, cause: err });
        }
        let nap = pause * (0.5 + Math.random() / 2);
        if (err.retryAfter) nap = Math.min(nap, Math.max(err.retryAfter.getTime() - Date.now(), 10));
        await sleep(Math.min(nap, left));
        pause = Math.min(pause * 2, 1000);
        continue;
      }
      if (!c.alreadyDone) {
        this.#until = sent + this.opts.leaseMs;
        this.effect = new RunningEffect(this.key, c, this.opts.leaseMs);
        this.#schedule();
      }
      return c;
    }
  }

  /**
   * Renew every third of the lease. A renewal the ledger refuses loses the
   * lease at once; one that gets no answer (a gateway restarting) is tried at
   * the next tick, until the lease as last renewed has run out.
   */
  #schedule(): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#renewing = this.#renew().finally(() => {
        this.#renewing = undefined;
        if (!this.effect!.lost) this.#schedule();
      });
    }, Math.max(this.opts.leaseMs / 3, 1));
  }

  async #renew(): Promise<void> {
    const eff = this.effect!;
    const sent = performance.now();
    try {
      const exp = await this.ledger.renew(this.key, eff.token, this.opts.leaseMs, { timeoutMs: Math.max(this.#until - sent, 50) });
      this.#until = sent + this.opts.leaseMs;
      eff.leaseExpiresAt = exp;
    } catch (err) {
      if (this.#stopped) return;
      if (err instanceof OncehookError && answered(err)) {
        eff.lose(new LeaseLostError(`${JSON.stringify(this.key)}: lease lost: ${err.detail}`, { cause: err }));
      } else if (performance.now() >= this.#until) {
        const why = err instanceof OncehookError ? err.detail : String(err);
        eff.lose(new LeaseLostError(`${JSON.stringify(this.key)}: lease lost: no renewal got through before it ran out (${why})`, { cause: err }));
      }
    }
  }

  async #halt(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#renewing;
  }

  /**
   * Complete with result, trying again while the ledger cannot be reached
   * (until the lease runs out, 30 s at most). A result the ledger (or JSON)
   * refuses fails the key for good: the work ran, and a pending key would be
   * handed to the next claimer to run again.
   */
  async succeeded(result: unknown): Promise<void> {
    await this.#halt();
    const eff = this.effect!;
    let raw: string;
    try {
      raw = encodeResult(result);
    } catch (err) {
      return this.#refused(err as InvalidError);
    }
    try {
      await this.#record(() => this.ledger.complete(this.key, eff.token, new RawJSON(raw)));
    } catch (err) {
      if (err instanceof InvalidError) return this.#refused(err);
      throw err;
    }
  }

  async #refused(err: InvalidError): Promise<never> {
    const eff = this.effect!;
    const reason = truncateReason(`done, but its result could not be stored: ${err.detail}`);
    await this.#record(() => this.ledger.fail(this.key, eff.token, reason));
    throw new ResultRefusedError(`${JSON.stringify(this.key)}: the work was done, but its result was refused (${err.detail}), so the key is failed for good`, { cause: err });
  }

  /**
   * Release the key for a later attempt, or fail it for good when err is
   * permanent; the caller rethrows err. When the lease was lost, reject with
   * the LeaseLostError instead: the key is not this owner's to release.
   */
  async failed(err: unknown): Promise<void> {
    await this.#halt();
    const eff = this.effect!;
    const lost = eff.lostError;
    if (lost) {
      throw new LeaseLostError(lost.detail, { cause: err });
    }
    const text = err instanceof Error ? (err.message ? `${err.name}: ${err.message}` : err.name) : String(err);
    const permanent = err instanceof Permanent || (this.opts.isPermanent?.(err) ?? false);
    const step = permanent ? "fail" : "release";
    try {
      await this.#record(() => this.ledger[step](this.key, eff.token, truncateReason(text)));
    } catch (rerr) {
      // The function's own error is what the caller gets; the key stays
      // pending until its lease expires, then goes to the next claimer.
      console.warn(`oncehook: ${JSON.stringify(this.key)}: could not ${step} the key after ${text}: ${String(rerr)}`);
    }
  }

  async #record(call: () => Promise<void>): Promise<void> {
    const until = Math.min(this.#until, performance.now() + RECORD_FOR_MS);
    let pause = 50;
    for (;;) {
      try {
        return await call();
      } catch (err) {
        if (!(err instanceof OncehookError) || answered(err) || performance.now() + pause >= until) throw err;
      }
      await sleep(pause);
      pause = Math.min(pause * 2, 2000);
    }
  }
}

/** Whether err is the ledger's answer, rather than a failure to reach it (no answer, or a 5xx: the gateway could not commit). */
function answered(err: OncehookError): boolean {
  if (err instanceof UnreachableError) return false;
  return !(err.status !== undefined && err.status >= 500);
}

function encodeResult(result: unknown): string {
  if (result instanceof RawJSON) {
    try {
      JSON.parse(result.json);
    } catch (err) {
      throw new InvalidError(`not JSON: ${(err as Error).message}`, { field: "result" });
    }
    return result.json;
  }
  let text: string | undefined;
  try {
    text = JSON.stringify(result);
  } catch (err) {
    throw new InvalidError(`not JSON: ${(err as Error).message}`, { field: "result" });
  }
  return text ?? "null";
}

/**
 * A reason the ledger takes: no NUL, at most 4,096 bytes of UTF-8 cut at a
 * character's boundary. One it refused would leave the key pending.
 */
function truncateReason(s: string): string {
  const b = new TextEncoder().encode(s.replaceAll("\u0000", "\uFFFD"));
  let cut = Math.min(b.length, MAX_REASON);
  while (cut < b.length && cut > 0 && (b[cut]! & 0xc0) === 0x80) cut--;
  return new TextDecoder().decode(b.subarray(0, cut));
}

function checkKey(key: string): void {
  if (typeof key !== "string" || key === "") throw new InvalidError("the key is empty (or not a string)", { field: "key" });
  if (new TextEncoder().encode(key).length > MAX_KEY) throw new InvalidError(`the key is over ${MAX_KEY} bytes`, { field: "key" });
}

function positive(ms: number, field: string): number {
  if (!(ms > 0)) throw new InvalidError(`want more than 0 ms, not ${ms}`, { field });
  return ms;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
