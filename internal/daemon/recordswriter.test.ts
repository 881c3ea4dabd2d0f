// The records writer's failures are counted for the metrics, each failed round once, while the
// log says so only when the failure starts.
import { expect, test } from "bun:test";
import { systemClock } from "../clock/clock";
import type { MessageHistory } from "../model/history";
import { logger } from "../log/log";
import { limiterMetrics, newRegistry } from "../metrics/metrics";
import type { Records } from "../records/records";
import { RecordsWriter } from "./recordswriter";

test("every round the records refuse counts as a failure of its task", async () => {
  const registry = newRegistry("limiterd");
  const metrics = limiterMetrics(registry, { lanes: async () => [], ready: async () => true });
  const changed = [{ orgId: "org_1", id: "msg_1", version: 1 } as MessageHistory];
  const writer = new RecordsWriter({
    hot: { holdLease: async () => true, changedMessages: async () => changed, settle: async () => 0 },
    records: { history: { write: () => Promise.reject(new Error("records down")) } } as unknown as Records,
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
