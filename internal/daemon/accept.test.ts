// The accept step's input, alone: the guards each lane's send is enqueued under, and the queue cap.
import { expect, test } from "bun:test";
import { create } from "@bufbuild/protobuf";
import { EmailSchema, Lane } from "../gen/mailcore/limiter/v1/mail_pb";
import { GUARD_LIMITS, IDEMPOTENCY_TTL_MS } from "../mail/policy";
import { toEnqueueInput } from "./accept";

/** The organization's queue cap the daemon is configured with. */
const CAP = { messages: 1_000, bytes: 1_000_000 };

const email = (toAddress: string) =>
  create(EmailSchema, {
    from: "Acme <News@Acme.Example>",
    fromAddress: "News@Acme.Example",
    to: toAddress,
    toAddress,
    subject: "s",
    text: "t",
    tags: ["welcome"],
  });

test("a transactional send is checked against the bounce cooldown and counted by the recipient guards", () => {
  const input = toEnqueueInput({ orgId: "org_1", lane: Lane.TRANSACTIONAL, email: email("Kim+News@Example.ORG") }, CAP);
  expect(input).toMatchObject({
    orgId: "org_1",
    lane: Lane.TRANSACTIONAL,
    fromDomain: "acme.example",
    mailbox: "kim@example.org",
    checkCooldown: true,
    countGuards: true,
    guards: GUARD_LIMITS,
    queueCap: CAP,
    tags: ["welcome"],
    idempotency: undefined,
  });
  expect(input.messageId).toMatch(/^msg_[0-9a-f]{24}$/);
  expect(JSON.parse(input.payload)).toMatchObject({ toAddress: "Kim+News@Example.ORG" });
});

test("a test fixture is not counted by the guards; a bulk send meets neither", () => {
  const fixture = toEnqueueInput({ orgId: "o", lane: Lane.TRANSACTIONAL, email: email("bounced@fixtures.test") }, CAP);
  expect(fixture).toMatchObject({ checkCooldown: true, countGuards: false });
  const bulk = toEnqueueInput({ orgId: "o", lane: Lane.BULK, email: email("kim@example.org") }, CAP);
  expect(bulk).toMatchObject({ checkCooldown: false, countGuards: false });
});

test("a fixed message id is kept, and an idempotency key gets its record for a day", () => {
  const input = toEnqueueInput(
    {
      orgId: "o",
      lane: Lane.BULK,
      email: email("kim@example.org"),
      messageId: "msg_fixed",
      idempotencyKey: "k1",
      bodyHash: "h1",
    },
    CAP,
  );
  expect(input.messageId).toBe("msg_fixed");
  expect(input.idempotency).toEqual({ key: "k1", bodyHash: "h1", ttlMs: IDEMPOTENCY_TTL_MS });
});
