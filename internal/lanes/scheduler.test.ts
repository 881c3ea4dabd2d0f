// test-runner: alone
// The scheduler's pacing against a store that stalls: missed slots come late, never as a burst.
import { expect, test } from "bun:test";
import { ManualClock, systemClock } from "../clock/clock";
import { Lane } from "../gen/mailcore/limiter/v1/mail_pb";
import { logger } from "../log/log";
import type { HotStore } from "../hotstore/hotstore";
import { LaneScheduler, type ReleaseRecord } from "./scheduler";

test("a 120 ms stall is made up at no more than twice the rate, and never more than 40 in a second", async () => {
  let calls = 0;
  const store = {
    holdLease: async () => true,
    watchLanes: () => () => {},
    async release() {
      calls++;
      if (calls === 20) {
        const until = Date.now() + 120;
        while (Date.now() < until); // block the event loop, as a busy daemon would
      }
      return { orgId: "o", messageId: `m${calls}` };
    },
  } as unknown as HotStore;
  const releases: ReleaseRecord[] = [];
  const times: number[] = []; // monotonic, as the scheduler paces
  const onRelease = (r: ReleaseRecord) => {
    releases.push(r);
    times.push(performance.now());
  };
  const s = new LaneScheduler({
    store,
    lane: Lane.TRANSACTIONAL,
    ratePerSecond: 40,
    owner: "t",
    clock: systemClock,
    onRelease,
    log: logger("test"),
  });
  s.start();
  await Bun.sleep(2_050);
  await s.stop();

  // 2 seconds at 40 per second, the stalled slots included.
  expect(releases.length).toBeGreaterThanOrEqual(80);
  expect(releases.length).toBeLessThanOrEqual(83);
  for (let i = 1; i < times.length; i++) expect(times[i]! - times[i - 1]!).toBeGreaterThanOrEqual(12);
  // (1 ms of slack: the test stamps a release a moment after the scheduler does.)
  for (let i = 40; i < times.length; i++) expect(times[i]! - times[i - 40]!).toBeGreaterThanOrEqual(999);
  // Every release belongs to its own slot, at or after it.
  for (const r of releases) expect(r.releasedAtMs).toBeGreaterThanOrEqual(Math.floor(r.slotAtMs) - 1);
  expect(new Set(releases.map((r) => r.slotAtMs)).size).toBe(releases.length);
});

test("a step of the wall clock neither stalls nor bursts a lane: pacing runs on the monotonic clock", async () => {
  const wall = new ManualClock(Date.now());
  const store = {
    holdLease: async () => true,
    watchLanes: () => () => {},
    release: async () => ({ orgId: "o", messageId: "m" }),
  } as unknown as HotStore;
  const at: number[] = [];
  const s = new LaneScheduler({
    store,
    lane: Lane.BULK,
    ratePerSecond: 40,
    owner: "t",
    clock: wall,
    onRelease: () => at.push(performance.now()),
    log: logger("test"),
  });
  s.start();
  await Bun.sleep(500);
  wall.advance(-10_000); // NTP steps the wall clock back 10 s
  await Bun.sleep(520);
  wall.advance(60_000); // and forward a minute
  await Bun.sleep(500);
  await s.stop();
  expect(at.length).toBeGreaterThanOrEqual(59);
  expect(at.length).toBeLessThanOrEqual(62);
  for (let i = 1; i < at.length; i++) expect(at[i]! - at[i - 1]!).toBeGreaterThanOrEqual(12);
});
