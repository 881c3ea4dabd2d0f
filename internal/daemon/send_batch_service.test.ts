// The batch around the accept step: every send at once, each for its own ticket's organization
// and answered on its own and in order, nothing accepted from a batch read late or for a ticket
// that does not check, a line about each queued message, a full disk noted.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { describe, expect, test } from "bun:test";
import { ManualClock } from "../clock/clock";
import { EmailSchema, Lane, SendOutcome, SendRequestSchema } from "../gen/mailcore/limiter/v1/mail_pb";
import {
  SendBatchRequestSchema,
  SendBatchResponseSchema,
  TicketedSendSchema,
} from "../gen/mailcore/limiter/v1/send_batch_pb";
import type { EnqueueResult } from "../hotstore/hotstore";
import { captureLogger } from "../testkit/logcapture";
import { MAX_SEND_BATCH } from "../wire/send_batch";
import type { SendInput } from "./accept";
import { type SendBatchDeps, sendBatch, sendRawBatch } from "./send_batch_service";
import { Tickets } from "./tickets";

const tickets = new Tickets(Buffer.alloc(32, 1), Date.now);

const sendTo = (to: string, ticket = tickets.issue("org_1"), requestId = `req-${to}`) =>
  create(TicketedSendSchema, {
    ticket,
    send: create(SendRequestSchema, {
      lane: Lane.TRANSACTIONAL,
      email: create(EmailSchema, { fromAddress: "a@acme.example", toAddress: to, requestId }),
    }),
  });

/** Deps whose accept step answers by recipient: "limited@" is refused, "broken@" fails as a store would, "full@" as a full disk. */
function deps(nowMs = 1_000) {
  const accepted: string[] = [];
  const orgs: string[] = [];
  const noted: string[] = [];
  const { log, lines } = captureLogger();
  const d: SendBatchDeps = {
    clock: new ManualClock(nowMs),
    tickets,
    log,
    refusals: { count: () => {} },
    disk: { noted: (file) => void noted.push(file) },
    accept: async (s: SendInput): Promise<EnqueueResult> => {
      const to = s.email.toAddress;
      orgs.push(s.orgId);
      if (to.startsWith("broken@")) throw new Error("connection lost");
      if (to.startsWith("full@")) throw Object.assign(new Error("disk full"), { code: "ENOSPC" });
      if (to.startsWith("limited@")) return { kind: "limited", reason: "short_window", retryAfterMs: 1_500 };
      accepted.push(to);
      return { kind: "accepted", messageId: `msg_${to}` };
    },
  };
  return { d, accepted, orgs, noted, lines };
}

describe("sendBatch", () => {
  test("answers every send on its own, in order, and logs each queued message with its request id", async () => {
    const { d, accepted, lines } = deps();
    const req = create(SendBatchRequestSchema, {
      sends: [sendTo("a@x.example"), sendTo("limited@x.example"), sendTo("broken@x.example"), sendTo("b@x.example")],
      deadlineMs: 2_000n,
    });
    const out = await sendBatch(d, req);
    expect(out.map((r) => r.response?.outcome ?? r.errorCode)).toEqual([
      SendOutcome.ACCEPTED,
      SendOutcome.RECIPIENT_LIMITED,
      Code.Unavailable,
      SendOutcome.ACCEPTED,
    ]);
    expect(out[1]!.response?.retryAfterSeconds).toBe(2);
    expect(out[2]!.notQueued).toBe(false);
    expect(accepted).toEqual(["a@x.example", "b@x.example"]);
    expect(lines.filter((l) => l.msg === "queued").map((l) => [l.fields.requestId, l.fields.message])).toEqual([
      ["req-a@x.example", "msg_a@x.example"],
      ["req-b@x.example", "msg_b@x.example"],
    ]);
  });

  test("each send is for its own ticket's organization; one without a valid ticket is refused, not queued", async () => {
    const { d, accepted, orgs, lines } = deps();
    const other = new Tickets(Buffer.alloc(32, 2), Date.now).issue("org_2");
    const [, expires, mac] = tickets.issue("org_1").split(".");
    const out = await sendBatch(
      d,
      create(SendBatchRequestSchema, {
        sends: [
          sendTo("a@x.example", tickets.issue("org_2")),
          sendTo("b@x.example", other),
          sendTo("c@x.example", `org_2.${expires}.${mac}`),
          sendTo("d@x.example", ""),
          sendTo("e@x.example"),
        ],
      }),
    );
    expect(out.map((r) => r.response?.outcome ?? `${r.errorCode} ${r.notQueued}`)).toEqual([
      SendOutcome.ACCEPTED,
      `${Code.Unauthenticated} true`,
      `${Code.Unauthenticated} true`,
      `${Code.Unauthenticated} true`,
      SendOutcome.ACCEPTED,
    ]);
    expect([accepted, orgs]).toEqual([
      ["a@x.example", "e@x.example"],
      ["org_2", "org_1"],
    ]);
    expect(lines.filter((l) => l.msg === "queued").map((l) => l.fields.org)).toEqual(["org_2", "org_1"]);
    expect(lines.filter((l) => l.level === "warn").map((l) => l.fields.ticket)).toEqual([
      "forged",
      "forged",
      "malformed",
    ]);
  });

  test("a batch read after its deadline queues nothing, and says so for each send", async () => {
    const { d, accepted } = deps(5_000);
    const req = create(SendBatchRequestSchema, {
      sends: [sendTo("a@x.example"), sendTo("b@x.example")],
      deadlineMs: 5_000n,
    });
    const out = await sendBatch(d, req);
    expect(out.map((r) => [r.errorCode, r.notQueued])).toEqual([
      [Code.DeadlineExceeded, true],
      [Code.DeadlineExceeded, true],
    ]);
    expect(accepted).toEqual([]);
  });

  test("a send refused by a full disk is noted", async () => {
    const { d, noted } = deps();
    const out = await sendBatch(d, create(SendBatchRequestSchema, { sends: [sendTo("full@x.example")] }));
    expect(out[0]!.errorCode).toBe(Code.Unavailable);
    expect(noted).toEqual(["store"]);
  });

  test("more sends than a batch may hold are refused whole", async () => {
    const { d, accepted } = deps();
    const sends = Array.from({ length: MAX_SEND_BATCH + 1 }, (_, i) => sendTo(`r${i}@x.example`));
    await expect(sendBatch(d, create(SendBatchRequestSchema, { sends }))).rejects.toThrow("at most 256");
    expect(accepted).toEqual([]);
  });

  test("from bytes to bytes", async () => {
    const { d } = deps();
    const bytes = toBinary(SendBatchRequestSchema, create(SendBatchRequestSchema, { sends: [sendTo("a@x.example")] }));
    const out = fromBinary(SendBatchResponseSchema, await sendRawBatch(d, Buffer.from(bytes)));
    expect(out.results[0]!.response?.messageId).toBe("msg_a@x.example");
    await expect(sendRawBatch(d, Buffer.from([0xff, 0xff]))).rejects.toThrow("not a SendBatchRequest");
  });
});
