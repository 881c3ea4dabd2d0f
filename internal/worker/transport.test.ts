import { expect, test } from "bun:test";
import { DeliveryOutcome } from "../gen/mailcore/limiter/v1/mail_pb";
import { classifyRelayError } from "./transport";

test.each([
  [
    "550 at RCPT TO: the mailbox bounced",
    { responseCode: 550, command: "RCPT TO", code: "EENVELOPE" },
    DeliveryOutcome.BOUNCED,
  ],
  [
    "554 after DATA: the message was refused",
    { responseCode: 554, command: "DATA", code: "EMESSAGE" },
    DeliveryOutcome.BOUNCED,
  ],
  ["451 after DATA: try later", { responseCode: 451, command: "DATA", code: "EMESSAGE" }, DeliveryOutcome.DEFERRED],
  ["452 at RCPT TO: try later", { responseCode: 452, command: "RCPT TO", code: "EENVELOPE" }, DeliveryOutcome.DEFERRED],
  [
    "535 at AUTH: our credentials, not the recipient",
    { responseCode: 535, command: "AUTH PLAIN", code: "EAUTH" },
    DeliveryOutcome.DEFERRED,
  ],
  [
    "550 at MAIL FROM: the relay refuses our sender",
    { responseCode: 550, command: "MAIL FROM", code: "EENVELOPE" },
    DeliveryOutcome.DEFERRED,
  ],
  ["554 greeting", { responseCode: 554, command: "CONN", code: "EPROTOCOL" }, DeliveryOutcome.DEFERRED],
  ["connection refused", { responseCode: undefined, code: "ECONNECTION", command: "CONN" }, DeliveryOutcome.DEFERRED],
] as const)("%s", (_, err, outcome) => {
  expect(classifyRelayError({ message: "x", response: `${err.responseCode ?? ""} reply`, ...err }).outcome).toBe(
    outcome,
  );
});
