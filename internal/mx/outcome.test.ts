import { expect, test } from "bun:test";
import { classify, type Stage } from "./outcome";
import { matchesAny, parseReply, retryAfterHint } from "./reply";

test.each([
  ["250 2.0.0 OK queued as 123", 250, "2.0.0"],
  ["550 5.1.1 <x@example.org>: Recipient address rejected", 550, "5.1.1"],
  ["421-4.7.28 Our system has detected an unusual rate\n421 4.7.28 of mail", 421, "4.7.28"],
  ["451 Try again later", 451, undefined],
  ["550 4.2.2 class contradicts the reply", 550, undefined],
  ["554 5.7.1", 554, "5.7.1"],
] as const)("parseReply(%p)", (text, code, enhanced) => {
  expect(parseReply(text)).toEqual({ code, enhanced, text });
});

test("parseReply refuses what is not a reply", () => {
  expect(parseReply("Connection closed")).toBeUndefined();
  expect(parseReply("99 short")).toBeUndefined();
});

test.each([
  ["451 4.7.1 Greylisted, please try again in 300 seconds", 300_000],
  ["450 4.2.0 Greylisted, try again in 5 minutes", 300_000],
  ["421 4.7.0 Try again later", undefined],
  ["452 4.2.2 retry after 2 hours", 7_200_000],
  ["451 4.7.1 Please wait 90s before retrying", 90_000],
  ["450 4.7.1 <x@y>: Recipient address rejected: Greylisted for 60 seconds", 60_000],
  ["451 Temporary local problem - please try later", undefined],
  ["421 4.3.2 Service shutting down, 20 users", undefined],
])("retryAfterHint(%p)", (text, ms) => {
  expect(retryAfterHint(text)).toBe(ms);
});

test("rate-limit patterns match case-insensitively", () => {
  const patterns = [/\b4\.7\.28\b/, /rate limit/i, /too many/i];
  expect(matchesAny("421 4.7.28 Gmail has detected an unusual rate", patterns)).toBe(true);
  expect(matchesAny("451 TOO MANY messages from your IP", patterns)).toBe(true);
  expect(matchesAny("451 4.3.0 Temporary failure", patterns)).toBe(false);
});

type Bounce = "hard" | "soft" | "policy" | "transient";
test.each<[string, Stage, string | undefined, string | undefined, "permanent" | "temporary", Bounce, boolean]>([
  // stage, reply, error, verdict, what it means for the mailbox (internal/feedback), try the next host
  ["no such mailbox", "rcpt", "550 5.1.1 No such user", undefined, "permanent", "hard", false],
  ["mailbox disabled", "rcpt", "550 5.2.1 Mailbox disabled", undefined, "permanent", "hard", false],
  [
    "old receiver, no enhanced code, telling words",
    "rcpt",
    "550 No such user here",
    undefined,
    "permanent",
    "hard",
    false,
  ],
  ["content refused", "data", "554 5.7.1 Message rejected as spam", undefined, "permanent", "policy", false],
  ["content refused, no enhanced code", "data", "554 Transaction failed", undefined, "permanent", "soft", false],
  ["message too big", "data", "552 5.3.4 Message too big", undefined, "permanent", "policy", false],
  ["sender refused", "mail", "550 5.7.1 Sender SPF failed", undefined, "permanent", "policy", false],
  ["sender refused with a mailbox code", "mail", "550 5.1.1 unknown sender", undefined, "permanent", "policy", false],
  ["relaying policy at RCPT", "rcpt", "550 5.7.1 Relaying denied", undefined, "permanent", "policy", false],
  ["greylisted", "rcpt", "451 4.7.1 Greylisted", undefined, "temporary", "transient", false],
  ["full mailbox, temporary", "rcpt", "452 4.2.2 Mailbox full", undefined, "temporary", "transient", false],
  ["rate limited at DATA", "data", "421 4.7.28 rate limited", undefined, "temporary", "transient", false],
  ["greeting refused", "greeting", "554 5.7.1 No SMTP service here", undefined, "temporary", "transient", true],
  ["EHLO refused", "ehlo", "550 5.5.1 Go away", undefined, "temporary", "transient", true],
  [
    "STARTTLS refused under required TLS",
    "starttls",
    "454 4.7.0 TLS not available",
    undefined,
    "temporary",
    "transient",
    true,
  ],
  ["connection refused", "connect", undefined, "connect ECONNREFUSED", "temporary", "transient", true],
  ["no greeting", "greeting", undefined, "Greeting never received", "temporary", "transient", true],
  ["connection reset in DATA", "data", undefined, "ECONNRESET", "temporary", "transient", false],
  ["timeout after the dot", "data", undefined, "timed out", "temporary", "transient", false],
  ["destination busy", "queue", "451 4.4.5 destination busy", undefined, "temporary", "transient", false],
])("%s", (_, stage, text, error, verdict, bounce, nextHost) => {
  const c = classify({ stage, reply: text ? parseReply(text) : undefined, error });
  expect(c.verdict).toBe(verdict);
  expect(c.bounce.type).toBe(bounce);
  expect(c.tryNextHost).toBe(nextHost);
});

test("a temporary failure carries the reply's hint", () => {
  const c = classify({ stage: "rcpt", reply: parseReply("450 4.2.0 Greylisted, try again in 5 minutes") });
  expect(c.retryAfterMs).toBe(300_000);
});
