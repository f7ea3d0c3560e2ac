// What every call shares: where the API is, its token, one HTTP request with
// a timeout, and the API's one error shape turned into this package's errors.

import {
  ApiError, BusyError, ConflictError, ExpiredError, FailedError, FingerprintError, InvalidError, NotFoundError,
  OncehookError, StaleTokenError, UnreachableError,
} from "./errors.js";

export const API_ENV = "ONCEHOOK_API";
export const TOKEN_ENV = "ONCEHOOK_API_TOKEN";
/** api.listen's default, and the URL used when neither `url` nor $ONCEHOOK_API is given. */
export const DEFAULT_API = "http://127.0.0.1:8081";
export const DEFAULT_TIMEOUT_MS = 10_000;
/** A result may be 16 MiB (effects.max_result's bound), and an answer holds it and more. */
const MAX_ANSWER = 32 << 20;
export const VERSION = "0.1.0";

/** Where the API is and how to reach it; each left out is read from the environment. */
export interface ClientOptions {
  /** The gateway's API listener, e.g. http://127.0.0.1:8081 (default $ONCEHOOK_API, else that). */
  url?: string;
  /** A token from the gateway's api.tokens (default $ONCEHOOK_API_TOKEN). */
  token?: string;
  /** Bounds each HTTP call (default 10 s). */
  timeoutMs?: number;
}

export interface Answer {
  status: number;
  headers: Headers;
  text: string;
}

/** A gateway's API listener, reached with a bearer token. */
export class Api {
  readonly url: string;
  readonly timeoutMs: number;
  readonly #token: string;

  constructor(opts: ClientOptions = {}) {
    const env = typeof process !== "undefined" ? process.env : {};
    const url = opts.url || env[API_ENV] || DEFAULT_API;
    const token = opts.token || env[TOKEN_ENV];
    if (!token) {
      throw new InvalidError(`no API token: pass { token }, or set $${TOKEN_ENV} (a token from the gateway's api.tokens)`, { field: "token" });
    }
    let parsed: URL;
    try {
      parsed = new URL(url);
    } catch {
      throw new InvalidError(`${JSON.stringify(url)} is not an http(s) URL such as ${DEFAULT_API}`, { field: "url" });
    }
    if (parsed.protocol !== "http:" && parsed.protocol !== "https:") {
      throw new InvalidError(`${JSON.stringify(url)} is not an http(s) URL such as ${DEFAULT_API}`, { field: "url" });
    }
    const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (!(timeoutMs > 0)) throw new InvalidError("want a timeout of more than 0 ms", { field: "timeoutMs" });
    this.url = url.replace(/\/+$/, "");
    this.timeoutMs = timeoutMs;
    this.#token = token;
  }

  /**
   * Send one request and return its answer, whatever its status; reject with
   * UnreachableError when no answer came within the timeout (and waitMs).
   */
  async request(method: string, path: string, body?: string | Uint8Array, headers: Record<string, string> = {}, timeoutMs?: number, waitMs = 0): Promise<Answer> {
    // Whole milliseconds: AbortSignal.timeout throws on a fraction. waitMs
    // more for a long poll, which holds its answer that long.
    const t = Math.ceil((timeoutMs === undefined ? this.timeoutMs : Math.max(Math.min(timeoutMs, this.timeoutMs), 50)) + Math.max(waitMs, 0));
    const h: Record<string, string> = {
      authorization: `Bearer ${this.#token}`,
      "user-agent": `oncehook-node/${VERSION}`,
      accept: "application/json",
    };
    if (body !== undefined) h["content-type"] = "application/json";
    for (const [k, v] of Object.entries(headers)) h[k.toLowerCase()] = v;
    const signal = AbortSignal.timeout(t);
    try {
      const res = await fetch(this.url + path, { method, headers: h, body, signal, redirect: "manual" });
      return { status: res.status, headers: res.headers, text: await readBounded(res, `${method} ${path}`) };
    } catch (err) {
      if (err instanceof OncehookError) throw err;
      const why = signal.aborted ? `no answer within ${t} ms` : describe(err);
      throw new UnreachableError(`${method} ${this.url}${path}: ${why}`, { cause: err });
    }
  }
}

async function readBounded(res: Response, what: string): Promise<string> {
  if (!res.body) return "";
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > MAX_ANSWER) {
      await reader.cancel();
      throw new UnreachableError(`${what}: the answer is over ${MAX_ANSWER} bytes, more than this client reads`);
    }
    chunks.push(value);
  }
  const all = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    all.set(c, at);
    at += c.byteLength;
  }
  return new TextDecoder().decode(all);
}

function describe(err: unknown): string {
  if (err instanceof Error) {
    const cause = (err as { cause?: unknown }).cause;
    if (cause instanceof Error && cause.message) return `${err.message}: ${cause.message}`;
    return err.message || err.name;
  }
  return String(err);
}

/** A key as one path segment, as the Go client escapes it: "." and ".." escaped too, or a server would clean them away. */
export function pathEscape(segment: string): string {
  if (segment === "." || segment === "..") return segment.replaceAll(".", "%2E");
  return encodeURIComponent(segment);
}

/** The JSON body of an answer as an object ({} when it is not one). */
export function bodyOf(a: Answer): Record<string, unknown> {
  try {
    const v: unknown = JSON.parse(a.text || "{}");
    return v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

export function parseTime(v: unknown): Date | undefined {
  if (typeof v !== "string" || v === "") return undefined;
  const t = new Date(v);
  return Number.isNaN(t.getTime()) ? undefined : t;
}

/** The error an answer that is not a success stands for. */
export function errorFor(a: Answer, what: string): OncehookError {
  const b = bodyOf(a);
  const reason = typeof b.reason === "string" ? b.reason : "";
  const message = typeof b.error === "string" && b.error ? b.error : `${what}: the API answered ${a.status}`;
  const details = { status: a.status, field: typeof b.field === "string" && b.field ? b.field : undefined };
  switch (a.status) {
    case 400:
      return new InvalidError(message, { ...details, code: reason || "invalid" });
    case 409:
      if (reason === "busy") {
        let retryAfter = parseTime(b.retry_after);
        const header = a.headers.get("retry-after");
        if (!retryAfter && header && /^\d+$/.test(header)) retryAfter = new Date(Date.now() + Number(header) * 1000);
        return new BusyError(message, { ...details, retryAfter });
      }
      if (reason === "failed") return new FailedError(`failed for good: ${message}`, { ...details, reason: message });
      if (reason === "stale_token") return new StaleTokenError(message, details);
      return new ConflictError(message, { ...details, code: reason || "conflict" });
    case 422:
      if (reason === "fingerprint_mismatch") return new FingerprintError(message, details);
      break;
    case 410:
      return new ExpiredError(message, { ...details, code: reason || "expired" });
    case 404:
      return new NotFoundError(message, { ...details, code: reason || "not_found" });
  }
  return new ApiError(message, { ...details, code: reason || `http_${a.status}` });
}

/**
 * The text of a top-level member's value in a JSON object, exactly as it
 * stands: a stored result comes back byte for byte, which JSON.parse and
 * JSON.stringify would not keep (spacing, key order, number spelling).
 */
export function rawMember(text: string, name: string): string | undefined {
  let i = skipSpace(text, 0);
  if (text[i] !== "{") return undefined;
  i = skipSpace(text, i + 1);
  while (i < text.length && text[i] !== "}") {
    const keyEnd = skipValue(text, i);
    const key: unknown = JSON.parse(text.slice(i, keyEnd));
    i = skipSpace(text, keyEnd);
    if (text[i] !== ":") return undefined;
    const start = skipSpace(text, i + 1);
    const end = skipValue(text, start);
    if (key === name) return text.slice(start, end);
    i = skipSpace(text, end);
    if (text[i] === ",") i = skipSpace(text, i + 1);
  }
  return undefined;
}

function skipSpace(text: string, i: number): number {
  while (i < text.length && " \t\r\n".includes(text[i]!)) i++;
  return i;
}

/** The end of the JSON value that starts at i (the text is known to be JSON). */
function skipValue(text: string, i: number): number {
  const c = text[i];
  if (c === '"') {
    for (i++; i < text.length && text[i] !== '"'; i++) if (text[i] === "\\") i++;
    return i + 1;
  }
  if (c === "{" || c === "[") {
    let depth = 0;
    for (; i < text.length; i++) {
      const d = text[i];
      if (d === '"') i = skipValue(text, i) - 1;
      else if (d === "{" || d === "[") depth++;
      else if (d === "}" || d === "]") {
        depth--;
        if (depth === 0) return i + 1;
      }
    }
    return i;
  }
  while (i < text.length && !",}] \t\r\n".includes(text[i]!)) i++;
  return i;
}
