import type { Clock } from "../clock/clock";
import type { Lane } from "../gen/mailcore/limiter/v1/mail_pb";
import { FailureEpisode } from "../log/episodes";
import type { Logger } from "../log/log";
import type { LaneSignals, MailStore, Released, SingletonLeases } from "../hotstore/hotstore";

export interface ReleaseRecord extends Released {
  lane: Lane;
  /** When the slot was due, and when the release happened. */
  slotAtMs: number;
  releasedAtMs: number;
}

export interface SchedulerOptions {
  store: Pick<MailStore, "release"> & SingletonLeases & LaneSignals;
  lane: Lane;
  ratePerSecond: number;
  /** This daemon's name; with Redis, one daemon at a time runs a lane's scheduler. */
  owner: string;
  clock: Clock;
  onRelease(r: ReleaseRecord): void;
  log: Logger;
}

const HOLD_TTL_MS = 2_000;
const HOLD_RENEW_MS = 500;
/** How long an empty lane waits for a signal before it looks again anyway (a signal can be lost). */
const IDLE_LOOK_MS = 30_000;

/**
 * Paces one lane at `rate` releases per second: slot k is due at t0 + k * (1000 / rate),
 * on absolute deadlines, so timer delays never accumulate into drift. Each slot releases the
 * next message of the lane, round-robin over organizations (the store decides which).
 *
 * When the process stalls (a busy event loop, a slow store call), the slots it missed are
 * released late rather than lost, but never as a burst: a release comes at least half a slot
 * after the previous one, and never more than `rate` in any 1000 ms. A stall longer than a
 * second gives up the slots it missed. So a backlogged lane releases `rate` per second, and
 * no second ever holds more.
 *
 * An empty lane does not poll: it waits for the store's signal that the lane has a message
 * waiting (from any daemon), and the pacing starts again at that moment, a slot after the last
 * release at the earliest. Another daemon's lane is looked at again when its lease may have
 * lapsed, or on a signal.
 */
export class LaneScheduler {
  private stopped = false;
  private done: Promise<void> | undefined;
  /** Signals heard for this lane, and what ends the idle wait under way. */
  private heard = 0;
  private wake: (() => void) | undefined;
  private unwatch: (() => void) | undefined;

  constructor(private readonly o: SchedulerOptions) {}

  start(): void {
    this.unwatch = this.o.store.watchLanes((s) => {
      if (s.kind !== "waiting" || s.lane !== this.o.lane) return;
      this.heard++;
      this.wake?.();
    });
    this.done = this.run();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.unwatch?.();
    this.wake?.();
    await this.done;
  }

  /** Waits up to ms for a signal heard after `seen` signals (at once if one already was). */
  private async idle(ms: number, seen: number): Promise<void> {
    if (this.heard !== seen || this.stopped) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(() => this.wake?.(), ms);
      this.wake = () => {
        clearTimeout(timer);
        this.wake = undefined;
        resolve();
      };
    });
  }

  private async run(): Promise<void> {
    const { store, lane, clock, log, ratePerSecond: rate } = this.o;
    // Deadlines run on the monotonic clock: a step of the wall clock (NTP, a VM resume)
    // neither stalls a lane nor bursts it. The wall clock only stamps what is stored.
    const mono = () => performance.now();
    const slot = 1_000 / rate;
    let t0 = mono();
    let wall0 = clock.nowMs();
    /** The last `rate` release times, oldest first: no release within 1000 ms of the rate-th before it. */
    const recent: number[] = [];
    let k = 0;
    let holding = false;
    let heldAt = Number.NEGATIVE_INFINITY;
    const failing = new FailureEpisode(log, "lane release", { lane }, mono);
    while (!this.stopped) {
      const slotAt = t0 + k * slot;
      const windowFree = recent.length === rate ? recent[0]! + 1_000 : Number.NEGATIVE_INFINITY;
      const due = Math.max(slotAt, (recent.at(-1) ?? Number.NEGATIVE_INFINITY) + slot / 2, windowFree);
      const wait = due - mono();
      if (wait > 0) await Bun.sleep(wait);
      if (this.stopped) break;
      const now = mono();
      if (now - slotAt > 1_000) {
        k = Math.floor((now - t0) / slot); // more than a second behind: skip, never burst
        continue;
      }
      const seen = this.heard;
      try {
        if (now - heldAt >= HOLD_RENEW_MS) {
          holding = await store.holdLease(`scheduler:${lane}`, this.o.owner, HOLD_TTL_MS);
          heldAt = now;
        }
        const released = holding ? await store.release(lane, clock.nowMs()) : null;
        failing.succeeded();
        if (released) {
          recent.push(mono()); // released once the store has answered
          if (recent.length > rate) recent.shift();
          this.o.onRelease({ ...released, lane, slotAtMs: wall0 + (slotAt - t0), releasedAtMs: clock.nowMs() });
        } else {
          // Empty, or run by another daemon: wait for work (or for its lease to lapse), then pace
          // afresh from then, a slot after the last release at the earliest.
          await this.idle(holding ? IDLE_LOOK_MS : HOLD_TTL_MS, seen);
          heldAt = Number.NEGATIVE_INFINITY; // the lease lapsed meanwhile: take it again
          t0 = Math.max(mono(), (recent.at(-1) ?? Number.NEGATIVE_INFINITY) + slot);
          wall0 = clock.nowMs() + (t0 - mono());
          k = 0;
          continue;
        }
      } catch (err) {
        holding = false; // a store that fails loses the lease until it answers again
        heldAt = Number.NEGATIVE_INFINITY; // and is asked for it again at the next slot
        failing.failed(err as Error);
      }
      k++;
    }
  }
}
