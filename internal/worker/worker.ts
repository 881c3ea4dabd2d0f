import { DeliveryOutcome, type LeaseResponse } from "../gen/mailcore/limiter/v1/mail_pb";
import type { LimiterClients } from "../limiterclient/client";
import type { Logger } from "../log/log";
import { type DeliveryResult, simulateFixture, type Transport } from "./transport";

export interface WorkerCounters {
  leased: number;
  delivered: number;
  bounced: number;
  deferred: number;
  ackFailures: number;
}

const ACK_TRIES = 5;

/**
 * Leases released messages over the daemon's server stream, delivers each, and acks it.
 * A worker that dies holding leases loses nothing: the daemon releases them again after
 * the visibility timeout (at-least-once).
 */
export class Worker {
  readonly counters: WorkerCounters = { leased: 0, delivered: 0, bounced: 0, deferred: 0, ackFailures: 0 };
  private readonly abort = new AbortController();
  private readonly inFlight = new Set<Promise<void>>();

  constructor(
    private readonly clients: LimiterClients,
    private readonly transport: Transport,
    private readonly o: { workerId: string; maxInFlight: number; log: Logger },
  ) {}

  async run(): Promise<void> {
    let backoff = 250;
    while (!this.abort.signal.aborted) {
      try {
        const stream = this.clients.delivery.lease({ workerId: this.o.workerId, maxInFlight: this.o.maxInFlight }, { signal: this.abort.signal });
        for await (const m of stream) {
          backoff = 250;
          this.counters.leased++;
          const job = this.handle(m).finally(() => this.inFlight.delete(job));
          this.inFlight.add(job);
        }
      } catch (err) {
        if (this.abort.signal.aborted) break;
        this.o.log.warn("lease stream failed; reconnecting", { error: (err as Error).message, inMs: backoff });
      }
      await Bun.sleep(backoff);
      backoff = Math.min(backoff * 2, 5_000);
    }
  }

  /** Stops leasing and waits for the deliveries under way to be acked. */
  async stop(): Promise<void> {
    this.abort.abort();
    await Promise.all(this.inFlight);
    this.transport.close();
  }

  private async handle(m: LeaseResponse): Promise<void> {
    let result: DeliveryResult;
    try {
      result = simulateFixture(m) ?? (await this.transport.deliver(m));
    } catch (err) {
      result = { outcome: DeliveryOutcome.DEFERRED, detail: `worker error: ${(err as Error).message}` };
    }
    if (result.outcome === DeliveryOutcome.DELIVERED) this.counters.delivered++;
    else if (result.outcome === DeliveryOutcome.BOUNCED) this.counters.bounced++;
    else this.counters.deferred++;
    for (let attempt = 1; attempt <= ACK_TRIES; attempt++) {
      try {
        await this.clients.delivery.ack({ leaseId: m.leaseId, messageId: m.messageId, orgId: m.orgId, outcome: result.outcome, detail: result.detail }, { timeoutMs: 2_000 });
        return;
      } catch (err) {
        if (attempt === ACK_TRIES) {
          this.counters.ackFailures++;
          this.o.log.warn("ack failed; the lease will expire and the message be released again", { message: m.messageId, error: (err as Error).message });
          return;
        }
        await Bun.sleep(200 * attempt);
      }
    }
  }
}
