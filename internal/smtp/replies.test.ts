// The SMTP decisions, table-driven: which reply for which situation.
import { describe, expect, test } from "bun:test";
import { QUEUE_FULL_MESSAGES } from "../mail/policy";
import { isWellFormed } from "../token/token";
import {
  afterVerify,
  type ApiAnswer,
  apiReply,
  attachmentsRefused,
  authRequired,
  checkCredentials,
  checkRecipient,
  MAX_AUTH_FAILURES,
  replyLine,
  retryAfterSeconds,
  tooLarge,
} from "./replies";

const NOW = Date.parse("2026-01-01T12:00:00Z");
const TOKEN = `mc_${"A".repeat(43)}`;
const http = (status: number, body: unknown, headers: Record<string, string> = {}): ApiAnswer => ({
  kind: "http",
  status,
  body,
  headers,
});
const err = (code: string, message: string, extra: Record<string, unknown> = {}) => ({ code, message, ...extra });
const FREE_429 = { "retry-after": "37", "ratelimit-policy": '"free";q=100;w=60', "ratelimit-remaining": "0" };

describe("the API's answer to an SMTP reply (401 535, 403/400/422 550, 413 552, 429 452, 5xx or none 451)", () => {
  test.each<[string, ApiAnswer, number, string, string]>([
    [
      "202 queued",
      http(202, { id: "msg_1", status: "queued", lane: "transactional" }),
      250,
      "2.0.0",
      "Queued as msg_1 (transactional lane)",
    ],
    [
      "202 replayed",
      http(202, { id: "msg_1", lane: "transactional" }, { "idempotent-replayed": "true" }),
      250,
      "2.0.0",
      "Already queued as msg_1",
    ],
    ["202 without an id", http(202, {}), 451, "4.3.0", "without a message id"],
    [
      "401 revoked token",
      http(401, err("INVALID_TOKEN", "The API token is not valid: it is unknown or was revoked.")),
      535,
      "5.7.8",
      "Authentication failed: The API token is not valid",
    ],
    [
      "403 unverified domain",
      http(403, err("DOMAIN_NOT_VERIFIED", "x.example is not a verified sending domain of this organization.")),
      550,
      "5.7.1",
      "Sender refused: x.example is not a verified sending domain",
    ],
    [
      "400 bad key",
      http(400, err("INVALID_IDEMPOTENCY_KEY", "bad")),
      550,
      "5.6.0",
      "Message refused: bad (INVALID_IDEMPOTENCY_KEY)",
    ],
    ["409 key reused", http(409, err("IDEMPOTENCY_KEY_REUSED", "reused")), 550, "5.6.0", "Message refused: reused"],
    [
      "422 from",
      http(422, err("VALIDATION_FAILED", 'from: "x" is not one email address', { field: "from" })),
      550,
      "5.1.7",
      "Sender refused: from:",
    ],
    [
      "422 replyTo",
      http(422, err("VALIDATION_FAILED", "replyTo: bad", { field: "replyTo" })),
      550,
      "5.1.7",
      "Sender refused: replyTo: bad",
    ],
    [
      "422 to",
      http(422, err("VALIDATION_FAILED", "to: bad", { field: "to" })),
      550,
      "5.1.3",
      "Recipient refused: to: bad",
    ],
    [
      "422 subject",
      http(422, err("VALIDATION_FAILED", "subject: is required", { field: "subject" })),
      550,
      "5.6.0",
      "Message refused: subject: is required",
    ],
    [
      "422 suppressed",
      http(422, err("RECIPIENT_SUPPRESSED", "a@b.example is on this organization's suppression list (complaint)")),
      550,
      "5.7.1",
      "Recipient suppressed: a@b.example is on this organization's suppression list (complaint)",
    ],
    [
      "413",
      http(413, err("PAYLOAD_TOO_LARGE", "The body is larger than 1048576 bytes.")),
      552,
      "5.3.4",
      "Message too large for the API",
    ],
    [
      "429 recipient",
      http(429, err("RECIPIENT_RATE_LIMITED", "This recipient is temporarily rate limited."), { "retry-after": "600" }),
      452,
      "4.2.1",
      "This recipient is temporarily rate limited. At most 5 messages in 10 minutes and 20 in 24 hours go to one mailbox; retry in 600 s (after 2026-01-01T12:10:00Z)",
    ],
    [
      "429 queue full",
      http(429, err("QUEUE_FULL", QUEUE_FULL_MESSAGES.bytes), { "retry-after": "60" }),
      452,
      "4.3.1",
      "Queue full: the organization has as much mail queued as it may; retry in 60 s (after 2026-01-01T12:01:00Z)",
    ],
    [
      "429 org quota",
      http(429, { message: "Too many requests", docs: "http://x/docs" }, FREE_429),
      452,
      "4.7.0",
      'Too many requests: the organization\'s "free" plan allows 100 API requests per minute; retry in 37 s (after 2026-01-01T12:00:37Z)',
    ],
    [
      "429 IP limit",
      http(429, { message: "Too many requests" }, { "retry-after": "1", "ratelimit-remaining": "12" }),
      452,
      "4.7.0",
      "Too many requests: the API's request limit was reached; retry in 1 s",
    ],
    ["429 without Retry-After", http(429, { message: "Too many requests" }), 452, "4.7.0", "retry later"],
    [
      "503 daemon down",
      http(
        503,
        err("LIMITER_UNAVAILABLE", "The rate limiter cannot be reached; the request was not served. Retry shortly."),
      ),
      451,
      "4.3.0",
      "The HTTP API is temporarily unavailable: The rate limiter cannot be reached",
    ],
    ["500 with an HTML body", http(500, undefined), 451, "4.3.0", "The HTTP API is temporarily unavailable: HTTP 500"],
    ["502 from a proxy", http(502, undefined), 451, "4.3.0", "HTTP 502"],
    [
      "404: a wrong API_URL",
      http(404, err("NOT_FOUND", "No such endpoint")),
      451,
      "4.3.0",
      "Unexpected answer from the HTTP API (HTTP 404",
    ],
    ["415", http(415, err("UNSUPPORTED_MEDIA_TYPE", "json please")), 451, "4.3.0", "HTTP 415"],
    [
      "connection refused",
      { kind: "unreachable", reason: "connection refused" },
      451,
      "4.4.1",
      "The HTTP API is temporarily unavailable (connection refused)",
    ],
    ["no answer in time", { kind: "timeout", afterMs: 10_000 }, 451, "4.4.1", "did not answer within 10000 ms"],
  ])("%s", (_, answer, code, status, text) => {
    const r = apiReply(answer, NOW, true);
    expect(r.code).toBe(code);
    expect(r.status).toBe(status);
    expect(r.text).toContain(text);
    expect(replyLine(r)).toStartWith(`${status} `);
  });

  test("the message id of a 250", () => {
    expect(apiReply(http(202, { id: "msg_abc" }), NOW, true).messageId).toBe("msg_abc");
    expect(apiReply(http(403, {}), NOW, true).messageId).toBeUndefined();
  });

  test("an answer that never came: the reply promises no single delivery unless the forward had an Idempotency-Key", () => {
    for (const lost of [
      { kind: "timeout", afterMs: 10_000 },
      { kind: "unreachable", reason: "ECONNRESET" },
    ] as const) {
      expect(apiReply(lost, NOW, true).text).toContain("a retry of the same message is not queued twice");
      const unkeyed = apiReply(lost, NOW, false).text;
      expect(unkeyed).not.toContain("not queued twice");
      expect(unkeyed).toContain("may have been queued; it has no Message-ID, so a retry may be delivered twice");
    }
    expect(apiReply({ kind: "unreachable", reason: "connection refused" }, NOW, false).text).toContain(
      "nothing was queued",
    );
  });

  test("a reason is one line of at most 400 characters, whatever the API said", () => {
    const r = apiReply(http(422, err("VALIDATION_FAILED", `line1\r\nline2 ${"x".repeat(1000)}`)), NOW, true);
    expect(r.text).not.toMatch(/[\r\n]/);
    expect(r.text.length).toBeLessThanOrEqual(400);
    expect(r.text).toEndWith("...");
  });
});

describe("Retry-After", () => {
  test.each<[string | undefined, number | undefined]>([
    ["600", 600],
    [" 5 ", 5],
    ["Thu, 01 Jan 2026 12:01:00 GMT", 60],
    ["Thu, 01 Jan 2026 11:00:00 GMT", 0],
    ["soon", undefined],
    [undefined, undefined],
  ])("%p -> %p", (header, seconds) => {
    expect(retryAfterSeconds(header, NOW)).toBe(seconds);
  });
});

describe("AUTH", () => {
  test.each<[string, string | undefined, string | undefined, number, boolean, number | undefined, boolean]>([
    // name, username, password, failures so far, asks the daemon, reply code, closes
    ["a label and a token", "acme", TOKEN, 0, true, undefined, false],
    ["no username", "", TOKEN, 0, false, 535, false],
    ["a blank username", "  ", TOKEN, 0, false, 535, false],
    ["no password", "acme", "", 0, false, 535, false],
    ["a password that is not a token", "acme", "hunter2", 0, false, 535, false],
    ["the second failure", "acme", "hunter2", 1, false, 535, false],
    ["the third failure closes", "acme", "hunter2", MAX_AUTH_FAILURES - 1, false, 535, true],
  ])("%s", (_, username, password, failures, verify, code, close) => {
    const c = checkCredentials(username, password, isWellFormed, failures);
    expect(c.verify).toBe(verify);
    if (!c.verify) {
      expect(c.reply.code).toBe(code!);
      expect(c.reply.status).toBe("5.7.8");
      expect(c.close).toBe(close);
    }
  });

  test("the daemon's verdict", () => {
    expect(afterVerify({ valid: true }, 0)).toEqual({ ok: true });
    const invalid = afterVerify({ valid: false }, 0);
    expect(invalid).toMatchObject({ ok: false, close: false, reply: { code: 535, status: "5.7.8" } });
    expect(afterVerify({ valid: false }, MAX_AUTH_FAILURES - 1)).toMatchObject({ ok: false, close: true });
    // Daemon down: a temporary failure that does not count as a failed attempt.
    expect(afterVerify({ unavailable: true }, MAX_AUTH_FAILURES - 1)).toMatchObject({
      ok: false,
      close: false,
      reply: { code: 451, status: "4.7.0" },
    });
  });

  test("MAIL without AUTH: 530 5.7.0, saying what to do", () => {
    expect(authRequired(false)).toMatchObject({ code: 530, status: "5.7.0" });
    expect(authRequired(false).text).toContain("STARTTLS");
    expect(authRequired(true).text).toContain("API token");
  });
});

describe("envelope and message", () => {
  test.each<[string[], string, number | undefined]>([
    [[], "a@x.example", undefined],
    [["a@x.example"], "A@X.example", undefined], // the same recipient again replaces it
    [["a@x.example"], "b@x.example", 452],
  ])("recipients %p then RCPT %s", (accepted, address, code) => {
    const r = checkRecipient(accepted, address);
    expect(r?.code).toBe(code);
    if (r) expect(r.status).toBe("4.5.3");
  });

  test("size and attachments: 552", () => {
    expect(tooLarge()).toMatchObject({ code: 552, status: "5.3.4" });
    expect(tooLarge().text).toContain("1048576");
    expect(attachmentsRefused(["a.pdf", "", "c", "d"])).toMatchObject({ code: 552, status: "5.6.0" });
    expect(attachmentsRefused(["a.pdf", "", "c", "d"]).text).toContain("(a.pdf, unnamed, c, ...)");
  });
});
