import { afterAll, expect, test } from "bun:test";
import { create } from "@bufbuild/protobuf";
import { DeliveryOutcome, EmailSchema, LeaseResponseSchema } from "../gen/mailcore/limiter/v1/mail_pb";
import { startMxReceiver } from "../testkit/mxreceivers";
import { freePort } from "../testkit/testkit";
import { MxDelivery } from "../mx/delivery";
import { loadShaping } from "../mx/shaping";
import { MxTransport } from "./mx_transport";

const stops: (() => Promise<void>)[] = [];
afterAll(async () => {
  await Promise.all(stops.map((s) => s()));
});

test("the worker's Transport: a leased message to its recipient's MX, each outcome mapped", async () => {
  const port = await freePort();
  const r = await startMxReceiver({
    address: "127.0.0.40",
    port,
    rcpt: (to) =>
      to.startsWith("gone")
        ? "550 5.1.1 No such user"
        : to.startsWith("later")
          ? "451 4.3.0 later, try again in 10 minutes"
          : to.startsWith("spam")
            ? "550 5.7.1 Message refused as spam"
            : undefined,
  });
  stops.push(r.stop);
  const delivery = new MxDelivery({
    resolveRoute: async () => ({ hosts: [{ name: "mx.t.test", addresses: ["127.0.0.40"] }] }),
    lookupMtaSts: async () => undefined,
    shaping: loadShaping(),
    heloName: "out.mailcore.test",
    port,
  });
  const transport = new MxTransport(delivery, async (m) => ({
    m,
    raw: Buffer.from(`Subject: ${m.messageId}\r\n\r\nhi\r\n`),
  }));
  stops.push(async () => transport.close());
  const lease = (id: string, to: string) =>
    create(LeaseResponseSchema, {
      messageId: id,
      returnPath: `b-${id}@rp.sender.test`,
      email: create(EmailSchema, { fromAddress: "a@sender.test", toAddress: to }),
    });
  const ok = await transport.send(await transport.prepare(lease("m1", "u@t.test")));
  expect(ok.outcome).toBe(DeliveryOutcome.DELIVERED);
  expect(ok.mx.attempts.at(-1)).toMatchObject({ host: "mx.t.test", address: "127.0.0.40", verdict: "delivered" });
  expect(r.received[0]).toMatchObject({ from: "b-m1@rp.sender.test", to: "u@t.test" });
  expect(r.received[0]!.raw.toString()).toBe("Subject: m1\r\n\r\nhi\r\n");
  expect(ok.attempts).toEqual([
    expect.objectContaining({ host: "mx.t.test", address: "127.0.0.40", stage: "data", tls: expect.any(String) }),
  ]);
  const gone = await transport.send(await transport.prepare(lease("m2", "gone@t.test")));
  expect(gone.outcome).toBe(DeliveryOutcome.BOUNCED);
  expect(gone.detail).toContain("550 5.1.1");
  expect(gone.bounce).toMatchObject({ type: "hard", status: "5.1.1" });
  expect(gone.attempts!.at(-1)).toMatchObject({
    stage: "rcpt",
    reply: "550 5.1.1 No such user",
    enhancedCode: "5.1.1",
  });
  const spam = await transport.send(await transport.prepare(lease("m4", "spam@t.test")));
  expect(spam.outcome).toBe(DeliveryOutcome.REJECTED);
  expect(spam.bounce).toMatchObject({ type: "policy", status: "5.7.1" });
  // Without a return path (a lease from before the daemon gave one): the From address.
  const noReturnPath = lease("m5", "u@t.test");
  noReturnPath.returnPath = "";
  expect((await transport.send(await transport.prepare(noReturnPath))).outcome).toBe(DeliveryOutcome.DELIVERED);
  expect(r.received.at(-1)).toMatchObject({ from: "a@sender.test" });
  const later = await transport.send(await transport.prepare(lease("m3", "later@t.test")));
  expect(later).toMatchObject({
    outcome: DeliveryOutcome.DEFERRED,
    retryAfterMs: 600_000,
    bounce: { type: "transient" },
  });
});
