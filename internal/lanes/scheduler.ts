import type { Lane } from "../gen/mailcore/limiter/v1/mail_pb";
import { FailureEpisode } from "../log/episodes";
import type { Logger } from "../log/log";
import type { MailStore, Released, SingletonLeases } from "../hotstore/hotstore";

export interface ReleaseRecord extends Released {
  lane: Lane;
  /** When the store released the message (wall ms): up to LEAD_MS before its slot (slotMs). */
  releasedAtMs: number;
}

/** The scheduler's time: a monotonic clock that paces, the wall clock that stamps, and a sleep. */
export interface SchedulerTime {
  monoMs(): number;
  wallMs(): number;
  /** Resolves after ms, or at once when signal aborts. */
  sleep(ms: number, signal: AbortSignal): Promise<void>;
}

/** Real time: performance.now() paces, Date.now() stamps. */
export const realTime: SchedulerTime = {
  monoMs: () => performance.now(),
  wallMs: () => Date.now(),
  sleep: (ms, signal) =>
    new Promise((done) => {
      const finish = () => {
        clearTimeout(timer);
        signal.removeEventListener("abort", finish);
        done();
      };
      const timer = setTimeout(finish, Math.max(0, ms));
      signal.addEventListener("abort", finish);
    }),
};

export interface SchedulerOptions {
  store: Pick<MailStore, "release"> & SingletonLeases;
  lane: Lane;
  ratePerSecond: number;
  /** This daemon's name; with Redis, one daemon at a time runs a lane's scheduler. */
  owner: string;
  time: SchedulerTime;
  /** How far ahead of its slot a message is released (LEAD_MS, TRANSACTIONAL_LEAD_MS). */
  leadMs: number;
  onRelease(r: ReleaseRecord): void;
  log: Logger;
}

/** How far ahead of its slot a bulk message is released: a stall of the daemon shorter than this moves no delivery. */
export const LEAD_MS = 1_000;
/**
 * The transactional lane's lead: short, since a message of another organization waits behind
 * the slots already stamped (round-robin works on what is not yet released).
 */
export const TRANSACTIONAL_LEAD_MS = 50;
/** With nothing signalled, an idle lane is looked at this often all the same (a lost signal costs at most this). */
export const IDLE_RECHECK_MS = 10_000;
/** How far the wall clock may drift from the monotonic one between two slots before it counts as a step. */
const WALL_TOLERANCE_MS = 50;
const HOLD_TTL_MS = 2_000;
const HOLD_RENEW_MS = 500;

/**
 * Paces one lane at `rate` messages per second by stamping each release with a slot: slot k+1
 * is slot k plus the spacing (1000 / rate, rounded up to whole ms), and the worker delivers a
 * message no earlier than its slot. Messages are released up to the lead ahead of their slots,
 * so the daemon's event loop may stall (SQLite work, a slow store call) for up to the lead
 * without moving a delivery or losing a slot. The store keeps the lane's last slot and spaces
 * every release from it, so slots stay spaced whichever daemon releases.
 *
 * An empty lane waits for a signal (an enqueue or a put-back, from any daemon on the store), or
 * IDLE_RECHECK_MS: an idle lane costs no store calls. The first message after the quiet gets
 * the slot "now" and leaves at once.
 */
export class LaneScheduler {
  private readonly stopping = new AbortController();
  /** Aborted by wake() to end an idle wait; replaced for the next one. */
  private waking = new AbortController();
  /** A wake came since the last look at the store: look again before waiting. */
  private woken = true;
  private done: Promise<void> | undefined;

  constructor(private readonly o: SchedulerOptions) {}

  start(): void {
    this.done = this.run();
  }

  /** Something may be waiting in the lane: look now if idle. */
  wake(): void {
    this.woken = true;
    this.waking.abort();
  }

  async stop(): Promise<void> {
    this.stopping.abort();
    this.waking.abort();
    await this.done;
  }

  private async idle(ms: number): Promise<void> {
    if (this.woken) return;
    this.waking = new AbortController();
    await this.o.time.sleep(ms, AbortSignal.any([this.waking.signal, this.stopping.signal]));
  }

  private async run(): Promise<void> {
    const { store, lane, time, log, ratePerSecond: rate } = this.o;
    const spacing = Math.ceil(1_000 / rate);
    const stopped = this.stopping.signal;
    /** The earliest the next slot may be (monotonic ms): the last slot plus the spacing. */
    let next = Number.NEGATIVE_INFINITY;
    /** The same on the wall clock, as the store stamped it. */
    let nextWall = Number.NEGATIVE_INFINITY;
    let holding = false;
    let heldAt = Number.NEGATIVE_INFINITY;
    const failing = new FailureEpisode(log, "lane release", { lane }, () => time.monoMs());
    while (!stopped.aborted) {
      const now = time.monoMs();
      const slot = Math.max(next, now);
      if (slot - now > this.o.leadMs) {
        await time.sleep(slot - this.o.leadMs - now, stopped);
        continue;
      }
      try {
        if (now - heldAt >= HOLD_RENEW_MS) {
          holding = await store.holdLease(`scheduler:${lane}`, this.o.owner, HOLD_TTL_MS);
          heldAt = now;
        }
        if (!holding) {
          // Another daemon runs this lane; take over if its lease lapses.
          await time.sleep(HOLD_TTL_MS, stopped);
          continue;
        }
        this.woken = false;
        // Slots are stamped on the wall clock (workers compare them with theirs). On schedule,
        // the slot asked for is the last one plus the spacing, to the ms (converting from the
        // monotonic clock would add a ms now and then: 39 a second); behind, or when the wall
        // clock stepped, it is now plus the wait on the monotonic clock.
        const wallNow = time.wallMs();
        const expected = wallNow + (slot - now);
        const atMs =
          slot === next && Math.abs(nextWall - expected) <= WALL_TOLERANCE_MS
            ? Math.max(nextWall, wallNow) // never a slot already past
            : Math.ceil(expected);
        const released = await store.release(lane, wallNow, { atMs, spacingMs: spacing });
        failing.succeeded();
        if (!released) {
          await this.idle(IDLE_RECHECK_MS);
          continue;
        }
        next = now + (released.slotMs - wallNow) + spacing;
        nextWall = released.slotMs + spacing;
        this.o.onRelease({ ...released, lane, releasedAtMs: wallNow });
      } catch (err) {
        holding = false; // a store that fails loses the lease until it answers again
        heldAt = Number.NEGATIVE_INFINITY;
        failing.failed(err as Error);
        await time.sleep(HOLD_RENEW_MS, stopped);
      }
    }
  }
}
