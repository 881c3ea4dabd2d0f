import type { SingletonLeases } from "../hotstore/hotstore";
import { FailureEpisode } from "../log/episodes";
import type { Logger } from "../log/log";

// A daemon's background loop that one daemon at a time runs (campaign fan-out, workflow runs):
// every tickMs, a round if this daemon holds the lease in the hot store; never two rounds at
// once; failures logged as one episode, not a line per tick. A loop is a subclass: its round.
// A round that finds nothing to do doubles the wait before the next, up to IDLE_TICK_MAX_MS,
// so an idle daemon stays quiet; a round with work brings the tick back.

/** How long a holder keeps a lease without renewing it (a dead daemon's lease passes on after this). */
const LEASE_TTL_MS = 5_000;
/** A held lease is renewed this often, not every tick: an idle daemon stays quiet on the store. */
const LEASE_RENEW_MS = 1_500;
/** The longest wait between rounds that found nothing to do. */
const IDLE_TICK_MAX_MS = 4_000;

/** What every leased loop of a daemon is given. */
export interface LoopParts {
  hot: SingletonLeases;
  /** This daemon's name for the leases. */
  owner: string;
  log: Logger;
}

/** What one loop is: its lease's name, its tick, and what it does (for its log lines). */
export interface LoopSpec {
  lease: string;
  tickMs: number;
  what: string;
}

export abstract class LeasedLoop {
  private timer: ReturnType<typeof setTimeout> | undefined;
  private running: Promise<void> | undefined;
  private readonly failing: FailureEpisode;
  /** When this daemon last took or renewed the lease (monotonic ms); -Infinity while it does not hold it. */
  private heldAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly parts: LoopParts,
    private readonly spec: LoopSpec,
  ) {
    this.failing = new FailureEpisode(parts.log, spec.what);
    this.waitMs = spec.tickMs;
  }

  private stopped = false;
  /** The wait before the next round: tickMs, or longer while rounds find nothing. */
  private waitMs: number;

  /** One round, run while this daemon holds the lease; true when it found something to do. */
  protected abstract round(): Promise<boolean>;

  start(): void {
    this.waitMs = this.spec.tickMs;
    this.schedule();
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(async () => {
      await this.tick();
      this.schedule();
    }, this.waitMs);
  }

  /** Stops ticking and waits for the round under way. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  tick(): Promise<void> {
    this.running ??= this.leased()
      .then(
        () => this.failing.succeeded(),
        (err: Error) => {
          this.heldAt = Number.NEGATIVE_INFINITY;
          this.failing.failed(err);
        },
      )
      .finally(() => {
        this.running = undefined;
      });
    return this.running;
  }

  private async leased(): Promise<void> {
    const now = performance.now();
    if (now - this.heldAt >= LEASE_RENEW_MS) {
      const held = await this.parts.hot.holdLease(this.spec.lease, this.parts.owner, LEASE_TTL_MS);
      this.heldAt = held ? now : Number.NEGATIVE_INFINITY;
      if (!held) {
        this.waitMs = this.spec.tickMs;
        return;
      }
    }
    const busy = await this.round();
    this.waitMs = busy ? this.spec.tickMs : Math.min(IDLE_TICK_MAX_MS, this.waitMs * 2);
  }
}
