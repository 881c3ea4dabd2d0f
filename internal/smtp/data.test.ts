// DATA and the forward without a socket: what is kept of a message, the envelope it goes with,
// and the reply to what the API answered.
import { describe, expect, test } from "bun:test";
import { smtpSession } from "../testkit/smtpfront";
import type { ApiClient, Forward } from "./api";
import { envelopeOf, forward, MessageBuffer, type Submission } from "./data";

describe("a message's bytes", () => {
  test("kept whole up to the limit, exactly the limit included", () => {
    const buffer = new MessageBuffer(10);
    buffer.add(Buffer.from("hello "));
    buffer.add(Buffer.from("word"));
    expect(buffer.overflowed).toBe(false);
    expect(buffer.take().toString()).toBe("hello word");
    expect(buffer.take()).toHaveLength(0);
  });

  test("past the limit, nothing is kept and the rest is dropped as it comes", () => {
    const buffer = new MessageBuffer(10);
    buffer.add(Buffer.from("hello "));
    buffer.add(Buffer.from("world"));
    buffer.add(Buffer.from("!"));
    expect(buffer.overflowed).toBe(true);
    expect(buffer.take()).toHaveLength(0);
  });
});

test("the envelope: its sender, empty for the null sender, and its one recipient", () => {
  const rcptTo = [{ address: "jane@dest.example", args: false as const }];
  expect(
    envelopeOf(smtpSession({ envelope: { mailFrom: { address: "b@acme.example", args: false }, rcptTo } })),
  ).toEqual({ mailFrom: "b@acme.example", rcptTo: "jane@dest.example" });
  expect(envelopeOf(smtpSession({ envelope: { mailFrom: false, rcptTo } })).mailFrom).toBe("");
});

describe("the forward", () => {
  /** An API that answers 202 and records what it was sent. */
  function api(): ApiClient & { sent: Forward[] } {
    const sent: Forward[] = [];
    return {
      sent,
      async send(f) {
        sent.push(f);
        return { kind: "http", status: 202, body: { id: "msg_1", status: "queued" }, headers: {} };
      },
    };
  }
  const submission = (message: string): Submission => ({
    message: Buffer.from(message.replace(/\n/g, "\r\n")),
    envelope: { mailFrom: "b@acme.example", rcptTo: "jane@dest.example" },
    token: "mc_token",
    clientIp: "192.0.2.7",
    requestId: "smtp_1",
  });

  test("a message the API queues: 250 with its id, sent with the session's token, address and request id", async () => {
    const to = api();
    const reply = await forward(
      to,
      submission("From: Acme <no-reply@acme.example>\nSubject: Hi\nMessage-ID: <m1@acme.example>\n\nHello.\n"),
    );
    expect(reply).toMatchObject({ code: 250, messageId: "msg_1" });
    expect(to.sent).toHaveLength(1);
    expect(to.sent[0]).toMatchObject({ token: "mc_token", clientIp: "192.0.2.7", requestId: "smtp_1" });
    // A Message-ID makes the forward keyed: a retry of the same message is not queued twice.
    expect(to.sent[0]!.idempotencyKey).toBeString();
    expect(JSON.parse(to.sent[0]!.json)).toMatchObject({ subject: "Hi", to: "jane@dest.example" });
  });

  test("a message the conversion refuses is answered without asking the API", async () => {
    const to = api();
    const reply = await forward(to, submission("Subject: no sender\n\nHello.\n"));
    expect(reply.code).toBeGreaterThanOrEqual(500);
    expect(to.sent).toHaveLength(0);
  });
});
