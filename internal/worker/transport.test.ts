import { expect, test } from "bun:test";
import { DeliveryOutcome } from "../gen/mailcore/limiter/v1/mail_pb";
import { classifyRelayError } from "./transport";

// A relay's refusals, by the one classification of refusals (internal/feedback) told the command.
test.each([
  [
    "550 5.1.1 at RCPT TO: the mailbox bounced",
    { responseCode: 550, response: "550 5.1.1 <b@example.org>: user unknown", command: "RCPT TO", code: "EENVELOPE" },
    DeliveryOutcome.BOUNCED,
    "hard",
    "rcpt",
  ],
  [
    "554 5.7.1 after DATA: the content was refused, not the mailbox",
    { responseCode: 554, response: "554 5.7.1 Message rejected as spam", command: "DATA", code: "EMESSAGE" },
    DeliveryOutcome.REJECTED,
    "policy",
    "data",
  ],
  [
    "451 after DATA: try later",
    { responseCode: 451, response: "451 4.3.0 try later", command: "DATA", code: "EMESSAGE" },
    DeliveryOutcome.DEFERRED,
    "transient",
    "data",
  ],
  [
    "452 at RCPT TO: try later",
    { responseCode: 452, response: "452 4.2.2 mailbox full", command: "RCPT TO", code: "EENVELOPE" },
    DeliveryOutcome.DEFERRED,
    "transient",
    "rcpt",
  ],
  [
    "535 at AUTH: our credentials, not the recipient: failed at once",
    { responseCode: 535, response: "535 5.7.8 authentication failed", command: "AUTH PLAIN", code: "EAUTH" },
    DeliveryOutcome.REJECTED,
    "policy",
    "ehlo",
  ],
  [
    "550 5.1.1 at MAIL FROM: the relay refuses our sender, never the mailbox's fault",
    { responseCode: 550, response: "550 5.1.1 sender unknown", command: "MAIL FROM", code: "EENVELOPE" },
    DeliveryOutcome.REJECTED,
    "policy",
    "mail",
  ],
  [
    "421 greeting: busy",
    { responseCode: 421, response: "421 4.3.2 busy", command: "CONN", code: "EPROTOCOL" },
    DeliveryOutcome.DEFERRED,
    "transient",
    "connect",
  ],
  [
    "connection refused",
    { responseCode: undefined, code: "ECONNECTION", command: "CONN" },
    DeliveryOutcome.DEFERRED,
    "transient",
    "connect",
  ],
] as const)("%s", (_, err, outcome, type, stage) => {
  const r = classifyRelayError({ message: "connect ECONNREFUSED", ...err }, "relay.example", 1_000);
  expect(r.outcome).toBe(outcome);
  expect(r.bounce?.type).toBe(type);
  expect(r.attempts).toEqual([
    {
      atMs: 1_000,
      host: "relay.example",
      address: "",
      tls: "",
      stage,
      reply: r.detail,
      enhancedCode: r.bounce?.status ?? "",
    },
  ]);
});
