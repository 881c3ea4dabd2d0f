import type { Clock } from "../clock/clock";
import type { OutboxStore, SingletonLeases } from "../hotstore/hotstore";
import type { Logger } from "../log/log";
import type { LimiterMetrics } from "../metrics/metrics";
import { laneName } from "../mail/policy";
import type { NewMessageEvent } from "../records/history";
import type { Records } from "../records/records";
import type { WebhookEventInput } from "../records/webhooks";
import { EMAIL_EVENT_OF_STATUS } from "../webhooks/events";

/** How often the message history is written, and how many messages per batch. */
const FLUSH_EVERY_MS = 200;
/** After a flush that found nothing, the next waits twice as long, up to this: an idle daemon stays quiet on the store. */
const FLUSH_IDLE_MAX_MS = 4_000;
const FLUSH_BATCH = 500;
/** How often expired history is deleted, and how many messages per delete. */
const RETENTION_EVERY_MS = 60_000;
const RETENTION_BATCH = 1_000;
/** A token's last use is kept to this resolution (and written at most this often). */
export const TOKEN_USE_RESOLUTION_MS = 60_000;
const WRITER_LEASE_TTL_MS = 5_000;

export interface RecordsWriterOptions {
  hot: OutboxStore & SingletonLeases;
  records: Records;
  clock: Clock;
  /** This daemon's name for the writer's lease (one daemon writes the history at a time). */
  owner: string;
  retentionMs: number;
  log: Logger;
  /** Counts the failed rounds by job when set. */
  metrics?: Pick<LimiterMetrics, "recordsWriterFailures">;
}

/**
 * What the daemon writes to the records in the background: the history of every message (from
 * the hot store's outbox; a message leaves the hot store once its final state is written) and
 * its events as events of the recipient's subscriber,
 * the deletion of history past its retention, and the coarse last use of API tokens. When the
 * records cannot be reached, it says so once, keeps everything in the hot store, and catches up
 * when they are back.
 */
export class RecordsWriter {
  private readonly usedTokens = new Set<string>();
  private readonly timers: ReturnType<typeof setInterval>[] = [];
  private flushing: Promise<void> | undefined;
  private failing: string | undefined;
  /** How long flushes wait while they find nothing, and until when (monotonic ms). */
  private idleMs = 0;
  private quietUntil = 0;

  constructor(private readonly o: RecordsWriterOptions) {}

  start(): void {
    this.timers.push(
      setInterval(() => {
        if (performance.now() >= this.quietUntil) void this.flush();
      }, FLUSH_EVERY_MS),
      setInterval(() => void this.background("retention", () => this.expire()), RETENTION_EVERY_MS),
      setInterval(() => void this.background("token use", () => this.writeTokenUse()), TOKEN_USE_RESOLUTION_MS),
    );
  }

  /** Notes that a token was used (written to the records later, coarsely). */
  tokenUsed(hash: string): void {
    this.usedTokens.add(hash);
  }

  /** Writes what changed to the records, until nothing is left; one flush at a time. */
  flush(): Promise<void> {
    this.flushing ??= this.background("message history", async () => {
      if (!(await this.o.hot.holdLease("history", this.o.owner, WRITER_LEASE_TTL_MS))) return;
      for (let round = 0; ; round++) {
        const changed = await this.o.hot.changedMessages(FLUSH_BATCH);
        if (changed.length === 0) {
          if (round === 0) {
            this.idleMs = Math.min(FLUSH_IDLE_MAX_MS, Math.max(FLUSH_EVERY_MS, this.idleMs * 2));
            this.quietUntil = performance.now() + this.idleMs;
          }
          return;
        }
        this.idleMs = 0;
        this.quietUntil = 0;
        await this.o.records.history.write(changed, (sql, fresh) =>
          this.o.records.webhooks.enqueueIn(sql, emailWebhookEvents(fresh), this.o.clock.nowMs()),
        );
        await this.o.records.audience.recordMessageEvents(changed);
        await this.o.records.campaigns.recordOutcomes(changed);
        await this.o.hot.settle(changed.map((m) => ({ orgId: m.orgId, id: m.id, version: m.version })));
        if (changed.length < FLUSH_BATCH) return;
      }
    }).finally(() => {
      this.flushing = undefined;
    });
    return this.flushing;
  }

  async stop(): Promise<void> {
    for (const t of this.timers) clearInterval(t);
    await this.flush();
    await this.background("token use", () => this.writeTokenUse());
  }

  private async expire(): Promise<void> {
    const before = this.o.clock.nowMs() - this.o.retentionMs;
    while ((await this.o.records.history.deleteFinishedBefore(before, RETENTION_BATCH)) === RETENTION_BATCH) {}
    while ((await this.o.records.webhooks.deleteFinishedBefore(before, RETENTION_BATCH)) === RETENTION_BATCH) {}
  }

  private async writeTokenUse(): Promise<void> {
    const hashes = [...this.usedTokens];
    this.usedTokens.clear();
    await this.o.records.directory.touchTokens(hashes, this.o.clock.nowMs(), TOKEN_USE_RESOLUTION_MS);
  }

  /** Runs a background job; a failure is logged when it starts and when it ends, not every round. */
  private async background(job: string, run: () => Promise<void>): Promise<void> {
    try {
      await run();
      if (this.failing === job) {
        this.o.log.info("records writer recovered", { job });
        this.failing = undefined;
      }
    } catch (err) {
      this.o.metrics?.recordsWriterFailures.inc({ job });
      if (this.failing === undefined)
        this.o.log.warn("records writer failing; the hot store keeps everything until it recovers", {
          job,
          error: (err as Error).message,
        });
      this.failing ??= job;
    }
  }
}

/**
 * The email.* webhook events of the message events a flush wrote first: written in the same
 * transaction as the history, so an event is announced once, and only once it is recorded.
 */
export function emailWebhookEvents(fresh: NewMessageEvent[]): WebhookEventInput[] {
  return fresh.flatMap(({ message: m, event: e, seq }) => {
    const type = EMAIL_EVENT_OF_STATUS[e.status];
    // A message is queued again on its release and on each retry; only its acceptance is news.
    if (!type || (type === "email.queued" && seq > 0)) return [];
    const data = {
      emailId: m.id,
      from: m.from,
      to: m.to,
      subject: m.subject,
      lane: laneName(m.lane),
      detail: e.detail,
    };
    return [{ orgId: m.orgId, type, atMs: e.atMs, data }];
  });
}
