// The records writer's failures are counted for the metrics, each failed round once, while the
// log says so only when the failure starts.
import { expect, test } from "bun:test";
import { systemClock } from "../clock/clock";
import { Lane, MessageStatus } from "../gen/mailcore/limiter/v1/mail_pb";
import type { MessageHistory } from "../model/history";
import { logger } from "../log/log";
import { limiterMetrics, newRegistry } from "../metrics/metrics";
import { RecordsWriter, type WrittenRecords } from "./recordswriter";

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
