// Checking a delivery from oncehook: its Standard Webhooks signature, over
// the raw bytes of the body, and what its headers say about it.

import { Buffer } from "node:buffer";
import { createHmac, timingSafeEqual } from "node:crypto";
import { InvalidError, SignatureError } from "./errors.js";

/** How far a signature's timestamp may be from now, both ways (the spec's 5 minutes). */
export const DEFAULT_TOLERANCE_SEC = 300;

/**
 * Headers as any server hands them: fetch's Headers, Node's
 * IncomingHttpHeaders (Express's req.headers), a plain object in any case, or
 * a list of pairs.
 */
export type HeadersLike =
  | Headers
  | Record<string, string | string[] | undefined>
  | Iterable<readonly [string, string]>;

/**
 * What a delivery's headers say. `idempotencyKey` is the Idempotency-Key
 * header ("stripe:evt_1"), the same on every attempt and replay of the event:
 * dedupe on it, or use it as an effect's key. `key` is the event's key within
 * its `source` ("evt_1"). `type` is the event's type (URL-escaped by the
 * gateway when it holds characters a header cannot); `attempt` counts this
 * destination's attempts (1 on the first); `deliveryId` is this
 * destination's delivery; `id` and `timestamp` are the signature's.
 */
export interface Delivery {
  idempotencyKey: string;
  source: string;
  key: string;
  type: string | undefined;
  attempt: number | undefined;
  deliveryId: string | undefined;
  id: string | undefined;
  timestamp: Date | undefined;
  /** An event older than what the destination already has for its entity, delivered because the source asks for stale ones. */
  stale: boolean;
  currentVersion: string | undefined;
}

export interface VerifyOptions {
  /** Seconds the timestamp may be off from now, both ways (default 300). */
  toleranceSec?: number;
  /** Now, in Unix seconds (for tests). */
  now?: number;
}

const BODY_HINT = "pass the body's raw bytes (Express: express.raw({ type: \"*/*\" }) and req.body; fetch: new Uint8Array(await request.arrayBuffer())): a decoded body need not be the bytes that were signed";

/** Read a delivery's headers without checking a signature (a destination without secret:). */
export function readDelivery(headers: HeadersLike): Delivery {
  const h = collect(headers);
  const first = (name: string): string | undefined => h.get(name)?.[0]?.trim();
  const idempotencyKey = first("idempotency-key") ?? "";
  const source = first("x-oncehook-source") ?? "";
  const key = source && idempotencyKey.startsWith(`${source}:`) ? idempotencyKey.slice(source.length + 1) : idempotencyKey;
  const attempt = first("x-oncehook-attempt");
  const ts = first("webhook-timestamp");
  return {
    idempotencyKey, source, key, type: first("x-oncehook-type"),
    attempt: attempt && /^\d+$/.test(attempt) ? Number(attempt) : undefined,
    deliveryId: first("x-oncehook-delivery-id"), id: first("webhook-id"),
    timestamp: ts && /^\d+$/.test(ts) ? new Date(Number(ts) * 1000) : undefined,
    stale: (first("x-oncehook-stale") ?? "").toLowerCase() === "true", currentVersion: first("x-oncehook-current-version"),
  };
}

/**
 * Check that oncehook signed this delivery with `secret` (the destination's
 * whsec_...; several while rotating), over the body's raw bytes, whatever
 * their encoding, within the tolerance; then read it (readDelivery). Throws
 * SignatureError, whose `code` says why, when it does not hold.
 */
export function verifyDelivery(body: Uint8Array | ArrayBuffer, headers: HeadersLike, secret: string | string[], opts: VerifyOptions = {}): Delivery {
  let bytes: Uint8Array;
  if (body instanceof Uint8Array) bytes = body;
  else if (body instanceof ArrayBuffer) bytes = new Uint8Array(body);
  else throw new TypeError(`verifyDelivery: the body is ${body === null ? "null" : typeof body}; ${BODY_HINT}`);
  const keys = (Array.isArray(secret) ? secret : [secret]).map(secretKey);
  if (keys.length === 0) throw new InvalidError("no secret given", { field: "secret" });
  const h = collect(headers);
  const id = h.get("webhook-id")?.[0]?.trim();
  const ts = h.get("webhook-timestamp")?.[0]?.trim();
  const sigs = h.get("webhook-signature") ?? [];
  for (const [name, v] of [["webhook-id", id], ["webhook-timestamp", ts]] as const) {
    if (!v) throw new SignatureError(`no ${name} header: not a signed delivery`, { code: "missing_header" });
  }
  if (sigs.length === 0) throw new SignatureError("no webhook-signature header: not a signed delivery", { code: "missing_header" });
  if (!/^\d+$/.test(ts!)) throw new SignatureError(`webhook-timestamp ${JSON.stringify(ts)} is not Unix seconds`, { code: "bad_timestamp" });
  const given: Buffer[] = [];
  // Entries are space-separated; a Headers object joins a repeated header with ", ".
  for (const entry of sigs.join(" ").split(/\s+/)) {
    const [version, b64] = entry.replace(/,$/, "").split(",", 2);
    if (version === "v1" && b64 && /^[A-Za-z0-9+/]+={0,2}$/.test(b64)) given.push(Buffer.from(b64, "base64"));
  }
  const matched = keys.some((k) => {
    const want = createHmac("sha256", k).update(`${id}.${ts}.`, "utf8").update(bytes).digest();
    return given.some((g) => g.length === want.length && timingSafeEqual(g, want));
  });
  if (!matched) throw new SignatureError("the signature does not match the body (altered, or another secret)", { code: "no_match" });
  const tolerance = opts.toleranceSec ?? DEFAULT_TOLERANCE_SEC;
  const age = (opts.now ?? Date.now() / 1000) - Number(ts);
  if (Math.abs(age) > tolerance) {
    throw new SignatureError(`the signature was made ${Math.abs(age).toFixed(0)}s ${age > 0 ? "ago" : "ahead"}, over the ${tolerance}s tolerance`, { code: "timestamp_out_of_tolerance" });
  }
  return readDelivery(headers);
}

function secretKey(secret: string): Buffer {
  const raw = secret.startsWith("whsec_") ? secret.slice("whsec_".length) : secret;
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(raw) || raw.length % 4 !== 0) {
    throw new InvalidError("the secret is not whsec_<base64>", { field: "secret" });
  }
  const key = Buffer.from(raw, "base64");
  if (key.length === 0) throw new InvalidError("the secret is empty after whsec_: anybody could sign with it", { field: "secret" });
  return key;
}

function collect(headers: HeadersLike): Map<string, string[]> {
  const out = new Map<string, string[]>();
  const add = (name: string, value: string | string[] | undefined): void => {
    if (value === undefined) return;
    const list = out.get(name.toLowerCase()) ?? [];
    for (const v of Array.isArray(value) ? value : [value]) list.push(String(v));
    out.set(name.toLowerCase(), list);
  };
  if (typeof Headers !== "undefined" && headers instanceof Headers) {
    headers.forEach((value, name) => add(name, value));
  } else if (Symbol.iterator in Object(headers)) {
    for (const [name, value] of headers as Iterable<readonly [string, string]>) add(name, value);
  } else {
    for (const [name, value] of Object.entries(headers as Record<string, string | string[] | undefined>)) add(name, value);
  }
  return out;
}
