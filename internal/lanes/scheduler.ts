import type { Clock } from "../clock/clock";
import type { Lane } from "../gen/mailcore/limiter/v1/mail_pb";
import type { Logger } from "../log/log";
import type { MailStore, Released } from "../store/mail";

export interface ReleaseRecord extends Released {
  lane: Lane;
  /** When the slot was due, and when the release happened. */
  slotAtMs: number;
  releasedAtMs: number;
}

export interface SchedulerOptions {
  store: MailStore;
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

/**
 * Paces one lane: one release per slot of 1000/rate ms, on absolute deadlines
 * t0 + k * slot, so timer delays never accumulate into drift. A slot that is missed
 * entirely (the process stalled) is skipped, never made up in a burst: at most one late
 * release, then the grid resumes. Each slot releases the next message of the lane,
 * round-robin over organizations (the store decides which).
 */
export class LaneScheduler {
  private stopped = false;
  private done: Promise<void> | undefined;

  constructor(private readonly o: SchedulerOptions) {}

  start(): void {
    this.done = this.run();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.done;
  }

  private async run(): Promise<void> {
    const { store, lane, clock, log } = this.o;
    const slot = 1_000 / this.o.ratePerSecond;
    const t0 = clock.nowMs();
    let k = 0;
    let holding = false;
    let heldAt = Number.NEGATIVE_INFINITY;
    while (!this.stopped) {
      const deadline = t0 + k * slot;
      const wait = deadline - clock.nowMs();
      if (wait > 0) await Bun.sleep(wait);
      if (this.stopped) break;
      const now = clock.nowMs();
      try {
        if (now - heldAt >= HOLD_RENEW_MS) {
          holding = await store.holdScheduler(lane, this.o.owner, HOLD_TTL_MS);
          heldAt = now;
        }
        if (holding) {
          const released = await store.release(lane, now);
          if (released) this.o.onRelease({ ...released, lane, slotAtMs: deadline, releasedAtMs: clock.nowMs() });
        }
      } catch (err) {
        holding = false; // a store that fails loses the lease until it answers again
        log.warn("lane release failed", { lane, error: (err as Error).message });
      }
      k = Math.max(k + 1, Math.floor((clock.nowMs() - t0) / slot));
    }
  }
}
