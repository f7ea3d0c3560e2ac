/**
 * The errors of oncehook's client: one class per answer a program acts on.
 * Every one is an {@link OncehookError} carrying `code`, the API's own
 * `reason` ("busy", "stale_token", "invalid", ...), so that a log line names
 * what the gateway said; `status` is the HTTP status when an answer came.
 */

export interface ErrorDetails {
  /** The API's `reason`, or this client's own word such as "unreachable". */
  code?: string;
  /** The HTTP status; undefined when no answer came. */
  status?: number;
  /** The request field at fault, when the API named one. */
  field?: string;
  cause?: unknown;
}

/** Anything the API refused, or could not be asked. */
export class OncehookError extends Error {
  /** The API's `reason` ("busy", "stale_token", ...) or this client's word. */
  readonly code: string;
  /** The HTTP status; undefined when no answer came. */
  readonly status: number | undefined;
  /** The request field at fault, when the API named one. */
  readonly field: string | undefined;
  /** The message without the code and status. */
  readonly detail: string;

  constructor(message: string, details: ErrorDetails = {}, defaultCode = "error") {
    const code = details.code ?? defaultCode;
    const where = details.field ? `, field ${details.field}` : "";
    const status = details.status ? ` ${details.status}` : "";
    super(`oncehook: ${message} (${code}${status}${where})`, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = new.target.name;
    this.code = code;
    this.status = details.status;
    this.field = details.field;
    this.detail = message;
  }
}

/** An answer of the API that no narrower class stands for ("unauthorized", "read_only", "unavailable", ...). */
export class ApiError extends OncehookError {}

/**
 * No answer came: the gateway is down or restarting, the network cut, or the
 * call's timeout passed. Safe to try again: every call is fenced (the ledger's
 * token) or keyed (a publish's Idempotency-Key).
 */
export class UnreachableError extends OncehookError {
  constructor(message: string, details: ErrorDetails = {}) {
    super(message, details, "unreachable");
  }
}

/** The API refused the request's input (400), or this client did before sending: `field` names what. */
export class InvalidError extends OncehookError {
  constructor(message: string, details: ErrorDetails = {}) {
    super(message, details, "invalid");
  }
}

/** Another owner holds the key's lease; `retryAfter` is when that lease expires, unless renewed or completed first. */
export class BusyError extends OncehookError {
  retryAfter: Date | undefined;
  constructor(message: string, details: ErrorDetails & { retryAfter?: Date } = {}) {
    super(message, details, "busy");
    this.retryAfter = details.retryAfter;
  }
}

/** The key was failed for good; `reason` is what its owner said. Only an operator's reset reopens it. */
export class FailedError extends OncehookError {
  readonly reason: string;
  constructor(message: string, details: ErrorDetails & { reason?: string } = {}) {
    super(message, details, "failed");
    this.reason = details.reason ?? "";
  }
}

/**
 * The token is not the owner's any more: the lease expired and another process
 * took the key over (or it was released). Its work is not recorded: the new
 * owner's is. This is a dead owner's late complete.
 */
export class StaleTokenError extends OncehookError {
  constructor(message: string, details: ErrorDetails = {}) {
    super(message, details, "stale_token");
  }
}

/**
 * The lease could not be kept while the function ran: a renewal was refused
 * (the key was taken over), or none got through before the lease ran out.
 * It is the reason of `effect.signal`, and what `once` rejects with when the
 * function failed meanwhile (its own error as the cause).
 */
export class LeaseLostError extends OncehookError {
  constructor(message: string, details: ErrorDetails = {}) {
    super(message, details, "lease_lost");
  }
}

/** The claim's deadline passed before the key was done. */
export class ExpiredError extends OncehookError {
  constructor(message: string, details: ErrorDetails = {}) {
    super(message, details, "expired");
  }
}

/** The key was claimed before with another fingerprint: the key is too coarse for its requests. */
export class FingerprintError extends OncehookError {
  constructor(message: string, details: ErrorDetails = {}) {
    super(message, details, "fingerprint_mismatch");
  }
}

/** The record is not in a state the operation applies to. */
export class ConflictError extends OncehookError {
  constructor(message: string, details: ErrorDetails = {}) {
    super(message, details, "conflict");
  }
}

/** No such key, source or endpoint. */
export class NotFoundError extends OncehookError {
  constructor(message: string, details: ErrorDetails = {}) {
    super(message, details, "not_found");
  }
}

/**
 * The function ran, but its result could not be stored (not JSON, or over the
 * gateway's effects.max_result): the key is failed for good with that reason,
 * so that nobody runs the work again.
 */
export class ResultRefusedError extends OncehookError {
  constructor(message: string, details: ErrorDetails = {}) {
    super(message, details, "result_refused");
  }
}

/**
 * A delivery's signature does not hold: `code` says why ("missing_header",
 * "bad_timestamp", "timestamp_out_of_tolerance", "no_match").
 */
export class SignatureError extends OncehookError {
  constructor(message: string, details: ErrorDetails = {}) {
    super(message, details, "no_match");
  }
}

/**
 * Throw it (`throw new Permanent("invalid phone", { cause: err })`) from an
 * effect when no retry can fix the failure: the key is failed for good
 * instead of released for the next attempt. `once` rejects with it as thrown.
 */
export class Permanent extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "Permanent";
  }
}
