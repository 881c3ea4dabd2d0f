import type { SingletonLeases } from "../hotstore/hotstore";
import { FailureEpisode } from "../log/episodes";
import type { Logger } from "../log/log";

// A daemon's background loop that one daemon at a time runs (campaign fan-out, workflow runs):
// every tickMs, a round if this daemon holds the lease in the hot store; never two rounds at
// once; failures logged as one episode, not a line per tick.

export interface LeasedLoopOptions {
  hot: SingletonLeases;
  /** The lease's name, and this daemon's name for it. */
  lease: string;
  owner: string;
  /** How long a holder keeps the lease without renewing it (a dead daemon's lease passes on after this). */
  leaseTtlMs: number;
  tickMs: number;
  /** What the loop does, for its log lines. */
  what: string;
  log: Logger;
  round: () => Promise<void>;
}

export class LeasedLoop {
  private timer: ReturnType<typeof setInterval> | undefined;
  private running: Promise<void> | undefined;
  private readonly failing: FailureEpisode;

  constructor(private readonly o: LeasedLoopOptions) {
    this.failing = new FailureEpisode(o.log, o.what);
  }

  start(): void {
    this.timer = setInterval(() => void this.tick(), this.o.tickMs);
  }

  /** Stops ticking and waits for the round under way. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.running;
  }

  tick(): Promise<void> {
    this.running ??= this.leased()
      .then(
        () => this.failing.succeeded(),
        (err: Error) => this.failing.failed(err),
      )
      .finally(() => {
        this.running = undefined;
      });
    return this.running;
  }

  private async leased(): Promise<void> {
    if (await this.o.hot.holdLease(this.o.lease, this.o.owner, this.o.leaseTtlMs)) await this.o.round();
  }
}
