import { type Db, num } from "./db";
import { HOUR_MS } from "./stats";

// Complaints against an organization's mail: its complaint rate over a sliding window (from the
// hourly counters), and the pause of its bulk sends once the rate goes past the limit, kept
// until an operator resumes them.

/** The window of the complaint rate: the last 24 hours, by whole hours (the counters' own). */
export const COMPLAINT_WINDOW_MS = 24 * HOUR_MS;

export interface ComplaintRate {
  complained: number;
  delivered: number;
  /** complained / delivered; 0 without deliveries. */
  rate: number;
}

export interface BulkPause {
  pausedMs: number;
  reason: string;
}

export class ComplaintRecords {
  constructor(private readonly db: Db) {}

  /** The organization's complaints and deliveries over the window that ends in the hour of nowMs. */
  async rate(orgId: string, nowMs: number): Promise<ComplaintRate> {
    const until = nowMs - (nowMs % HOUR_MS) + HOUR_MS;
    const rows = await this.db.run(
      (sql) => sql`SELECT kind, SUM(n) AS n FROM message_stats
        WHERE org_id = ${orgId} AND hour_ms >= ${until - COMPLAINT_WINDOW_MS} AND hour_ms < ${until}
          AND kind IN ('complained', 'delivered') GROUP BY kind`,
    );
    const of = (kind: string) => num(rows.find((r: { kind: string }) => r.kind === kind)?.n ?? 0);
    const [complained, delivered] = [of("complained"), of("delivered")];
    return { complained, delivered, rate: delivered === 0 ? 0 : complained / delivered };
  }

  /** Pauses the organization's bulk sends; the first pause stays. */
  async pause(orgId: string, reason: string, nowMs: number): Promise<void> {
    await this.db.run(
      (sql) =>
        sql`INSERT INTO bulk_pauses ${sql({ org_id: orgId, paused_ms: nowMs, reason })} ON CONFLICT (org_id) DO NOTHING`,
    );
  }

  /** Resumes them; false when they were not paused. */
  async resume(orgId: string): Promise<boolean> {
    const gone = await this.db.run((sql) => sql`DELETE FROM bulk_pauses WHERE org_id = ${orgId} RETURNING org_id`);
    return gone.length > 0;
  }

  /** Every organization whose bulk sends are paused. */
  async allPaused(): Promise<string[]> {
    const rows = await this.db.run((sql) => sql`SELECT org_id FROM bulk_pauses ORDER BY org_id`);
    return rows.map((r: { org_id: string }) => r.org_id);
  }

  async paused(orgId: string): Promise<BulkPause | undefined> {
    const [r] = await this.db.run((sql) => sql`SELECT paused_ms, reason FROM bulk_pauses WHERE org_id = ${orgId}`);
    return r ? { pausedMs: num(r.paused_ms), reason: r.reason as string } : undefined;
  }
}
