// The scheduler's algorithm on virtual time (no sleeps): a real embedded store, a monotonic
// clock and timers that a driver moves from one due timer to the next. A stall is the clock
// jumping while the scheduler is busy, as a blocked event loop would.
import { afterEach, expect, test } from "bun:test";
import { ManualClock } from "../clock/clock";
import { Lane } from "../gen/mailcore/limiter/v1/mail_pb";
import { EmbeddedHot } from "../hotstore/embedded/embedded";
import { logger } from "../log/log";
import { projectSuiteOrg, suiteSends } from "../testkit/hotstores";
import { IDLE_RECHECK_MS, LaneScheduler, LEAD_MS, type ReleaseRecord, type SchedulerTime } from "./scheduler";

const WALL0 = Date.UTC(2026, 10, 1);

/**
 * Virtual time: mono runs in fractions of a ms, as performance.now() does; the wall clock is
 * WALL0 plus mono plus any step, truncated to the ms as Date.now() is.
 */
class VirtualTime implements SchedulerTime {
  mono = 0.6;
  wallStep = 0;
  private timers: { at: number; done: () => void }[] = [];
  private slept = 0;
  monoMs = () => this.mono;
  wallMs = () => Math.floor(WALL0 + this.mono + this.wallStep);
  sleep(ms: number, signal: AbortSignal): Promise<void> {
    return new Promise((done) => {
      // A timer fires a fraction of a ms late, by a different fraction each time.
      const timer = { at: this.mono + Math.max(0, ms) + (this.slept++ % 7) * 0.13, done };
      if (signal.aborted) return done();
      signal.addEventListener("abort", () => {
        this.timers = this.timers.filter((t) => t !== timer);
        done();
      });
      this.timers.push(timer);
    });
  }
  /** Lets the scheduler run until it waits, then fires the next timer; until mono reaches `until`. */
  async runUntil(until: number): Promise<void> {
    for (;;) {
      for (let i = 0; i < 20; i++) await Promise.resolve();
      await new Promise((r) => setImmediate(r));
      this.timers.sort((a, b) => a.at - b.at);
      const next = this.timers[0];
      if (!next || next.at > until) {
        this.mono = Math.max(this.mono, until);
        return;
      }
      this.timers.shift();
      this.mono = Math.max(this.mono, next.at);
      next.done();
    }
  }
}

let store: EmbeddedHot;
let scheduler: LaneScheduler | undefined;
afterEach(async () => {
  await scheduler?.stop();
  await store?.close();
});

async function setup(opts: { backlog: number; onRelease?: (r: ReleaseRecord, time: VirtualTime) => void }) {
  const time = new VirtualTime();
  const clock = new ManualClock(WALL0);
  store = new EmbeddedHot(null, () => time.wallMs());
  await projectSuiteOrg(store, "org");
  const sends = suiteSends(() => ({ store, clock, org: "org", idPrefix: "m" }));
  const send = () => sends.send({ lane: Lane.BULK, countGuards: false, checkCooldown: false });
  for (let i = 0; i < opts.backlog; i++) await send();
  const releases: ReleaseRecord[] = [];
  let calls = 0;
  const counted = {
    holdLease: store.holdLease.bind(store),
    release: (...args: Parameters<EmbeddedHot["release"]>) => {
      calls++;
      return store.release(...args);
    },
  };
  scheduler = new LaneScheduler({
    store: counted,
    lane: Lane.BULK,
    ratePerSecond: 40,
    owner: "t",
    time,
    leadMs: LEAD_MS,
    onRelease: (r) => {
      releases.push(r);
      opts.onRelease?.(r, time);
    },
    log: logger("test"),
  });
  scheduler.start();
  return { time, releases, send, calls: () => calls };
}

/** Slots relative to the first, and how many each whole second from the first holds. */
function perSecond(rs: ReleaseRecord[]): number[] {
  const first = rs[0]!.slotMs;
  const counts: number[] = [];
  for (const r of rs) {
    const s = Math.floor((r.slotMs - first) / 1_000);
    counts[s] = (counts[s] ?? 0) + 1;
  }
  return counts;
}

test("a backlog leaves exactly 40 a second, every slot 25 ms after the last, though the loop stalls 600 ms and 900 ms", async () => {
  const { time, releases } = await setup({
    backlog: 400,
    onRelease: (r, t) => {
      // The daemon's event loop blocked right after a release, twice (once the lead is built:
      // the first second's slots are all released in the first instant).
      if (r.messageId === "m_60") t.mono += 600;
      if (r.messageId === "m_150") t.mono += 900;
    },
  });
  await time.runUntil(12_000);
  expect(releases).toHaveLength(400);
  for (let i = 1; i < releases.length; i++) expect(releases[i]!.slotMs - releases[i - 1]!.slotMs).toBe(25);
  expect(perSecond(releases)).toEqual(Array(10).fill(40));
  // No slot was stamped after the fact: each was released at or before it, at most the lead ahead.
  for (const r of releases) {
    expect(r.releasedAtMs).toBeLessThanOrEqual(r.slotMs);
    expect(r.slotMs - r.releasedAtMs).toBeLessThanOrEqual(LEAD_MS);
  }
});

test("a stall longer than the lead slips the schedule, and still never puts two slots closer than 25 ms", async () => {
  const { time, releases } = await setup({
    backlog: 200,
    onRelease: (r, t) => {
      if (r.messageId === "m_60") t.mono += LEAD_MS + 500;
    },
  });
  await time.runUntil(10_000);
  expect(releases).toHaveLength(200);
  for (let i = 1; i < releases.length; i++)
    expect(releases[i]!.slotMs - releases[i - 1]!.slotMs).toBeGreaterThanOrEqual(25);
  const gaps = releases.slice(1).map((r, i) => r.slotMs - releases[i]!.slotMs);
  expect(gaps.filter((g) => g > 25)).toHaveLength(1); // the one slip, about the stall beyond the lead
});

test("a step of the wall clock neither stalls nor bursts a lane: spacing runs on the monotonic clock", async () => {
  const { time, releases } = await setup({
    backlog: 120,
    onRelease: (r, t) => {
      if (r.messageId === "m_30") t.wallStep -= 10_000; // NTP steps the wall clock back 10 s
      if (r.messageId === "m_70") t.wallStep += 60_000; // and forward a minute
    },
  });
  await time.runUntil(5_000);
  expect(releases).toHaveLength(120);
  const gaps = releases.slice(1).map((r, i) => r.slotMs - releases[i]!.slotMs);
  // Each step moves the stamps by the step, once; every other gap is the spacing.
  expect(gaps.filter((g) => g !== 25).length).toBeLessThanOrEqual(2);
  const monoSpan = releases.length * 25;
  expect(time.mono).toBeGreaterThanOrEqual(monoSpan - LEAD_MS - 25);
});

test("an idle hour costs a store call per lane every few seconds, and the first message after it gets the slot 'now'", async () => {
  const { time, releases, send, calls } = await setup({ backlog: 0 });
  await time.runUntil(3_600_000);
  expect(calls()).toBeLessThanOrEqual(3_600_000 / IDLE_RECHECK_MS + 1);
  await send();
  const acceptedAt = time.wallMs();
  scheduler!.wake();
  await time.runUntil(time.mono); // no time passes: the wake alone releases it
  expect(releases).toHaveLength(1);
  expect(releases[0]!.slotMs).toBe(acceptedAt);
  expect(releases[0]!.releasedAtMs).toBe(acceptedAt);
});
