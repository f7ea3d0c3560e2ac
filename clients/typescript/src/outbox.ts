// Publishing to an outbox source over HTTP: POST /v1/publish/{source}.

import { Api, type ClientOptions, bodyOf, errorFor, pathEscape } from "./api.js";
import { InvalidError } from "./errors.js";

/**
 * The gateway's answer to a publish, given once the event was durable:
 * "accepted" (new: it will be delivered), "duplicate" (published before:
 * nothing written, no second delivery) or, for a publish marked
 * `reconcile: true`, "republished" (published before, and counted as a
 * reconciliation pass's, not as a duplicate). `duplicate` is true for both of
 * the latter. `key` is the key as the gateway keeps it and deliveries carry it
 * (a space or a byte a header cannot hold percent-encoded).
 */
export interface Published {
  status: "accepted" | "duplicate" | "republished";
  key: string;
  duplicate: boolean;
  republished: boolean;
  events: Array<Record<string, unknown>>;
}

export interface PublishOptions {
  /** The body's Content-Type, delivered with it (default application/json). */
  contentType?: string;
  /** More headers, for the source's rules to read (type: ["header:X-Event-Type"]). */
  headers?: Record<string, string>;
  /**
   * Marks a reconciliation pass (?reconcile=true): a key published before
   * answers "republished" and is counted so, apart from the duplicates whose
   * rate reveals a provider's trouble, and never raises the duplicate-rate
   * alert; a key never published is accepted and delivered as any other.
   */
  reconcile?: boolean;
  timeoutMs?: number;
}

/**
 * Publishes events to a gateway's outbox sources (outbox: true). `url`
 * defaults to $ONCEHOOK_API (else http://127.0.0.1:8081), `token` to
 * $ONCEHOOK_API_TOKEN (a token that may publish to the source).
 */
export class Outbox {
  readonly #api: Api;

  constructor(opts: ClientOptions = {}) {
    this.#api = new Api(opts);
  }

  /**
   * Publish `body` to `source` under `key` (the Idempotency-Key header; null
   * leaves the key to the source's key: rules). A string or bytes body is
   * sent as it is; any other value as JSON. Publishing again with the same key
   * is safe (it answers "duplicate"), so after an UnreachableError or a 503,
   * publish again.
   */
  async publish(source: string, key: string | null, body: unknown, opts: PublishOptions = {}): Promise<Published> {
    if (!source || source.includes("/")) throw new InvalidError(`${JSON.stringify(source)} is not a source's name`, { field: "source" });
    let data: string | Uint8Array;
    if (typeof body === "string" || body instanceof Uint8Array) data = body;
    else if (body instanceof ArrayBuffer) data = new Uint8Array(body);
    else data = JSON.stringify(body) ?? "null";
    const headers: Record<string, string> = { ...(opts.headers ?? {}), "content-type": opts.contentType ?? "application/json" };
    if (key !== null && key !== undefined) headers["idempotency-key"] = formatKey(key);
    const path = `/v1/publish/${pathEscape(source)}${opts.reconcile ? "?reconcile=true" : ""}`;
    const a = await this.#api.request("POST", path, data, headers, opts.timeoutMs);
    if (a.status !== 200 && a.status !== 202) throw errorFor(a, `publish to ${JSON.stringify(source)}`);
    const b = bodyOf(a);
    const events = Array.isArray(b.events) ? (b.events.filter((e) => e && typeof e === "object") as Array<Record<string, unknown>>) : [];
    const status: Published["status"] =
      b.status === "republished" ? "republished" : b.status === "duplicate" || (b.status === undefined && a.status === 200) ? "duplicate" : "accepted";
    return {
      status, key: events.length ? String(events[0]!.key ?? "") : (key ?? ""),
      duplicate: status !== "accepted", republished: status === "republished", events,
    };
  }
}

const TOKEN_CHAR = /^[A-Za-z0-9!#$%&'*+\-.^_`|~:/]+$/;

/**
 * An Idempotency-Key as the gateway reads it: bare when made of token
 * characters (ord_1042, a UUID), else an RFC 8941 string ("a b"), which the
 * gateway reads as the same key.
 */
export function formatKey(key: string): string {
  if (typeof key !== "string" || key.length < 1 || key.length > 255) {
    throw new InvalidError("an Idempotency-Key has 1 to 255 characters", { field: "Idempotency-Key" });
  }
  if (TOKEN_CHAR.test(key)) return key;
  if (!/^[\x20-\x7e]+$/.test(key)) throw new InvalidError("an Idempotency-Key is printable ASCII only", { field: "Idempotency-Key" });
  return `"${key.replaceAll("\\", "\\\\").replaceAll('"', '\\"')}"`;
}
