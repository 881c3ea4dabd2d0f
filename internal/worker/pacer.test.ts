// A lane's deliveries in one worker, in virtual time: on time they start at their slots; after a
// stall they catch up, never more than 41 in any 1000 ms nor closer than
// half a slot; a slot far ahead (a clock behind the daemon's) is held at most MAX_HOLD_MS.
import { beforeEach, expect, test } from "bun:test";
import { spacing } from "../testkit/pacing";
import { VirtualTime } from "../testkit/virtualtime";
import { LanePacer, MAX_HOLD_MS } from "./pacer";

const RATE = 40;
let time: VirtualTime;
let pacer: LanePacer;
let started: { slot: number; at: number }[];

beforeEach(() => {
  time = new VirtualTime();
  pacer = new LanePacer(time);
  started = [];
});

const queue = (slot: number, rate = RATE) =>
  pacer.turn(slot, rate, () => {
    started.push({ slot, at: time.now });
  });

/** Queues each message a second before its slot, as the bulk lane releases them. */
const feed = (slots: number[]) => {
  for (const slot of slots) time.setTimer(slot - 1_000 - time.now, () => void queue(slot));
};

test("on time: each delivery starts at its slot", async () => {
  const t0 = time.now + 1_000;
  feed(Array.from({ length: 200 }, (_, k) => t0 + 25 * k));
  await time.runUntil(t0 + 10_000);
  expect(started.map((s) => s.at - s.slot)).toEqual(Array(200).fill(0));
});

test("after a stall of 300 ms the late ones catch up: never more than 41 in 1000 ms, nor closer than half a slot", async () => {
  const t0 = time.now + 1_000;
  feed(Array.from({ length: 2_000 }, (_, k) => t0 + 25 * k));
  await time.runUntil(t0 + 2_000);
  time.stall(300); // the worker's event loop was busy: 12 slots passed meanwhile
  await time.runUntil(t0 + 60_000);
  // (Its leases meanwhile came late too: the feed's timers fire late by the stall.)
  expect(started).toHaveLength(2_000);
  const at = started.map((s) => s.at);
  expect(spacing(at).maxSliding).toBe(RATE + 1);
  for (let i = 1; i < at.length; i++) expect(at[i]! - at[i - 1]!).toBeGreaterThanOrEqual(12.5);
  for (const s of started) expect(s.at).toBeGreaterThanOrEqual(s.slot);
  // Caught up within 25 s of the stall: from then on each starts at its slot.
  const late = started.filter((s) => s.at > s.slot);
  expect(late.at(-1)!.slot - t0).toBeLessThanOrEqual(27_000);
  expect(started.at(-1)!.at).toBe(started.at(-1)!.slot);
});

test("a message that comes late takes its place among those waiting, by slot", async () => {
  const t0 = time.now + 100;
  void queue(t0 + 50);
  void queue(t0 + 100);
  void queue(t0 + 25); // its lease came later
  await time.runUntil(t0 + 1_000);
  expect(started.map((s) => s.slot - t0)).toEqual([25, 50, 100]);
});

test(`a slot further ahead than ${MAX_HOLD_MS} ms is held ${MAX_HOLD_MS} ms`, async () => {
  const t0 = time.now;
  void queue(t0 + 60_000);
  await time.runUntil(t0 + 10_000);
  expect(started).toEqual([{ slot: t0 + 60_000, at: t0 + MAX_HOLD_MS }]);
});

test("without a slot or a rate, a delivery starts at once", async () => {
  void queue(0, 0);
  void queue(0, 0);
  await time.runUntil(time.now);
  expect(started).toHaveLength(2);
});

test("a start's time is taken when it returns: a start that took 30 ms pushes the next ones", async () => {
  const t0 = time.now + 1_000;
  let first = true;
  const slow = (slot: number) =>
    pacer.turn(slot, RATE, () => {
      if (first) time.stall(30); // the start itself took 30 ms (or the process waited for a core)
      first = false;
      started.push({ slot, at: time.now });
    });
  void slow(t0);
  void slow(t0 + 25);
  void slow(t0 + 50);
  await time.runUntil(t0 + 1_000);
  // The second comes half a slot after the end of the first, the third half a slot after that.
  expect(started.map((s) => s.at - t0)).toEqual([30, 42.5, 55]);
});

test("release gives every waiting message its turn at once", async () => {
  const t0 = time.now;
  for (let k = 0; k < 10; k++) void queue(t0 + 500 + 25 * k);
  await time.runUntil(t0 + 100);
  pacer.release();
  await time.runUntil(t0 + 100);
  expect(started).toHaveLength(10);
});
