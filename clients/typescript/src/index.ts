/**
 * oncehook's client for Node: the effects ledger as one call, the outbox
 * over HTTP, a pull destination's consumer, and the check of a delivery's
 * signature. No dependency.
 *
 * ```ts
 * import { Ledger } from "oncehook";
 * const ledger = new Ledger(); // $ONCEHOOK_API, $ONCEHOOK_API_TOKEN
 * const summary = await ledger.once(`llm-summary:${eventId}`, async (effect) => callTheModel(invoice));
 * ```
 * @packageDocumentation
 */

export { API_ENV, DEFAULT_API, DEFAULT_TIMEOUT_MS, TOKEN_ENV, VERSION, type ClientOptions } from "./api.js";
export {
  ApiError, BusyError, ConflictError, ExpiredError, FailedError, FingerprintError, InvalidError, LeaseLostError,
  NotFoundError, OncehookError, Permanent, ResultRefusedError, SignatureError, StaleTokenError, UnreachableError,
  type ErrorDetails,
} from "./errors.js";
export {
  DEFAULT_LEASE_MS, DEFAULT_WAIT_MS, Ledger, RawJSON, type Claim, type ClaimOptions, type Effect, type LedgerOptions,
  type OnceOptions,
} from "./ledger.js";
export {
  Consumer, Outcome, type AckOutcome, type ConsumeOptions, type ConsumerOptions, type PullOptions, type PulledDelivery,
} from "./pull.js";
export { Outbox, formatKey, type PublishOptions, type Published } from "./outbox.js";
export { DEFAULT_TOLERANCE_SEC, readDelivery, verifyDelivery, type Delivery, type HeadersLike, type VerifyOptions } from "./verify.js";
