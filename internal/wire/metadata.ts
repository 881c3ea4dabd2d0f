// The gRPC metadata the fronts send with their calls to limiterd, and what limiterd answers in
// it. Shared here, in the wire module both sides import, so that neither side spells a name by hand.

/** The request id (X-Request-Id), followed through the daemon into the message for the worker. */
export const REQUEST_ID_HEADER = "x-request-id";

/**
 * The absolute time (ms since the epoch) after which the caller no longer waits for a Send.
 * limiterd refuses a Send it reads after that time, so a call the front gave up on is never
 * queued later. On a record-bound call (audience, campaigns, workflows, webhooks), the time by
 * which limiterd commits the call's records or rolls them back. gRPC's own grpc-timeout is relative to when the daemon reads the call, which is
 * too late when the daemon was paused with the call in its socket buffer.
 */
export const DEADLINE_HEADER = "mailcore-deadline-ms";

/** Set by limiterd on an error when it is certain that nothing was queued. */
export const NOT_QUEUED_HEADER = "mailcore-not-queued";

/**
 * How much longer than its deadline a front waits for a Send's answer: the longest the daemon
 * works on a Send it started before the deadline (two store calls, each cut off after 1 s).
 */
export const SEND_GRACE_MS = 2_500;

/**
 * How much sooner than its caller stops waiting limiterd must have committed a record-bound
 * call: the commit itself and the answer's way back. An answer that did not come in time then
 * means that nothing was written.
 */
export const RECORDS_COMMIT_MARGIN_MS = 500;

/** A create's Idempotency-Key, as the client sent it to the API. */
export const IDEMPOTENCY_KEY_HEADER = "mailcore-idempotency-key";

/** Set by limiterd on an error when the Idempotency-Key was used with another request. */
export const IDEMPOTENCY_CONFLICT_HEADER = "mailcore-idempotency-conflict";

/**
 * The admission ticket (AdmitResponse.ticket, GetSessionResponse.ticket) a front sends with
 * each organization-scoped call: the daemon takes the call's organization from it alone.
 */
export const TICKET_HEADER = "mailcore-ticket";
