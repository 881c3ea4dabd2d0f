import { type Db, num, type Sql } from "./db";

// Counts of an organization's mail per hour, kept as counters beside the events they count:
// a message event adds to its hour where the history writes it (in the same transaction, so
// an event is counted once), a refused request where the refusals are counted. Reading a
// range of hours is one index range, whatever the volume of mail behind it.

export const STAT_KINDS = [
  "accepted",
  "delivered",
  "bounced",
  "failed",
  "deferred",
  "refused_quota",
  "refused_ip",
  "refused_recipient",
  "complained",
  "opened",
  "opened_machine",
  "clicked",
  "clicked_machine",
] as const;
export type StatKind = (typeof STAT_KINDS)[number];

export const HOUR_MS = 3_600_000;

/** n more of kind for an organization, in the hour of atMs. */
export interface StatCount {
  orgId: string;
  atMs: number;
  kind: StatKind;
  n: number;
}

/** One hour's counts; kinds without any are 0. */
export type StatHour = { hourStartMs: number } & Record<StatKind, number>;

/** Adds the counts in the caller's transaction: one row per organization, hour and kind. */
export async function addStatsIn(sql: Sql, counts: readonly StatCount[]): Promise<void> {
  const rows = new Map<string, { org_id: string; hour_ms: number; kind: StatKind; n: number }>();
  for (const c of counts) {
    const hour = c.atMs - (c.atMs % HOUR_MS);
    const key = `${c.orgId}|${hour}|${c.kind}`;
    const row = rows.get(key);
    if (row) row.n += c.n;
    else rows.set(key, { org_id: c.orgId, hour_ms: hour, kind: c.kind, n: c.n });
  }
  if (rows.size === 0) return;
  // In key order, so that two writers adding to the same rows lock them in the same order.
  const sorted = [...rows].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, r]) => r);
  for (let i = 0; i < sorted.length; i += 500) {
    await sql`INSERT INTO message_stats ${sql(sorted.slice(i, i + 500))}
      ON CONFLICT (org_id, hour_ms, kind) DO UPDATE SET n = message_stats.n + excluded.n`;
  }
}

export class StatsRecords {
  constructor(private readonly db: Db) {}

  add(counts: readonly StatCount[]): Promise<void> {
    return this.db.tx((sql) => addStatsIn(sql, counts));
  }

  /** The hours from sinceMs (inclusive) to untilMs (exclusive) that have a count, oldest first. */
  async hours(orgId: string, sinceMs: number, untilMs: number): Promise<StatHour[]> {
    const rows = await this.db.run(
      (sql) =>
        sql`SELECT hour_ms, kind, n FROM message_stats WHERE org_id = ${orgId} AND hour_ms >= ${sinceMs} AND hour_ms < ${untilMs} ORDER BY hour_ms`,
    );
    const hours = new Map<number, StatHour>();
    for (const r of rows as { hour_ms: unknown; kind: StatKind; n: unknown }[]) {
      const at = num(r.hour_ms);
      let h = hours.get(at);
      if (!h) {
        h = { hourStartMs: at, ...(Object.fromEntries(STAT_KINDS.map((k) => [k, 0])) as Record<StatKind, number>) };
        hours.set(at, h);
      }
      if ((STAT_KINDS as readonly string[]).includes(r.kind)) h[r.kind] += num(r.n);
    }
    return [...hours.values()];
  }
}
