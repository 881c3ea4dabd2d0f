import type { Clock } from "../clock/clock";
import type { RefusalCount, RefusalKind, UsageStore } from "../hotstore/hotstore";
import type { Logger } from "../log/log";
import type { StatKind, StatsRecords } from "../records/stats";

/** How often the counts are added to the hot store. */
const FLUSH_EVERY_MS = 1_000;

const STAT_OF_KIND: Record<RefusalKind, StatKind> = {
  quota: "refused_quota",
  ip: "refused_ip",
  recipient: "refused_recipient",
};

/**
 * Counts refused requests (429s) per organization and kind for the console and the delivery
 * figures. Only refusals are counted, in memory, and added once a second to the hot store's
 * per-minute counts (the console's last hour) and to the records' hourly counts (GET
 * /api/v1/stats/emails), so an admitted request costs nothing and a flood of refusals costs
 * one write per organization and kind a second to each. Counts land in the minute of the
 * flush (at most a second late); counts that cannot be written are dropped (they are a
 * report, not a limit).
 */
export class RefusalCounter {
  private pending = new Map<string, RefusalCount>();
  private timer: ReturnType<typeof setInterval> | undefined;
  private failing = false;

  constructor(
    private readonly usage: UsageStore,
    private readonly records: Pick<StatsRecords, "add">,
    private readonly clock: Clock,
    private readonly log: Logger,
  ) {}

  count(orgId: string, kind: RefusalKind): void {
    const key = `${orgId}|${kind}`;
    const c = this.pending.get(key);
    if (c) c.n++;
    else this.pending.set(key, { orgId, kind, n: 1 });
  }

  start(): void {
    this.timer = setInterval(() => void this.flush(), FLUSH_EVERY_MS);
  }

  /** Adds what was counted to the hot store. */
  async flush(): Promise<void> {
    if (this.pending.size === 0) return;
    const counts = [...this.pending.values()];
    this.pending = new Map();
    const nowMs = this.clock.nowMs();
    const written = await Promise.allSettled([
      this.usage.countRefusals(counts, nowMs),
      this.records.add(counts.map((c) => ({ orgId: c.orgId, atMs: nowMs, kind: STAT_OF_KIND[c.kind], n: c.n }))),
    ]);
    const failed = written.find((w) => w.status === "rejected");
    if (!failed) {
      if (this.failing) this.log.info("refusal counts are written again");
      this.failing = false;
    } else {
      if (!this.failing)
        this.log.warn("cannot write refusal counts; dropping them", { error: (failed.reason as Error).message });
      this.failing = true;
    }
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }
}
