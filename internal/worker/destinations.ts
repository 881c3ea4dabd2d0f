import type { Client } from "@connectrpc/connect";
import type { DestinationService } from "../gen/mailcore/limiter/v1/destinations_pb";
import type { DestinationState } from "../mx/destination";

/** How often a worker tells the daemon its destinations (the daemon forgets a worker after 30 s of silence). */
export const DESTINATION_REPORT_EVERY_MS = 5_000;

/**
 * Reports MX delivery's destinations to the daemon every few seconds, for `admin destinations`:
 * the busiest first. A report that fails is dropped; the next one says it all again.
 */
export class DestinationReporter {
  private timer: ReturnType<typeof setInterval> | undefined;

  constructor(
    private readonly client: Pick<Client<typeof DestinationService>, "reportDestinations">,
    private readonly workerId: string,
    private readonly states: () => DestinationState[],
  ) {}

  start(): void {
    this.timer = setInterval(() => void this.report(), DESTINATION_REPORT_EVERY_MS);
    this.timer.unref?.();
  }

  async report(): Promise<void> {
    const destinations = this.states()
      .sort((a, b) => b.queued + b.connections - (a.queued + a.connections) || (a.key < b.key ? -1 : 1))
      .map((s) => ({
        key: s.key,
        rule: s.rule,
        queued: s.queued,
        connections: s.connections,
        idle: s.idle,
        slowedUntilMs: BigInt(s.slowedUntilMs),
        suspendedUntilMs: BigInt(s.suspendedUntilMs),
        failingSinceMs: BigInt(s.failingSinceMs),
      }));
    await this.client
      .reportDestinations({ workerId: this.workerId, destinations }, { timeoutMs: 2_000 })
      .catch(() => {});
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
