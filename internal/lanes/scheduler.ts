import { delayUntil, timerDelay } from "../clock/clock";
import { Lane } from "../gen/mailcore/limiter/v1/mail_pb";
import { FailureEpisode } from "../log/episodes";
import type { Logger } from "../log/log";
import type { LaneSignals, MailStore, Released, SingletonLeases } from "../hotstore/hotstore";

export interface ReleaseRecord extends Released {
  lane: Lane;
  /** When the store released the message (wall ms): at most the lane's lead before its slot. */
  releasedAtMs: number;
}

/** The scheduler's time: the wall clock the store stamps slots on, and a sleep that stop() ends. */
export interface SchedulerTime {
  nowMs(): number;
  /** Resolves after ms, or at once when signal aborts. */
  sleep(ms: number, signal: AbortSignal): Promise<void>;
}

export const realTime: SchedulerTime = {
  nowMs: () => Date.now(),
  sleep: (ms, signal) =>
    new Promise((done) => {
      if (signal.aborted) return done();
      const finish = () => {
        clearTimeout(timer);
        signal.removeEventListener("abort", finish);
        done();
      };
      const timer = setTimeout(finish, timerDelay(ms));
      signal.addEventListener("abort", finish);
    }),
};

/**
 * How each lane stamps its slots ahead. leadMs: how far ahead of its slot a message is
 * released; refillMs: how much of the lead passes before the lane releases again (its batch of
 * slots). A stall of the daemon shorter than the lead less the refill moves no slot. Round-robin
 * works on what is not yet released, so another organization's message waits behind at most the
 * lead's slots: a short lead for the transactional lane (its one-time codes), two seconds of
 * slots, topped up twice a second, for the bulk lane. startMs: how long a lane found empty waits
 * after a message arrives before it starts a new run. A run holds only while each message comes
 * before its slot, and a campaign's fan-out, one accept at a time on a busy daemon, can fall
 * behind 40 a second before it has a backlog: the bulk lane lets a second of it gather first.
 */
export const LANE_LEAD: Record<Lane, { leadMs: number; refillMs: number; startMs: number }> = {
  [Lane.UNSPECIFIED]: { leadMs: 0, refillMs: 0, startMs: 0 },
  [Lane.TRANSACTIONAL]: { leadMs: 50, refillMs: 0, startMs: 0 },
  [Lane.BULK]: { leadMs: 2_000, refillMs: 500, startMs: 1_000 },
};

/** The most messages one release call stamps (the bulk lane's half second at 40 a second is 20). */
const RELEASE_BATCH = 100;

/** The messages a lane may have released ahead of their slots at one time, at most: what a worker's lease room must allow for. */
export const aheadOf = (lane: Lane, rate: number) => Math.ceil((rate * LANE_LEAD[lane].leadMs) / 1_000) + 1;

const HOLD_TTL_MS = 2_000;
const HOLD_RENEW_MS = 500;
/** How long an empty lane waits for a signal before it looks again anyway (a signal can be lost). */
const IDLE_LOOK_MS = 30_000;
/** After a store call failed, the next try. */
const RETRY_MS = 100;

export interface SchedulerOptions {
  mail: Pick<MailStore, "release">;
  /** With Redis, one daemon at a time runs a lane's scheduler. */
  leases: SingletonLeases;
  /** An empty lane waits for the signal that it has a message. */
  signals: LaneSignals;
  lane: Lane;
  ratePerSecond: number;
  /** This daemon's name; with Redis, one daemon at a time runs a lane's scheduler. */
  owner: string;
  time: SchedulerTime;
  onRelease(r: ReleaseRecord): void;
  /** A backlogged lane's run started again: the scheduler came back after the run's next slot, and this many slots were lost. */
  onMissed(lane: Lane, slots: number): void;
  log: Logger;
}

/**
 * Paces one lane at `rate` messages a second by releasing each with a slot that the store
 * stamps: every 1000 ms of a run of slots holds exactly `rate` of them (the store's SlotPlan),
 * and workers deliver a message no earlier than its slot. The scheduler keeps the lane's slots
 * stamped up to its lead ahead (LANE_LEAD), topped up each time its refill has passed, so the
 * pacing does not depend on when this event loop runs: a stall shorter than the lead less the
 * refill (SQLite work, a slow store call, a garbage collection) moves no slot. A longer
 * stall lets the lane's next slot pass; the run then starts again at the moment the scheduler
 * is back, and the slots it missed are lost, never made up in a burst.
 *
 * An empty lane does not poll: it waits for the store's signal that the lane has a message
 * waiting (from any daemon). Another daemon's lane is looked at again when its lease may have
 * lapsed, or on a signal.
 */
export class LaneScheduler {
  private readonly stopping = new AbortController();
  private done: Promise<void> | undefined;
  /** Signals heard for this lane, and what ends the idle wait under way. */
  private heard = 0;
  private waking = new AbortController();
  private unwatch: (() => void) | undefined;

  constructor(private readonly o: SchedulerOptions) {}

  start(): void {
    this.unwatch = this.o.signals.watchLanes((s) => {
      if (s.kind !== "waiting" || s.lane !== this.o.lane) return;
      this.heard++;
      this.waking.abort();
    });
    this.done = this.run();
  }

  async stop(): Promise<void> {
    this.stopping.abort();
    this.unwatch?.();
    await this.done;
  }

  /** Waits up to ms for a signal heard after `seen` signals (at once if one already was). */
  private async idle(ms: number, seen: number): Promise<void> {
    if (this.heard !== seen) return;
    this.waking = new AbortController();
    await this.o.time.sleep(ms, AbortSignal.any([this.waking.signal, this.stopping.signal]));
  }

  private async run(): Promise<void> {
    const { mail, leases, lane, time, log, ratePerSecond } = this.o;
    const stopped = this.stopping.signal;
    const { leadMs: lead, refillMs: refill, startMs } = LANE_LEAD[lane];
    const failing = new FailureEpisode(log, "lane release", { lane }, () => time.nowMs());
    let holding = false;
    let heldAt = Number.NEGATIVE_INFINITY;
    /** The slot the lane's next message was to get, while it had a backlog. */
    let expected: number | null = null;
    /** The last slot this scheduler stamped. */
    let lastSlot: number | null = null;
    while (!stopped.aborted) {
      const seen = this.heard;
      try {
        const now = time.nowMs();
        if (now - heldAt >= HOLD_RENEW_MS || now < heldAt) {
          holding = await leases.holdLease(`scheduler:${lane}`, this.o.owner, HOLD_TTL_MS);
          heldAt = now;
        }
        if (!holding) {
          // Another daemon runs this lane: look again when its lease may have lapsed, or on a signal.
          expected = null;
          await this.idle(HOLD_TTL_MS, seen);
          heldAt = Number.NEGATIVE_INFINITY;
          continue;
        }
        const batch = await mail.release(lane, now, { ratePerSecond, untilMs: now + lead, max: RELEASE_BATCH });
        failing.succeeded();
        const first = batch.released[0];
        if (first && expected !== null && first.slotMs > expected)
          this.o.onMissed(lane, Math.floor(((first.slotMs - expected) * ratePerSecond) / 1_000));
        expected = batch.nextSlotMs;
        lastSlot = batch.released.at(-1)?.slotMs ?? lastSlot;
        for (const r of batch.released) this.o.onRelease({ ...r, lane, releasedAtMs: now });
        if (batch.nextSlotMs === null) {
          await this.idle(IDLE_LOOK_MS, seen);
          // A message came (or the look is due): a run still on (its next slot ahead) goes on at once;
          // a run that is over starts again after startMs.
          const runGoesOn = lastSlot !== null && lastSlot + Math.ceil(1_000 / ratePerSecond) >= time.nowMs();
          if (startMs > 0 && !runGoesOn) await time.sleep(startMs, stopped);
          heldAt = Number.NEGATIVE_INFINITY; // the lease lapsed meanwhile: take it again
          continue;
        }
        // Until the next slot is a refill inside the lead (renewing the lease in time).
        const wait = delayUntil(batch.nextSlotMs - lead + refill, time.nowMs());
        if (wait > 0) await time.sleep(Math.min(wait, HOLD_RENEW_MS), stopped);
      } catch (err) {
        expected = null;
        holding = false; // a store that fails loses the lease until it answers again
        heldAt = Number.NEGATIVE_INFINITY;
        failing.failed(err as Error);
        await time.sleep(RETRY_MS, stopped);
      }
    }
  }
}
