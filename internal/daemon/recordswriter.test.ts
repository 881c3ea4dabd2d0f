// The records writer's failures are counted for the metrics, each failed round once, while the
// log says so only when the failure starts. The email.* events' data: a classified refusal's
// type, status and diagnostic.
import { expect, test } from "bun:test";
import { systemClock } from "../clock/clock";
import { Lane, MessageStatus } from "../gen/mailcore/limiter/v1/mail_pb";
import type { MessageHistory } from "../model/history";
import { logger } from "../log/log";
import { limiterMetrics, newRegistry } from "../metrics/metrics";
import { bounceDetail } from "../mail/bounce_detail";
import { emailWebhookEvents, RecordsWriter, type WrittenRecords } from "./recordswriter";

test("every round the records refuse counts as a failure of its task", async () => {
  const registry = newRegistry("limiterd");
  const metrics = limiterMetrics(registry, {
    lanes: async () => [],
    ready: async () => true,
    dkimFailing: async () => 0,
  });
  const changed: MessageHistory[] = [
    {
      id: "msg_1",
      orgId: "org_1",
      lane: Lane.TRANSACTIONAL,
      from: "a@acme.example",
      to: "b@example.org",
      toMailbox: "b@example.org",
      subject: "s",
      tags: [],
      status: MessageStatus.QUEUED,
      attempts: 0,
      createdMs: 0,
      updatedMs: 0,
      version: 1,
      events: [],
    },
  ];
  const down = () => Promise.reject(new Error("records down"));
  const records: WrittenRecords = {
    history: { write: down, deleteFinishedBefore: down },
    webhookDeliveries: { enqueueIn: down, deleteFinishedBefore: down },
    audience: { recordMessageEvents: down },
    campaigns: { recordOutcomes: down },
    directory: { touchTokens: down },
    suppressions: { delivered: down },
  };
  const writer = new RecordsWriter({
    outbox: { changedMessages: async () => changed, settle: async () => 0 },
    leases: { holdLease: async () => true },
    records,
    clock: systemClock,
    owner: "test",
    retentionMs: 86_400_000,
    log: logger("test"),
    metrics,
  });
  await writer.flush();
  await writer.flush();
  expect(await registry.metrics()).toContain(
    'mailcore_records_writer_failures_total{task="message history",process="limiterd"} 2',
  );
});

test("email.bounced and email.failed carry the refusal's type, status and diagnostic; other events none", () => {
  const message: MessageHistory = {
    id: "msg_1",
    orgId: "org_1",
    lane: Lane.TRANSACTIONAL,
    from: "a@example.org",
    to: "b@example.org",
    toMailbox: "b@example.org",
    subject: "s",
    tags: [],
    status: MessageStatus.BOUNCED,
    attempts: 1,
    createdMs: 0,
    updatedMs: 0,
    version: 3,
    events: [],
  };
  const hard = { type: "hard", status: "5.1.1", diagnostic: "550 5.1.1 user unknown" } as const;
  const policy = { type: "policy", status: "5.7.1", diagnostic: "554 5.7.1 spam" } as const;
  const events = emailWebhookEvents([
    { message, seq: 1, event: { status: MessageStatus.BOUNCED, atMs: 1, detail: bounceDetail(hard) } },
    { message, seq: 1, event: { status: MessageStatus.FAILED, atMs: 2, detail: bounceDetail(policy) } },
    { message, seq: 1, event: { status: MessageStatus.DELIVERED, atMs: 3, detail: "250 2.0.0 OK" } },
  ]);
  expect(events.map((e) => [e.type, e.data.bounce])).toEqual([
    ["email.bounced", hard],
    ["email.failed", policy],
    ["email.delivered", undefined],
  ]);
});
