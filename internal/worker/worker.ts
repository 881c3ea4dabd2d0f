import type { MessageInitShape } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import {
  type AckRequestSchema,
  DeliveryOutcome,
  type DeliveryService,
  type Lane,
  type LeaseResponse,
  RetrySchedule,
} from "../gen/mailcore/limiter/v1/mail_pb";
import { REQUEST_ID_HEADER } from "../wire/metadata";
import { type DiskSpace, isDiskFull } from "../diskspace/diskspace";
import { FailureEpisode } from "../log/episodes";
import type { Logger } from "../log/log";
import { isPermanent } from "./retry_policy";
import type { WorkerMetrics } from "../metrics/metrics";
import type { AckJournal, PendingAck } from "./acks";
import { LanePacer } from "./pacer";
import { type DeliveryResult, simulateFixture, type Transport } from "./transport";

const OUTCOMES: Record<number, string> = {
  [DeliveryOutcome.DELIVERED]: "delivered",
  [DeliveryOutcome.BOUNCED]: "bounced",
  [DeliveryOutcome.DEFERRED]: "deferred",
  [DeliveryOutcome.REJECTED]: "rejected",
};
/** The diagnostic an ack's classification carries at most (the contract's 1,000 characters). */
const MAX_DIAGNOSTIC = 1_000;
const ACK_TIMEOUT_MS = 2_000;
// Short: when the daemon is back, the ack must beat the recovery loop to a lease that expired meanwhile.
const ACK_RETRY_MAX_MS = 1_000;

/** The daemon's calls a worker makes for the mail: the lease stream and the acks. */
export type DeliveryCalls = Pick<Client<typeof DeliveryService>, "lease" | "ack">;

export interface WorkerOptions {
  workerId: string;
  /** Deliveries in flight; the daemon leases more, the messages its lanes released ahead of their slots. */
  maxInFlight: number;
  log: Logger;
  acks: AckJournal;
  /** Where a journal write refused for want of space is noted. */
  disk?: DiskSpace;
  metrics?: WorkerMetrics;
}

/**
 * Leases released messages over the daemon's server stream, composes each, delivers it at its
 * lane's turn (its slot, within the lane's rate: LanePacer), and acks it. The
 * ack is written to the journal before it is sent and retried until the daemon accepts it, so
 * an outage of the daemon or its store (or a restart of this worker) does not turn into a
 * second delivery. A worker that dies holding leases it has not delivered loses nothing: the
 * daemon releases them again after the visibility timeout (at-least-once).
 */
export class Worker {
  private readonly abort = new AbortController();
  private readonly inFlight = new Set<Promise<void>>();
  /** Acks not yet accepted, by lease id. */
  private readonly unacked = new Set<string>();
  private stopping = false;
  /** Resolved when stop() gives up on the deliveries still under way. */
  private readonly cutOff = Promise.withResolvers<DeliveryResult>();
  private readonly ackFailing: FailureEpisode;
  /** Each lane's deliveries start at their slots, within the lane's rate. */
  private readonly pacers = new Map<Lane, LanePacer>();

  constructor(
    private readonly delivery: DeliveryCalls,
    private readonly transport: Transport,
    private readonly o: WorkerOptions,
  ) {
    this.ackFailing = new FailureEpisode(o.log, "ack");
  }

  async run(): Promise<void> {
    for (const ack of this.o.acks.list()) this.track(this.settle(ack));
    let backoff = 250;
    while (!this.abort.signal.aborted) {
      // Bounded: while as many acks as deliveries in flight are owed, lease nothing more.
      while (this.unacked.size >= this.o.maxInFlight && !this.abort.signal.aborted) await Bun.sleep(100);
      try {
        const stream = this.delivery.lease(
          { workerId: this.o.workerId, maxInFlight: this.o.maxInFlight },
          { signal: this.abort.signal },
        );
        for await (const m of stream) {
          backoff = 250;
          this.track(this.handle(m));
        }
      } catch (err) {
        if (this.abort.signal.aborted) break;
        this.o.log.warn("lease stream failed; reconnecting", { error: (err as Error).message, inMs: backoff });
      }
      await Bun.sleep(backoff);
      backoff = Math.min(backoff * 2, 5_000);
    }
  }

  /**
   * Stops leasing, gives the deliveries under way graceMs to finish, then cuts the transport
   * off (a delivery cut off is deferred: the message is retried, not lost). Acks the daemon has
   * not accepted by then stay in the journal for the next start.
   */
  async stop(graceMs = 6_000): Promise<void> {
    this.abort.abort();
    const all = () => Promise.all(this.inFlight);
    await Promise.race([all(), Bun.sleep(graceMs)]);
    this.stopping = true;
    for (const pacer of this.pacers.values()) pacer.release();
    this.cutOff.resolve({
      outcome: DeliveryOutcome.DEFERRED,
      detail: "the worker stopped before the delivery finished; it will be retried",
    });
    this.transport.close();
    await Promise.race([all(), Bun.sleep(ACK_TIMEOUT_MS + 500)]);
  }

  private pacerOf(lane: Lane): LanePacer {
    let pacer = this.pacers.get(lane);
    if (!pacer) {
      pacer = new LanePacer();
      this.pacers.set(lane, pacer);
    }
    return pacer;
  }

  private track(job: Promise<void>): void {
    const tracked = job.finally(() => this.inFlight.delete(tracked));
    this.inFlight.add(tracked);
  }

  private async handle(m: LeaseResponse): Promise<void> {
    let result: DeliveryResult;
    const simulated = simulateFixture(m);
    try {
      const prepared = simulated ? undefined : await this.transport.prepare(m);
      // The delivery starts inside its turn (the file sink writes there and then).
      result = await this.pacerOf(m.lane).turn(Number(m.notBeforeMs), m.laneRate, () =>
        this.stopping
          ? this.cutOff.promise
          : simulated
            ? Promise.resolve(simulated)
            : Promise.race([this.transport.send(prepared!), this.cutOff.promise]),
      );
    } catch (err) {
      result = { outcome: DeliveryOutcome.DEFERRED, detail: `worker error: ${(err as Error).message}` };
    }
    const outcome = OUTCOMES[result.outcome] ?? "unknown";
    const requestId = m.email?.requestId ?? "";
    this.o.metrics?.deliveries.inc({ outcome });
    this.o.log.info(outcome, {
      requestId,
      message: m.messageId,
      org: m.orgId,
      attempt: m.attempt,
      detail: result.detail,
    });
    const ack: PendingAck = {
      leaseId: m.leaseId,
      messageId: m.messageId,
      orgId: m.orgId,
      outcome: result.outcome,
      detail: result.detail,
      requestId,
      retryAfterMs: result.retryAfterMs,
      // A fixture's simulated deferral keeps the short schedule, whatever the transport.
      retryInHours: !simulated && this.transport.retryInHours,
      bounce: result.bounce && {
        type: result.bounce.type,
        status: result.bounce.status ?? "",
        diagnostic: result.detail.slice(0, MAX_DIAGNOSTIC),
      },
      attempts: result.attempts,
    };
    await this.settle(ack, this.journal(ack));
  }

  /**
   * Writes the ack to the journal; false when it cannot be (a full disk): it is then held in
   * memory and sent all the same, and written when a retry finds space.
   */
  private journal(ack: PendingAck): boolean {
    try {
      this.o.acks.add(ack);
      return true;
    } catch (err) {
      if (isDiskFull(err)) this.o.disk?.noted("acks", err);
      else
        this.o.log.error("ack not journaled; held in memory", {
          message: ack.messageId,
          error: (err as Error).message,
        });
      return false;
    }
  }

  /**
   * Sends an ack until the daemon accepts it (or refuses it for good), or the worker stops.
   * journaled: whether the journal holds it already (an ack of an earlier run's does).
   */
  private async settle(ack: PendingAck, journaled = true): Promise<void> {
    this.unacked.add(ack.leaseId);
    this.o.metrics?.pendingAcks.set(this.unacked.size);
    let waitMs = 200;
    try {
      for (;;) {
        try {
          await this.delivery.ack(ackRequest(ack), {
            timeoutMs: ACK_TIMEOUT_MS,
            headers: { [REQUEST_ID_HEADER]: ack.requestId },
          });
          this.ackFailing.succeeded();
          this.o.acks.remove(ack.leaseId);
          return;
        } catch (err) {
          if (isPermanent(err)) {
            this.o.log.error("ack refused; dropped", { message: ack.messageId, error: err.message });
            this.o.acks.remove(ack.leaseId);
            return;
          }
          this.ackFailing.failed(err as Error);
          // Tried once more after the stop: kept in the journal (one the disk had no room for is
          // not: its lease expires and the message is delivered again, not lost).
          if (this.stopping && waitMs > 200) return;
          await Bun.sleep(waitMs);
          journaled ||= this.journal(ack);
          waitMs = Math.min(waitMs * 2, ACK_RETRY_MAX_MS);
        }
      }
    } finally {
      this.unacked.delete(ack.leaseId);
      this.o.metrics?.pendingAcks.set(this.unacked.size);
    }
  }
}

/** An ack as the daemon takes it. */
export function ackRequest(ack: PendingAck): MessageInitShape<typeof AckRequestSchema> {
  const { leaseId, messageId, orgId, outcome, detail } = ack;
  return {
    leaseId,
    messageId,
    orgId,
    outcome,
    detail,
    retryAfterMs: BigInt(Math.max(0, Math.round(ack.retryAfterMs ?? 0))),
    retrySchedule: ack.retryInHours ? RetrySchedule.HOURS : RetrySchedule.UNSPECIFIED,
    bounce: ack.bounce,
    attempts: (ack.attempts ?? []).map((a) => ({ ...a, atMs: BigInt(a.atMs) })),
  };
}
