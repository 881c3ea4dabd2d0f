// The scheduler's pacing against a store that stalls: missed slots come late, never as a burst.
import { expect, test } from "bun:test";
import { systemClock } from "../clock/clock";
import { Lane } from "../gen/mailcore/limiter/v1/mail_pb";
import { logger } from "../log/log";
import type { MailStore } from "../store/mail";
import { LaneScheduler, type ReleaseRecord } from "./scheduler";

test("a 120 ms stall is made up at no more than twice the rate, and never more than 40 in a second", async () => {
  let calls = 0;
  const store = {
    holdScheduler: async () => true,
    async release() {
      calls++;
      if (calls === 20) {
        const until = Date.now() + 120;
        while (Date.now() < until); // block the event loop, as a busy daemon would
      }
      return { orgId: "o", messageId: `m${calls}` };
    },
  } as unknown as MailStore;
  const releases: ReleaseRecord[] = [];
  const s = new LaneScheduler({ store, lane: Lane.TRANSACTIONAL, ratePerSecond: 40, owner: "t", clock: systemClock, onRelease: (r) => releases.push(r), log: logger("test") });
  s.start();
  await Bun.sleep(2_050);
  await s.stop();

  const times = releases.map((r) => r.releasedAtMs);
  // 2 seconds at 40 per second, the stalled slots included.
  expect(releases.length).toBeGreaterThanOrEqual(80);
  expect(releases.length).toBeLessThanOrEqual(83);
  for (let i = 1; i < times.length; i++) expect(times[i]! - times[i - 1]!).toBeGreaterThanOrEqual(12);
  for (let i = 40; i < times.length; i++) expect(times[i]! - times[i - 40]!).toBeGreaterThanOrEqual(1_000);
  // Every release belongs to its own slot, at or after it.
  for (const r of releases) expect(r.releasedAtMs).toBeGreaterThanOrEqual(Math.floor(r.slotAtMs));
  expect(new Set(releases.map((r) => r.slotAtMs)).size).toBe(releases.length);
});
