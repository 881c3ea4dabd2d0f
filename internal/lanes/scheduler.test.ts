// The lane scheduler on the embedded store, in virtual time: slots exactly 40 in every 1000 ms
// of a run, a stall shorter than the lead less its refill costs no slot, a longer one restarts
// the run without a burst, an idle lane makes no store calls, a bulk lane found empty lets a
// backlog gather before its run starts, a step of the wall clock neither stalls nor bursts a lane.
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { Lane } from "../gen/mailcore/limiter/v1/mail_pb";
import { EmbeddedHot } from "../hotstore/embedded/embedded";
import type { MailStore, SlotPlan } from "../hotstore/hotstore";
import { logger } from "../log/log";
import { projectSuiteOrg, SUITE_QUEUE_CAP, suiteSends } from "../testkit/hotstores";
import { spacing } from "../testkit/pacing";
import { VirtualTime } from "../testkit/virtualtime";
import { LANE_LEAD, LaneScheduler, type ReleaseRecord } from "./scheduler";

const RATE = 40;

let time: VirtualTime;
let store: EmbeddedHot;
/** Release calls, and the virtual time a call should take (a stall of the daemon). */
let calls: number[];
let stallOnCall: Map<number, number>;
let releases: ReleaseRecord[];
/** Slots the scheduler said were lost. */
let missed: number;

beforeEach(async () => {
  time = new VirtualTime();
  store = new EmbeddedHot(null, time.nowMs);
  await projectSuiteOrg(store.admission, "org_a");
  await projectSuiteOrg(store.admission, "org_b");
  calls = [];
  stallOnCall = new Map();
  releases = [];
  missed = 0;
});
afterEach(async () => {
  await store.lifecycle.close();
});

const sends = suiteSends(() => ({ mail: store.mail, clock: time, org: "org_a", idPrefix: "msg" }));
const queue = async (lane: Lane, n: number, orgId = "org_a") => {
  for (let i = 0; i < n; i++)
    await sends.send({ lane, orgId, mailbox: `r${sends.ids}@example.com`, countGuards: false, checkCooldown: false });
};

function scheduler(lane: Lane): LaneScheduler {
  const stalling: Pick<MailStore, "release"> = {
    async release(l: Lane, nowMs: number, plan: SlotPlan) {
      calls.push(nowMs);
      const batch = await store.mail.release(l, nowMs, plan);
      time.stall(stallOnCall.get(calls.length) ?? 0);
      return batch;
    },
  };
  const s = new LaneScheduler({
    mail: stalling,
    leases: store.leases,
    signals: store.signals,
    lane,
    ratePerSecond: RATE,
    owner: "test",
    time,
    onRelease: (r) => releases.push(r),
    onMissed: (_, n) => {
      missed += n;
    },
    log: logger("test"),
  });
  s.start();
  return s;
}

const slotsOf = (rs: ReleaseRecord[]) => rs.map((r) => r.slotMs);

describe("a backlogged bulk lane", () => {
  test("releases exactly 40 slots in every 1000 ms, each at most the lead ahead of its slot, in about 2 calls a second", async () => {
    await queue(Lane.BULK, 1_000);
    const t0 = time.nowMs();
    const s = scheduler(Lane.BULK);
    await time.runUntil(t0 + 20_000);
    await s.stop();
    const slots = slotsOf(releases);
    // Released up to the lead ahead: the slots run 1.5 to 2 s past the 20 s.
    expect(slots).toEqual(Array.from({ length: slots.length }, (_, k) => t0 + 25 * k));
    expect(slots.length).toBeGreaterThanOrEqual(21.5 * RATE);
    expect(slots.length).toBeLessThanOrEqual(22 * RATE + 1);
    for (const r of releases) {
      expect(r.releasedAtMs).toBeLessThanOrEqual(r.slotMs);
      expect(r.slotMs - r.releasedAtMs).toBeLessThanOrEqual(LANE_LEAD[Lane.BULK].leadMs);
    }
    // A call every half second and a slot: 20 or 21 slots each.
    expect(calls.length).toBeGreaterThanOrEqual(36);
    expect(calls.length).toBeLessThanOrEqual(41);
    expect(missed).toBe(0);
  });

  test("a stall of 1,400 ms costs no slot; one of 2,500 ms starts a new run after it, with no burst", async () => {
    await queue(Lane.BULK, 1_000);
    const t0 = time.nowMs();
    stallOnCall.set(5, 1_400);
    stallOnCall.set(15, 2_500);
    const s = scheduler(Lane.BULK);
    await time.runUntil(t0 + 15_000);
    await s.stop();
    const slots = slotsOf(releases);
    const gaps = slots.slice(1).map((at, i) => at - slots[i]!);
    // One gap only, from the 2,500 ms stall; every other slot follows the one before by 25 ms.
    expect(gaps.filter((g) => g !== 25)).toHaveLength(1);
    const lost = gaps.find((g) => g !== 25)!;
    expect(lost).toBeGreaterThan(25);
    expect(lost).toBeLessThanOrEqual(2_500);
    expect(spacing(slots).maxSliding).toBe(RATE);
    for (const r of releases) expect(r.releasedAtMs).toBeLessThanOrEqual(r.slotMs);
    // Reported: the slots the gap would have held.
    expect(missed).toBe(Math.floor(lost / 25) - 1);
  });

  test("round-robin holds across batches: two organizations alternate", async () => {
    await queue(Lane.BULK, 50, "org_a");
    await queue(Lane.BULK, 50, "org_b");
    const s = scheduler(Lane.BULK);
    await time.runUntil(time.now + 3_000);
    await s.stop();
    expect(releases).toHaveLength(100);
    for (let i = 1; i < releases.length; i++) expect(releases[i]!.orgId).not.toBe(releases[i - 1]!.orgId);
  });
});

describe("the transactional lane", () => {
  test("stamps slots at most 50 ms ahead: another organization's message waits behind two slots at most", async () => {
    await queue(Lane.TRANSACTIONAL, 400, "org_a");
    const s = scheduler(Lane.TRANSACTIONAL);
    await time.runUntil(time.now + 2_000);
    const acceptedAt = time.nowMs();
    await queue(Lane.TRANSACTIONAL, 1, "org_b");
    await time.runUntil(time.now + 1_000);
    await s.stop();
    for (const r of releases) expect(r.slotMs - r.releasedAtMs).toBeLessThanOrEqual(50);
    const b = releases.find((r) => r.orgId === "org_b")!;
    expect(b.slotMs - acceptedAt).toBeLessThanOrEqual(50 + 25);
    const slots = slotsOf(releases);
    expect(slots).toEqual(Array.from({ length: slots.length }, (_, k) => slots[0]! + 25 * k));
  });
});

describe("an idle lane", () => {
  test("makes no store calls while empty; a message is released on its signal with the slot now", async () => {
    const s = scheduler(Lane.TRANSACTIONAL);
    await time.runUntil(time.now + 10_000);
    expect(calls).toHaveLength(1); // the first look; then it waits for a signal
    await queue(Lane.TRANSACTIONAL, 1);
    const acceptedAt = time.nowMs();
    await time.runUntil(time.now + 1_000);
    await s.stop();
    expect(calls).toHaveLength(2);
    expect(releases.map((r) => [r.slotMs, r.releasedAtMs])).toEqual([[acceptedAt, acceptedAt]]);
  });

  test("a bulk lane found empty starts its run a second after a message's signal, so messages that trail it keep the run", async () => {
    const s = scheduler(Lane.BULK);
    await time.runUntil(time.now + 5_000); // the first look finds the lane empty
    const t0 = time.nowMs();
    // A fan-out that falls behind the slots before it has a backlog: 300 ms, then 400 ms between.
    await queue(Lane.BULK, 1);
    await time.runUntil(t0 + 300);
    await queue(Lane.BULK, 20);
    await time.runUntil(t0 + 700);
    await queue(Lane.BULK, 20);
    await time.runUntil(t0 + 3_000);
    await s.stop();
    expect(slotsOf(releases)).toEqual(Array.from({ length: 41 }, (_, k) => t0 + LANE_LEAD[Lane.BULK].startMs + 25 * k));
    expect(missed).toBe(0);
  });

  test("a bulk lane that runs empty in the middle of a run goes on with it at once", async () => {
    await queue(Lane.BULK, 10);
    const t0 = time.nowMs();
    const s = scheduler(Lane.BULK);
    await time.runUntil(t0 + 100); // ten slots stamped at once, the last at t0 + 225
    await queue(Lane.BULK, 1);
    await time.runUntil(t0 + 1_000);
    await s.stop();
    expect(slotsOf(releases)).toEqual(Array.from({ length: 11 }, (_, k) => t0 + 25 * k));
    expect(releases.at(-1)!.releasedAtMs).toBe(t0 + 100);
  });

  test("looks again after 30 s without a signal (a signal can be lost)", async () => {
    const s = scheduler(Lane.TRANSACTIONAL);
    await time.runUntil(time.now + 1_000);
    // Queued behind the scheduler's back: no signal.
    await store.mail.enqueue(
      {
        orgId: "org_a",
        messageId: "quiet",
        lane: Lane.BULK,
        payload: "{}",
        from: "s@d.example",
        to: "q@example.com",
        subject: "s",
        tags: [],
        fromDomain: "d.example",
        mailbox: "q@example.com",
        checkCooldown: false,
        countGuards: false,
        guards: { shortMax: 5, shortWindowMs: 1, longMax: 5, longWindowMs: 1 },
        queueCap: SUITE_QUEUE_CAP,
      },
      time.nowMs(),
    );
    await time.runUntil(time.now + 31_000);
    await s.stop();
    expect(calls.length).toBeGreaterThanOrEqual(2);
  });
});

describe("the wall clock", () => {
  test("a step back of a minute restarts the run at once; a step forward does too: no stall, no burst", async () => {
    await queue(Lane.BULK, 1_000);
    const s = scheduler(Lane.BULK);
    await time.runUntil(time.now + 2_000);
    const before = releases.length;
    time.stepWall(-60_000);
    await time.runUntil(time.now + 2_000);
    const afterBack = releases.length;
    time.stepWall(120_000);
    await time.runUntil(time.now + 2_000);
    await s.stop();
    // Two seconds of slots after each step, give or take the lead.
    expect(afterBack - before).toBeGreaterThanOrEqual(2 * RATE);
    expect(releases.length - afterBack).toBeGreaterThanOrEqual(2 * RATE);
    const slots = slotsOf(releases);
    for (let i = 1; i < slots.length; i++)
      if (slots[i]! > slots[i - 1]!) expect(slots[i]! - slots[i - 1]!).toBeGreaterThanOrEqual(25);
    expect(spacing(slots.slice(afterBack)).maxSliding).toBe(RATE);
  });
});
