// Which SMTP reply for which situation, as pure functions (the table in docs/smtp.md, "Replies").
// The session's stages (connect.ts, auth.ts, mail_from.ts, rcpt_to.ts, data.ts) only ask these
// and send the answer. Every reply carries an RFC 3463 enhanced status code and a reason a
// person can act on.
import { MAX_MESSAGE_BYTES } from "../limits/limits";

/** An SMTP reply: the basic code, the enhanced status code, the human reason. */
export interface Reply {
  code: number;
  status: string;
  text: string;
}

/** Failed AUTH attempts after which the connection is closed. */
export const MAX_AUTH_FAILURES = 3;
/** SMTP reply lines are at most 512 octets (RFC 5321 4.5.3.1.5); keep the reason well below. */
const MAX_TEXT = 400;

const reply = (code: number, status: string, text: string): Reply => ({ code, status, text: clean(text) });

/** One line, no control characters, bounded length. */
function clean(text: string): string {
  const line = text.replace(/[\x00-\x1f\x7f]+/g, " ").trim();
  return line.length > MAX_TEXT ? `${line.slice(0, MAX_TEXT - 3)}...` : line;
}

/** How the reply is written after the code: "<enhanced> <reason>". */
export function replyLine(r: Reply): string {
  return `${r.status} ${r.text}`;
}

// ---- connection and authentication -------------------------------------------------------

const HOW_TO_AUTH = "STARTTLS, then AUTH PLAIN or LOGIN with any username and your API token as the password";

/** MAIL (or anything that needs a sender) before a successful AUTH. */
export function authRequired(secure: boolean): Reply {
  return reply(
    530,
    "5.7.0",
    secure
      ? `Authentication required: AUTH PLAIN or LOGIN with any username and your API token as the password`
      : `Authentication required: ${HOW_TO_AUTH}`,
  );
}

export type AuthCheck = { verify: true } | { verify: false; reply: Reply; close: boolean };

/**
 * The checks made at AUTH before asking the daemon: a username (any label) and a password
 * that has the shape of an API token. `failures` is the count of failed attempts so far
 * on this connection; the attempt that reaches MAX_AUTH_FAILURES closes it.
 */
export function checkCredentials(
  username: string | undefined,
  password: string | undefined,
  tokenWellFormed: (t: string) => boolean,
  failures: number,
): AuthCheck {
  if (!username || username.trim() === "")
    return authFailed(
      "a username is required (any label, e.g. your organization's slug; the password is the API token)",
      failures,
    );
  if (!password || !tokenWellFormed(password))
    return authFailed("the password must be an API token (mc_...)", failures);
  return { verify: true };
}

/** The daemon's answer to VerifyToken, or its absence. */
export type TokenVerdict = { valid: true } | { valid: false } | { unavailable: true };

/** The daemon could not be asked at AUTH: fail closed, temporarily. */
export function authUnavailable(): Reply {
  return reply(
    451,
    "4.7.0",
    "Cannot check the API token right now (the rate limiter is unavailable); try again in a moment",
  );
}

export function afterVerify(
  verdict: TokenVerdict,
  failures: number,
): { ok: true } | { ok: false; reply: Reply; close: boolean } {
  if ("unavailable" in verdict) return { ok: false, close: false, reply: authUnavailable() };
  if (verdict.valid) return { ok: true };
  return { ok: false, ...authFailed("the API token is not valid (unknown or revoked)", failures) };
}

function authFailed(reason: string, failures: number): { verify: false; reply: Reply; close: boolean } {
  const close = failures + 1 >= MAX_AUTH_FAILURES;
  return {
    verify: false,
    close,
    reply: reply(
      535,
      "5.7.8",
      `Authentication failed: ${reason}${close ? `; ${MAX_AUTH_FAILURES} failed attempts, closing the connection` : ""}`,
    ),
  };
}

/**
 * A new connection from an address that already holds its unauthenticated sessions
 * (SMTP_MAX_CLIENTS_PER_IP) and has its waiting room full (SMTP_MAX_WAITING_PER_IP).
 */
export function tooManyConnectionsFromAddress(limit: number, waiting: number): Reply {
  return reply(
    421,
    "4.7.0",
    `Too many connections from your address that have not authenticated (at most ${limit} at once, ${waiting} more waiting); authenticate or close idle ones and try again`,
  );
}

/** A connection that waited SMTP_AUTH_TIMEOUT_MS for a slot of its address before its greeting. */
export function noSlotInTime(ms: number): Reply {
  return reply(
    421,
    "4.7.0",
    `Too many connections from your address that have not authenticated; no slot freed within ${ms / 1_000} s, try again`,
  );
}

/** A successful AUTH of an organization that already holds SMTP_MAX_SESSIONS_PER_ORG sessions. */
export function tooManySessionsForOrganization(limit: number): Reply {
  return reply(
    421,
    "4.7.0",
    `Too many sessions for your organization (at most ${limit} authenticated at once); close idle ones and try again in a moment`,
  );
}

/** An address whose failed AUTH attempts reached the limit (throttle.ts). */
export function authThrottled(seconds: number): Reply {
  return reply(421, "4.7.0", `Too many failed AUTH attempts from your address; try again in ${seconds} s`);
}

/** No successful AUTH within SMTP_AUTH_TIMEOUT_MS of connecting. */
export function authTimedOut(ms: number): Reply {
  return reply(421, "4.4.2", `No successful AUTH within ${ms / 1_000} s of connecting; closing the connection`);
}

/** The front is stopping (SIGTERM); sent between transactions. */
export function shuttingDown(): Reply {
  return reply(421, "4.3.2", "The server is shutting down; try again in a moment");
}

/** Sent when the connection reaches its time limit between two transactions. */
export function sessionExpired(): Reply {
  return reply(421, "4.4.2", "Session time limit reached; closing the connection (reconnect to send more)");
}

// ---- envelope -----------------------------------------------------------------------------

/** RCPT TO: exactly one envelope recipient per message (the guards are per mailbox). undefined: accept. */
export function checkRecipient(accepted: readonly string[], address: string): Reply | undefined {
  if (accepted.length === 0 || accepted.some((a) => a.toLowerCase() === address.toLowerCase())) return undefined;
  return reply(
    452,
    "4.5.3",
    "Too many recipients: one recipient per message; send a separate message to each recipient",
  );
}

// ---- message ------------------------------------------------------------------------------

export function tooLarge(limit = MAX_MESSAGE_BYTES): Reply {
  return reply(552, "5.3.4", `Message too large: the limit is ${limit} bytes (1 MB)`);
}

export function attachmentsRefused(names: readonly string[]): Reply {
  const list =
    names.length > 0
      ? ` (${names
          .slice(0, 3)
          .map((n) => n || "unnamed")
          .join(", ")}${names.length > 3 ? ", ..." : ""})`
      : "";
  return reply(552, "5.6.0", `Attachments are not accepted over SMTP${list}; send the message without attachments`);
}

/** A message that cannot become a send request (no From, no body, unparseable MIME...). */
export function invalidMessage(reason: string): Reply {
  return reply(550, "5.6.0", `Message refused: ${reason}`);
}

/** A From header that is not one mailbox. */
export function invalidSender(reason: string): Reply {
  return reply(550, "5.1.7", `Sender refused: ${reason}`);
}

/** The client went away or was cut off mid-DATA: nothing was forwarded. */
export function dataAborted(): Reply {
  return reply(451, "4.4.2", "The message was not received in full; nothing was queued");
}

/** The front failed while handling a message (a fault of ours): nothing was queued. */
export function handlingFailed(): Reply {
  return reply(451, "4.3.0", "Internal error while handling the message; nothing was queued, try again");
}

// ---- the API's answer ---------------------------------------------------------------------

/** What came back from POST /api/v1/emails. */
export type ApiAnswer =
  | { kind: "http"; status: number; body: unknown; headers: Record<string, string | undefined> }
  | { kind: "unreachable"; reason: string }
  | { kind: "timeout"; afterMs: number };

function field(body: unknown, name: string): string | undefined {
  if (typeof body !== "object" || body === null) return undefined;
  const v = (body as Record<string, unknown>)[name];
  return typeof v === "string" ? v : undefined;
}

function apiSays(body: unknown, status: number): string {
  const code = field(body, "code");
  const message = field(body, "message");
  if (message === undefined) return `HTTP ${status}`;
  return code ? `${message} (${code})` : message;
}

/** Whole seconds from a Retry-After header (seconds or an HTTP date); undefined when absent. */
export function retryAfterSeconds(value: string | undefined, nowMs: number): number | undefined {
  if (value === undefined) return undefined;
  if (/^\d+$/.test(value.trim())) return Number(value.trim());
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, Math.ceil((at - nowMs) / 1000));
}

function retryHint(seconds: number | undefined, nowMs: number): string {
  if (seconds === undefined) return "retry later";
  const at = new Date(nowMs + seconds * 1000).toISOString().replace(/\.\d{3}Z$/, "Z");
  return `retry in ${seconds} s (after ${at})`;
}

/**
 * What a client may expect from a retry after an answer that never came: the forward carried an
 * Idempotency-Key (the message has a Message-ID) or it did not, and then nothing can tell the
 * retry from a new message.
 */
function afterLostAnswer(keyed: boolean): string {
  return keyed
    ? "try again shortly (a retry of the same message is not queued twice)"
    : "the message may have been queued; it has no Message-ID, so a retry may be delivered twice";
}

/**
 * The SMTP reply to the API's answer, and the message id when it was queued. `keyed`: the
 * forward carried an Idempotency-Key.
 */
export function apiReply(answer: ApiAnswer, nowMs: number, keyed: boolean): Reply & { messageId?: string } {
  if (answer.kind === "unreachable") {
    // A refused connection sent nothing; any other failure may have come after the request was read.
    if (answer.reason === "connection refused")
      return reply(
        451,
        "4.4.1",
        "The HTTP API is temporarily unavailable (connection refused); nothing was queued, try again shortly",
      );
    return reply(451, "4.4.1", `The HTTP API is temporarily unavailable (${answer.reason}); ${afterLostAnswer(keyed)}`);
  }
  if (answer.kind === "timeout") {
    return reply(451, "4.4.1", `The HTTP API did not answer within ${answer.afterMs} ms; ${afterLostAnswer(keyed)}`);
  }
  const { status, body, headers } = answer;
  const says = apiSays(body, status);
  if (status >= 200 && status < 300) {
    const id = field(body, "id");
    if (!id) return reply(451, "4.3.0", `The HTTP API answered ${status} without a message id; try again shortly`);
    const lane = field(body, "lane") ?? "transactional";
    const replayed = headers["idempotent-replayed"] === "true";
    return {
      ...reply(250, "2.0.0", `${replayed ? "Already queued" : "Queued"} as ${id} (${lane} lane)`),
      messageId: id,
    };
  }
  switch (status) {
    case 401:
      return reply(535, "5.7.8", `Authentication failed: ${says}`);
    case 403:
      return reply(550, "5.7.1", `Sender refused: ${says}`);
    case 400:
    case 409:
      return reply(550, "5.6.0", `Message refused: ${says}`);
    case 422: {
      // The organization's own list: the recipient is refused for this sender only.
      if (field(body, "code") === "RECIPIENT_SUPPRESSED") return reply(550, "5.7.1", `Recipient suppressed: ${says}`);
      const f = field(body, "field");
      if (f === "from" || f === "replyTo") return reply(550, "5.1.7", `Sender refused: ${says}`);
      if (f === "to") return reply(550, "5.1.3", `Recipient refused: ${says}`);
      return reply(550, "5.6.0", `Message refused: ${says}`);
    }
    case 413:
      return reply(552, "5.3.4", `Message too large for the API: ${says}`);
    case 429: {
      const wait = retryHint(retryAfterSeconds(headers["retry-after"], nowMs), nowMs);
      if (field(body, "code") === "QUEUE_FULL") {
        // X.3.1, "mail system full": the sender's organization, not the recipient, is the cause.
        return reply(452, "4.3.1", `Queue full: the organization has as much mail queued as it may; ${wait}`);
      }
      if (field(body, "code") === "RECIPIENT_RATE_LIMITED") {
        // The wording of large mailbox providers for the same situation (4.2.1).
        return reply(
          452,
          "4.2.1",
          `${field(body, "message") ?? "This recipient is temporarily rate limited."} At most 5 messages in 10 minutes and 20 in 24 hours go to one mailbox; ${wait}`,
        );
      }
      const policy = /^"([^"]+)";q=(\d+)/.exec(headers["ratelimit-policy"] ?? "");
      const what =
        headers["ratelimit-remaining"] === "0" && policy
          ? `the organization's "${policy[1]}" plan allows ${policy[2]} API requests per minute`
          : "the API's request limit was reached";
      return reply(452, "4.7.0", `Too many requests: ${what}; ${wait}`);
    }
  }
  if (status >= 500) return reply(451, "4.3.0", `The HTTP API is temporarily unavailable: ${says}; try again shortly`);
  // 404, 405, 415, ...: the front and the API disagree (a wrong API_URL?). Not the sender's
  // fault and not permanent: keep the message at the client.
  return reply(451, "4.3.0", `Unexpected answer from the HTTP API (HTTP ${status}: ${says}); try again later`);
}
