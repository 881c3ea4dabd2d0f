import type { SingletonLeases } from "../hotstore/hotstore";
import { FailureEpisode } from "../log/episodes";
import type { Logger } from "../log/log";

// A daemon's background loop that one daemon at a time runs (campaign fan-out, workflow runs,
// the reconciliation): a round every tickMs while this daemon holds the lease in the hot store;
// never two rounds at once; failures logged as one episode, not a line per tick. A loop that
// finds nothing to do waits longer each time (up to idleMaxMs), so an idle daemon stays quiet.
// A loop is a subclass: its round.

/** How long a holder keeps a lease without renewing it (a dead daemon's lease passes on after this). */
const LEASE_TTL_MS = 5_000;
/** A lease held is renewed once this much of it has gone by, not on every tick. */
const LEASE_RENEW_MS = LEASE_TTL_MS / 2;

/** What every leased loop of a daemon is given. */
export interface LoopParts {
  leases: SingletonLeases;
  /** This daemon's name for the leases. */
  owner: string;
  log: Logger;
}

/** What one loop is: its lease's name, its tick, and what it does (for its log lines). */
export interface LoopSpec {
  lease: string;
  tickMs: number;
  /** When set, each round that finds nothing to do doubles the wait for the next, up to this. */
  idleMaxMs?: number;
  what: string;
}

export abstract class LeasedLoop {
  private timer: ReturnType<typeof setTimeout> | undefined;
  private stopped = false;
  private running: Promise<void> | undefined;
  private readonly failing: FailureEpisode;
  private waitMs: number;
  /** When the timer set fires (monotonic ms), and whether wake() came since the round began. */
  private nextAt = Number.POSITIVE_INFINITY;
  private woken = false;
  /** When the lease was last taken or renewed (monotonic ms). */
  private heldAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly parts: LoopParts,
    private readonly spec: LoopSpec,
  ) {
    this.failing = new FailureEpisode(parts.log, spec.what);
    this.waitMs = spec.tickMs;
  }

  /** One round, run while this daemon holds the lease; says whether it found anything to do. */
  protected abstract round(): Promise<boolean>;

  /** The lease was taken, at first or after this daemon saw it held by another (or let it go on a failure): what it remembers of an earlier hold is stale. */
  protected leaseTaken(): void {}

  start(): void {
    this.stopped = false;
    this.next();
  }

  /** Stops ticking and waits for the round under way. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
  }

  tick(): Promise<void> {
    this.woken = false;
    this.running ??= this.leased()
      .then(
        (busy) => {
          this.failing.succeeded();
          const idleMax = this.spec.idleMaxMs ?? this.spec.tickMs;
          this.waitMs = busy || this.woken ? this.spec.tickMs : Math.min(this.waitMs * 2, idleMax);
        },
        (err: Error) => {
          this.heldAt = Number.NEGATIVE_INFINITY;
          this.waitMs = this.spec.tickMs;
          this.failing.failed(err);
        },
      )
      .finally(() => {
        this.running = undefined;
      });
    return this.running;
  }

  /** There may be work: the loop's rest ends, and it ticks at its pace again. */
  wake(): void {
    this.waitMs = this.spec.tickMs;
    this.woken = true;
    if (!this.stopped && this.timer !== undefined && this.nextAt > performance.now() + this.spec.tickMs) this.next();
  }

  private next(): void {
    clearTimeout(this.timer);
    this.nextAt = performance.now() + this.waitMs;
    this.timer = setTimeout(async () => {
      this.timer = undefined;
      await this.tick();
      if (!this.stopped && this.timer === undefined) this.next();
    }, this.waitMs);
  }

  private async leased(): Promise<boolean> {
    const now = performance.now();
    if (now - this.heldAt >= LEASE_RENEW_MS) {
      // Taken again after another daemon held it (or a failure let it go): not a renewal.
      const taking = this.heldAt === Number.NEGATIVE_INFINITY;
      if (!(await this.parts.leases.holdLease(this.spec.lease, this.parts.owner, LEASE_TTL_MS))) {
        this.heldAt = Number.NEGATIVE_INFINITY;
        return false;
      }
      this.heldAt = now;
      if (taking) this.leaseTaken();
    }
    return this.round();
  }
}
