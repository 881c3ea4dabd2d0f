import { type Db, num } from "./db";
import { addStatsIn } from "./stats";
import type { AnnounceIn } from "./suppressions";

// Opens and clicks of tracked messages: each hit kept with its verdict (a person's or a
// machine's), counted per hour apart (opened / opened_machine, clicked / clicked_machine) and
// announced as email.opened or email.clicked, in one transaction.

export interface HitInput {
  orgId: string;
  messageId: string;
  kind: "open" | "click";
  /** The link's index; -1 for an open. */
  link: number;
  url?: string;
  atMs: number;
  machine: boolean;
  reason: string;
}

export class TrackingRecords {
  constructor(
    private readonly db: Db,
    private readonly announce: AnnounceIn,
  ) {}

  /** The message's clicks from sinceMs on: what the burst rule looks at. */
  async clicksSince(messageId: string, sinceMs: number): Promise<{ atMs: number; link: number }[]> {
    const rows = await this.db.run(
      (sql) =>
        sql`SELECT at_ms, link FROM tracking_hits WHERE message_id = ${messageId} AND at_ms >= ${sinceMs} AND kind = 'click' ORDER BY at_ms`,
    );
    return rows.map((r: { at_ms: unknown; link: unknown }) => ({ atMs: num(r.at_ms), link: num(r.link) }));
  }

  async record(h: HitInput): Promise<void> {
    await this.db.tx(async (sql) => {
      await sql`INSERT INTO tracking_hits ${sql({
        org_id: h.orgId,
        message_id: h.messageId,
        kind: h.kind,
        link: h.link,
        at_ms: h.atMs,
        machine: h.machine ? 1 : 0,
        reason: h.reason,
      })}`;
      const kind = `${h.kind === "open" ? "opened" : "clicked"}${h.machine ? "_machine" : ""}` as const;
      await addStatsIn(sql, [{ orgId: h.orgId, atMs: h.atMs, kind, n: 1 }]);
      await this.announce(
        sql,
        [
          {
            orgId: h.orgId,
            type: h.kind === "open" ? "email.opened" : "email.clicked",
            atMs: h.atMs,
            data: {
              emailId: h.messageId,
              machine: h.machine,
              reason: h.reason,
              ...(h.kind === "click" ? { link: h.link, url: h.url } : {}),
            },
          },
        ],
        h.atMs,
      );
    });
  }
}
