import { SendOutcome, type SendResponse } from "../gen/mailcore/limiter/v1/mail_pb";
import { laneName, QUEUE_FULL_MESSAGES } from "../mail/policy";
import { InvalidField } from "./invalid_field";
import type { SendInput } from "./send_request";
import { NotQueued } from "./ports";
import { error, type Handler, type Headers_, invalid, json, readJson } from "./respond";

// POST /api/v1/emails: the body validated off the event loop, then queued by the daemon, which
// answers with one of its outcomes.

/** 409: the Idempotency-Key came back with another body. */
export const keyReused = (headers: Headers_) =>
  error(409, "IDEMPOTENCY_KEY_REUSED", "This Idempotency-Key was used with a different request body.", headers);

/**
 * A send the daemon did not confirm. Only a refusal the daemon vouches for says that nothing
 * was queued; a lost or late answer may hide a queued message, and the client is told how to
 * retry without sending it twice.
 */
export function sendUnconfirmed(err: unknown, headers: Headers_): Response {
  const message =
    err instanceof NotQueued
      ? "The rate limiter did not take the email in time; nothing was queued. Retry shortly."
      : "The rate limiter did not confirm the email; it may or may not have been queued. Retry with the same Idempotency-Key, which never queues an email twice.";
  return error(503, "LIMITER_UNAVAILABLE", message, { ...headers, "Retry-After": "1" });
}

/** The answer to a send the daemon took or refused. */
export function sendAnswer(res: SendResponse, input: SendInput, headers: Headers_): Response {
  const accepted = { id: res.messageId, status: "queued", lane: laneName(input.lane) };
  switch (res.outcome) {
    case SendOutcome.ACCEPTED:
      return json(202, accepted, headers);
    case SendOutcome.REPLAYED:
      return json(202, accepted, { ...headers, "Idempotent-Replayed": "true" });
    case SendOutcome.IDEMPOTENCY_CONFLICT:
      return keyReused(headers);
    case SendOutcome.DOMAIN_NOT_VERIFIED:
      return error(
        403,
        "DOMAIN_NOT_VERIFIED",
        `${input.email.fromAddress.split("@").pop()} is not a verified sending domain of this organization.`,
        headers,
      );
    case SendOutcome.RECIPIENT_LIMITED:
      return json(
        429,
        { code: "RECIPIENT_RATE_LIMITED", message: "This recipient is temporarily rate limited." },
        { ...headers, "Retry-After": String(res.retryAfterSeconds) },
      );
    case SendOutcome.QUEUE_FULL:
      return json(
        429,
        { code: "QUEUE_FULL", message: QUEUE_FULL_MESSAGES[res.reason === "bytes" ? "bytes" : "messages"] },
        { ...headers, "Retry-After": String(res.retryAfterSeconds) },
      );
    case SendOutcome.BULK_PAUSED:
      return error(
        403,
        "BULK_LANE_PAUSED",
        `This organization's bulk sends are paused: ${res.reason}. Nothing was queued; transactional sends go on. An operator resumes them.`,
        headers,
      );
    case SendOutcome.SUPPRESSED:
      return error(
        422,
        "RECIPIENT_SUPPRESSED",
        `${input.email.toAddress} is on this organization's suppression list (${res.reason}); nothing was queued. Remove it with DELETE /api/v1/suppressions/{email} to send to it again.`,
        headers,
      );
    default:
      throw new Error(`unknown send outcome ${res.outcome}`);
  }
}

/** POST /api/v1/emails. */
export const sendEmail: Handler = async ({ ports }, { req, requestId, admission, headers, checkBody }) => {
  const key = req.headers.get("idempotency-key");
  const body = await readJson(req, headers);
  if (body instanceof Response) return body;
  let input: SendInput;
  try {
    checkBody(body);
    input = await ports.validation.validate(admission.orgId, body);
  } catch (err) {
    if (!(err instanceof InvalidField)) throw err;
    return invalid(err.field, err.message, headers);
  }
  // A client that went away (an SMTP front that gave up) gets nothing queued behind its back.
  if (req.signal.aborted)
    return error(499, "CLIENT_CLOSED", "The client closed the request; nothing was queued.", headers);
  let res: SendResponse;
  try {
    res = await ports.mail.send(
      admission.ticket,
      {
        lane: input.lane,
        email: input.email,
        idempotencyKey: key ?? "",
        bodyHash: input.fingerprint,
      },
      requestId,
    );
  } catch (err) {
    return sendUnconfirmed(err, headers);
  }
  return sendAnswer(res, input, headers);
};
