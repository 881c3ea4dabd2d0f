import { type Clock, delayUntil, timerDelay } from "../clock/clock";
import type { OutboxStore, SingletonLeases } from "../hotstore/hotstore";
import type { Logger } from "../log/log";
import type { LimiterMetrics } from "../metrics/metrics";
import { laneName } from "../mail/policy";
import type { NewMessageEvent } from "../records/history";
import type { AudienceRecords } from "../records/audience";
import type { CampaignRecords } from "../records/campaigns";
import type { DirectoryRecords } from "../records/directory";
import type { HistoryRecords } from "../records/history";
import type { SuppressionRecords } from "../records/suppressions";
import type { WebhookDeliveryRecords, WebhookEventInput } from "../records/webhook_deliveries";
import { MessageStatus } from "../gen/mailcore/limiter/v1/mail_pb";
import { bounceOfDetail } from "../mail/bounce_detail";
import type { MessageHistory } from "../model/history";
import { EMAIL_EVENT_OF_STATUS } from "../webhooks/events";

/**
 * How often the message history is written while messages change, how long the writer waits at
 * most while nothing changes (each empty look doubles the wait; a change in this daemon, or a
 * lane signal from any, ends it), and how many messages per batch.
 */
const FLUSH_EVERY_MS = 200;
const FLUSH_IDLE_MAX_MS = 2_000;
const FLUSH_BATCH = 500;
/** How often expired history is deleted, and how many messages per delete. */
const RETENTION_EVERY_MS = 60_000;
const RETENTION_BATCH = 1_000;
/** A token's last use is kept to this resolution (and written at most this often). */
export const TOKEN_USE_RESOLUTION_MS = 60_000;
const WRITER_LEASE_TTL_MS = 5_000;
/** The writer's lease is renewed once this much of it has gone by, not on every flush. */
const WRITER_LEASE_RENEW_MS = WRITER_LEASE_TTL_MS / 2;

/** What the writer writes of the records. */
export interface WrittenRecords {
  history: Pick<HistoryRecords, "write" | "deleteFinishedBefore">;
  webhookDeliveries: Pick<WebhookDeliveryRecords, "enqueueIn" | "deleteFinishedBefore">;
  audience: Pick<AudienceRecords, "recordMessageEvents">;
  campaigns: Pick<CampaignRecords, "recordOutcomes">;
  directory: Pick<DirectoryRecords, "touchTokens">;
  suppressions: Pick<SuppressionRecords, "delivered">;
}

export interface RecordsWriterOptions {
  outbox: OutboxStore;
  /** One daemon writes the history at a time. */
  leases: SingletonLeases;
  records: WrittenRecords;
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
  private flushing: Promise<boolean> | undefined;
  private failing: string | undefined;
  private stopped = true;
  /** The next flush: its timer, when it is due (monotonic ms), when the last one began, and the wait after an empty one. */
  private flushTimer: ReturnType<typeof setTimeout> | undefined;
  private flushAt = Number.POSITIVE_INFINITY;
  private lastFlushAt = Number.NEGATIVE_INFINITY;
  private idleWaitMs = FLUSH_EVERY_MS;
  private heldAt = Number.NEGATIVE_INFINITY;

  constructor(private readonly o: RecordsWriterOptions) {}

  start(): void {
    this.stopped = false;
    this.flushIn(FLUSH_EVERY_MS);
    this.timers.push(
      setInterval(() => void this.background("retention", () => this.expire()), RETENTION_EVERY_MS),
      setInterval(() => void this.background("token use", () => this.writeTokenUse()), TOKEN_USE_RESOLUTION_MS),
    );
  }

  /** Something changed a message: the next flush comes at the usual pace, not after an idle wait. */
  changed(): void {
    this.idleWaitMs = FLUSH_EVERY_MS;
    if (this.stopped) return;
    const at = Math.max(performance.now(), this.lastFlushAt + FLUSH_EVERY_MS);
    if (at < this.flushAt) this.flushIn(delayUntil(at, performance.now()));
  }

  private flushIn(ms: number): void {
    clearTimeout(this.flushTimer);
    this.flushAt = performance.now() + ms;
    this.flushTimer = setTimeout(async () => {
      this.flushAt = Number.POSITIVE_INFINITY;
      const wrote = await this.flush();
      this.idleWaitMs = wrote ? FLUSH_EVERY_MS : Math.min(this.idleWaitMs * 2, FLUSH_IDLE_MAX_MS);
      if (!this.stopped && this.flushAt === Number.POSITIVE_INFINITY) this.flushIn(this.idleWaitMs);
    }, timerDelay(ms));
  }

  /** Notes that a token was used (written to the records later, coarsely). */
  tokenUsed(hash: string): void {
    this.usedTokens.add(hash);
  }

  /** Writes what changed to the records, until nothing is left; one flush at a time. Says whether it wrote anything. */
  flush(): Promise<boolean> {
    this.lastFlushAt = performance.now();
    let wrote = false;
    this.flushing ??= this.background("message history", async () => {
      if (performance.now() - this.heldAt >= WRITER_LEASE_RENEW_MS) {
        this.heldAt = Number.NEGATIVE_INFINITY;
        if (!(await this.o.leases.holdLease("history", this.o.owner, WRITER_LEASE_TTL_MS))) return;
        this.heldAt = this.lastFlushAt;
      }
      for (;;) {
        const changed = await this.o.outbox.changedMessages(FLUSH_BATCH);
        if (changed.length === 0) return;
        wrote = true;
        await this.o.records.history.write(changed, (sql, fresh) =>
          this.o.records.webhookDeliveries.enqueueIn(sql, emailWebhookEvents(fresh), this.o.clock.nowMs()),
        );
        await this.o.records.audience.recordMessageEvents(changed);
        await this.o.records.campaigns.recordOutcomes(changed);
        await deliveredTo(this.o.records.suppressions, changed);
        await this.o.outbox.settle(changed.map((m) => ({ orgId: m.orgId, id: m.id, version: m.version })));
        if (changed.length < FLUSH_BATCH) return;
      }
    })
      .then(() => wrote)
      .finally(() => {
        this.flushing = undefined;
      });
    return this.flushing;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.flushTimer);
    for (const t of this.timers) clearInterval(t);
    await this.flush();
    await this.background("token use", () => this.writeTokenUse());
  }

  private async expire(): Promise<void> {
    const before = this.o.clock.nowMs() - this.o.retentionMs;
    while ((await this.o.records.history.deleteFinishedBefore(before, RETENTION_BATCH)) === RETENTION_BATCH) {}
    while (
      (await this.o.records.webhookDeliveries.deleteFinishedBefore(before, RETENTION_BATCH)) === RETENTION_BATCH
    ) {}
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
      this.o.metrics?.recordsWriterFailures.inc({ task: job });
      if (this.failing === undefined)
        this.o.log.warn("records writer failing; the hot store keeps everything until it recovers", {
          job,
          error: (err as Error).message,
        });
      this.failing ??= job;
    }
  }
}

/** A delivery starts an organization's count of a mailbox's soft bounces again. */
async function deliveredTo(suppressions: WrittenRecords["suppressions"], changed: MessageHistory[]): Promise<void> {
  const byOrg = new Map<string, string[]>();
  for (const m of changed)
    if (m.status === MessageStatus.DELIVERED) byOrg.set(m.orgId, [...(byOrg.get(m.orgId) ?? []), m.toMailbox]);
  for (const [orgId, mailboxes] of byOrg) await suppressions.delivered(orgId, mailboxes);
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
      // A classified refusal: its type (hard, soft, policy), status code and diagnostic.
      ...withBounce(e.detail),
    };
    return [{ orgId: m.orgId, type, atMs: e.atMs, data }];
  });
}

function withBounce(detail: string): { bounce?: ReturnType<typeof bounceOfDetail> } {
  const bounce = bounceOfDetail(detail);
  return bounce ? { bounce } : {};
}
