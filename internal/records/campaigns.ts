import { Lane, MessageStatus } from "../gen/mailcore/limiter/v1/mail_pb";
import type { Fields } from "./audience_types";
import { chunks, type Db, num, numOrNull, type Sql, timeOrderedId } from "./db";
import type { MessageHistory } from "../model/history";
import { BY_SEQ, mapPage, newestFirst, type Page } from "./paging";

// Campaigns: one message to every subscriber of an audience (some tags, or all), sent through
// the bulk lane a page at a time. The walk over the audience (cursor_seq up to last_seq, the
// audience's end when sending started) and the counts are kept here, so a daemon that takes
// over the fan-out resumes where the last one stopped.

export type CampaignStatus = "draft" | "scheduled" | "sending" | "sent" | "cancelled" | "failed";

export interface CampaignStats {
  recipients: number;
  queued: number;
  delivered: number;
  bounced: number;
  failed: number;
  skipped: number;
  /** Of the skipped, those on the organization's suppression list. */
  suppressed: number;
}

export interface Campaign {
  id: string;
  orgId: string;
  name: string;
  from: string;
  fromAddress: string;
  subject: string;
  html: string;
  text: string;
  /** Subscribers with any of these tags; empty: every subscriber. */
  audienceTags: string[];
  status: CampaignStatus;
  scheduledMs: number | null;
  /** Why a campaign failed. */
  detail: string;
  cursorSeq: number;
  lastSeq: number;
  stats: CampaignStats;
  createdMs: number;
  updatedMs: number;
}

export type NewCampaign = Pick<
  Campaign,
  "name" | "from" | "fromAddress" | "subject" | "html" | "text" | "audienceTags"
>;

/** A subscriber of a campaign's audience, as the fan-out reads it. */
export interface AudienceMember {
  seq: number;
  id: string;
  email: string;
  name: string;
  fields: Fields;
  /** Unsubscribed, or a message to it bounced: it gets nothing. */
  skip: boolean;
}

/** A campaign message about to be queued: its id and unsubscribe token are fixed first, so a retried page queues the same ones. */
export interface Reserved {
  subscriberId: string;
  messageId: string;
  token: string;
}

/** Whom an unsubscribe token names. */
export interface TokenOwner {
  orgId: string;
  subscriberId: string;
  campaignId: string;
}

const OUTCOMES: Partial<Record<MessageStatus, "delivered" | "bounced" | "failed">> = {
  [MessageStatus.DELIVERED]: "delivered",
  [MessageStatus.BOUNCED]: "bounced",
  [MessageStatus.FAILED]: "failed",
};

interface CampaignRow {
  seq: unknown;
  id: string;
  org_id: string;
  name: string;
  from_header: string;
  from_address: string;
  subject: string;
  html: string;
  text_body: string;
  audience_tags: string;
  status: string;
  scheduled_ms: unknown;
  detail: string;
  cursor_seq: unknown;
  last_seq: unknown;
  recipients: unknown;
  queued: unknown;
  delivered: unknown;
  bounced: unknown;
  failed: unknown;
  skipped: unknown;
  suppressed: unknown;
  created_ms: unknown;
  updated_ms: unknown;
}

function fromRow(r: CampaignRow): Campaign {
  return {
    id: r.id,
    orgId: r.org_id,
    name: r.name,
    from: r.from_header,
    fromAddress: r.from_address,
    subject: r.subject,
    html: r.html,
    text: r.text_body,
    audienceTags: JSON.parse(r.audience_tags) as string[],
    status: r.status as CampaignStatus,
    scheduledMs: numOrNull(r.scheduled_ms),
    detail: r.detail,
    cursorSeq: num(r.cursor_seq),
    lastSeq: num(r.last_seq),
    stats: {
      recipients: num(r.recipients),
      queued: num(r.queued),
      delivered: num(r.delivered),
      bounced: num(r.bounced),
      failed: num(r.failed),
      skipped: num(r.skipped),
      suppressed: num(r.suppressed ?? 0),
    },
    createdMs: num(r.created_ms),
    updatedMs: num(r.updated_ms),
  };
}

/** Messages queued and not yet in a final state: what the campaign has in the bulk lane or with a worker. */
export function pending(c: Campaign): number {
  return c.stats.queued - c.stats.delivered - c.stats.bounced - c.stats.failed;
}

/** The audience condition of a campaign; tags [""] stand for "every subscriber" (IN needs a list). */
function audienceOf(c: Campaign): { all: number; tags: string[] } {
  return c.audienceTags.length === 0 ? { all: 1, tags: [""] } : { all: 0, tags: c.audienceTags };
}

export class CampaignRecords {
  constructor(private readonly db: Db) {}

  async create(orgId: string, input: NewCampaign, nowMs: number): Promise<Campaign> {
    const [row] = (await this.db.run(
      (sql) =>
        sql`INSERT INTO campaigns ${sql({
          id: timeOrderedId("cmp"),
          org_id: orgId,
          name: input.name,
          from_header: input.from,
          from_address: input.fromAddress,
          subject: input.subject,
          html: input.html,
          text_body: input.text,
          audience_tags: JSON.stringify(input.audienceTags),
          status: "draft",
          scheduled_ms: null,
          detail: "",
          cursor_seq: 0,
          last_seq: 0,
          recipients: 0,
          queued: 0,
          delivered: 0,
          bounced: 0,
          failed: 0,
          skipped: 0,
          suppressed: 0,
          created_ms: nowMs,
          updated_ms: nowMs,
        })} RETURNING *`,
    )) as CampaignRow[];
    return fromRow(row!);
  }

  async get(orgId: string, id: string): Promise<Campaign | undefined> {
    const [row] = (await this.db.run(
      (sql) => sql`SELECT * FROM campaigns WHERE org_id = ${orgId} AND id = ${id}`,
    )) as CampaignRow[];
    return row ? fromRow(row) : undefined;
  }

  /** Newest first (in the order they were made). */
  list(orgId: string, limit: number, cursor?: string): Promise<Page<Campaign>> {
    return this.db.run(async (sql) => {
      const page = await newestFirst<CampaignRow>(sql, sql`SELECT * FROM campaigns WHERE org_id = ${orgId}`, BY_SEQ, {
        limit,
        cursor,
      });
      return mapPage(page, fromRow);
    });
  }

  /**
   * Sends a draft: now (sending) or at scheduledMs when that is later (scheduled). undefined
   * when there is no such campaign; "not_draft" when it was sent or cancelled before.
   */
  send(
    orgId: string,
    id: string,
    scheduledMs: number | undefined,
    nowMs: number,
  ): Promise<Campaign | undefined | "not_draft"> {
    return this.db.tx(async (sql) => {
      const [row] =
        (await sql`UPDATE campaigns SET updated_ms = updated_ms WHERE org_id = ${orgId} AND id = ${id} RETURNING *`) as CampaignRow[];
      if (!row) return undefined;
      if (row.status !== "draft") return "not_draft";
      if (scheduledMs !== undefined && scheduledMs > nowMs) {
        await sql`UPDATE campaigns SET status = 'scheduled', scheduled_ms = ${scheduledMs}, updated_ms = ${nowMs} WHERE id = ${id}`;
      } else {
        await begin(sql, fromRow(row), nowMs);
      }
      return fromRow(((await sql`SELECT * FROM campaigns WHERE id = ${id}`) as CampaignRow[])[0]!);
    });
  }

  /** Stops a campaign that has not finished; the fan-out queues nothing more. "finished" when it had. */
  cancel(orgId: string, id: string, nowMs: number): Promise<Campaign | undefined | "finished"> {
    return this.db.tx(async (sql) => {
      const [row] =
        (await sql`UPDATE campaigns SET updated_ms = updated_ms WHERE org_id = ${orgId} AND id = ${id} RETURNING *`) as CampaignRow[];
      if (!row) return undefined;
      if (row.status === "cancelled") return fromRow(row);
      if (row.status === "sent" || row.status === "failed") return "finished";
      const [done] =
        (await sql`UPDATE campaigns SET status = 'cancelled', updated_ms = ${nowMs} WHERE id = ${id} RETURNING *`) as CampaignRow[];
      return fromRow(done!);
    });
  }

  /** Starts the scheduled campaigns that are due. */
  startDue(nowMs: number): Promise<void> {
    return this.db.tx(async (sql) => {
      const due =
        (await sql`SELECT * FROM campaigns WHERE status = 'scheduled' AND scheduled_ms <= ${nowMs}`) as CampaignRow[];
      for (const row of due) await begin(sql, fromRow(row), nowMs);
    });
  }

  /** Every campaign that is sending, oldest first. */
  async sending(): Promise<Campaign[]> {
    const rows = (await this.db.run(
      (sql) => sql`SELECT * FROM campaigns WHERE status = 'sending' ORDER BY seq`,
    )) as CampaignRow[];
    return rows.map(fromRow);
  }

  /** The next members of the campaign's audience after its cursor, in the order of the walk. */
  async nextMembers(c: Campaign, limit: number): Promise<AudienceMember[]> {
    const { all, tags } = audienceOf(c);
    const rows = (await this.db.run(
      (sql) => sql`SELECT s.seq, s.id, s.email, s.name, s.fields,
          CASE WHEN s.status <> 'subscribed' OR EXISTS (SELECT 1 FROM subscriber_events e WHERE e.subscriber_id = s.id AND e.type = 'email.bounced') THEN 1 ELSE 0 END AS skip
        FROM subscribers s
        WHERE s.org_id = ${c.orgId} AND s.seq > ${c.cursorSeq} AND s.seq <= ${c.lastSeq}
          AND (${all} = 1 OR EXISTS (SELECT 1 FROM subscriber_tags t WHERE t.subscriber_id = s.id AND t.tag IN ${sql(tags)}))
        ORDER BY s.seq LIMIT ${limit}`,
    )) as { seq: unknown; id: string; email: string; name: string; fields: string; skip: unknown }[];
    return rows.map((r) => ({
      seq: num(r.seq),
      id: r.id,
      email: r.email,
      name: r.name,
      fields: JSON.parse(r.fields) as Fields,
      skip: num(r.skip) === 1,
    }));
  }

  /**
   * Fixes the message id and token of each subscriber's message of a campaign (or of a
   * workflow run's email step: its id is "<run id>:<step>"); a subscriber that has them from an
   * earlier try keeps them. Returns them by subscriber id.
   */
  reserve(c: Pick<Campaign, "id" | "orgId">, wanted: Reserved[]): Promise<Map<string, Reserved>> {
    return this.db.tx(async (sql) => {
      const out = new Map<string, Reserved>();
      for (const part of chunks(wanted)) {
        const rows = part.map((w) => ({
          campaign_id: c.id,
          subscriber_id: w.subscriberId,
          org_id: c.orgId,
          message_id: w.messageId,
          token: w.token,
          outcome: "queued",
        }));
        await sql`INSERT INTO campaign_messages ${sql(rows)} ON CONFLICT (campaign_id, subscriber_id) DO NOTHING`;
        const stored =
          await sql`SELECT subscriber_id, message_id, token FROM campaign_messages WHERE campaign_id = ${c.id} AND subscriber_id IN ${sql(part.map((w) => w.subscriberId))}`;
        for (const r of stored as { subscriber_id: string; message_id: string; token: string }[])
          out.set(r.subscriber_id, { subscriberId: r.subscriber_id, messageId: r.message_id, token: r.token });
      }
      return out;
    });
  }

  /**
   * Moves the walk past a page read at c's cursor: the cursor to throughSeq, queued, skipped
   * and suppressed (of the skipped) up by what the page did; sent when the walk is done. Only while the campaign is sending (a
   * cancel wins) and still at that cursor (a page done twice, by a daemon that lost the lease
   * meanwhile, counts once).
   */
  async advance(
    c: Pick<Campaign, "id" | "cursorSeq">,
    throughSeq: number,
    queued: number,
    skipped: number,
    done: boolean,
    nowMs: number,
    suppressed = 0,
  ): Promise<void> {
    const status = done ? "sent" : "sending";
    await this.db.run(
      (
        sql,
      ) => sql`UPDATE campaigns SET cursor_seq = ${throughSeq}, queued = queued + ${queued}, skipped = skipped + ${skipped}, suppressed = suppressed + ${suppressed}, status = ${status}, updated_ms = ${nowMs}
        WHERE id = ${c.id} AND status = 'sending' AND cursor_seq = ${c.cursorSeq}`,
    );
  }

  async fail(id: string, detail: string, nowMs: number): Promise<void> {
    await this.db.run(
      (sql) =>
        sql`UPDATE campaigns SET status = 'failed', detail = ${detail}, updated_ms = ${nowMs} WHERE id = ${id} AND status = 'sending'`,
    );
  }

  /** Counts the final outcomes of campaign messages (once each, however often a message is written). */
  async recordOutcomes(messages: MessageHistory[]): Promise<void> {
    const byOutcome = new Map<string, string[]>();
    for (const m of messages) {
      const outcome = m.lane === Lane.BULK ? OUTCOMES[m.status] : undefined;
      if (outcome) byOutcome.set(outcome, [...(byOutcome.get(outcome) ?? []), m.id]);
    }
    if (byOutcome.size === 0) return;
    await this.db.tx(async (sql) => {
      const counts = new Map<string, Record<string, number>>();
      for (const [outcome, ids] of byOutcome) {
        for (const part of chunks(ids)) {
          const rows =
            await sql`UPDATE campaign_messages SET outcome = ${outcome} WHERE message_id IN ${sql(part)} AND outcome = 'queued' RETURNING campaign_id`;
          for (const r of rows as { campaign_id: string }[]) {
            const c = counts.get(r.campaign_id) ?? { delivered: 0, bounced: 0, failed: 0 };
            c[outcome]! += 1;
            counts.set(r.campaign_id, c);
          }
        }
      }
      // In id order: two writers lock campaigns in the same order.
      for (const id of [...counts.keys()].sort()) {
        const c = counts.get(id)!;
        await sql`UPDATE campaigns SET delivered = delivered + ${c.delivered}, bounced = bounced + ${c.bounced}, failed = failed + ${c.failed} WHERE id = ${id}`;
      }
    });
  }

  /** Whom an unsubscribe token names; undefined when it names nobody. */
  async tokenOwner(token: string): Promise<TokenOwner | undefined> {
    const [row] = (await this.db.run(
      (sql) => sql`SELECT org_id, subscriber_id, campaign_id FROM campaign_messages WHERE token = ${token}`,
    )) as {
      org_id: string;
      subscriber_id: string;
      campaign_id: string;
    }[];
    return row ? { orgId: row.org_id, subscriberId: row.subscriber_id, campaignId: row.campaign_id } : undefined;
  }
}

/** Starts sending: the audience is fixed to the subscribers there are now, and counted. */
async function begin(sql: Sql, c: Campaign, nowMs: number): Promise<void> {
  const [end] = await sql`SELECT COALESCE(MAX(seq), 0) AS last FROM subscribers WHERE org_id = ${c.orgId}`;
  const last = num((end as { last: unknown }).last);
  const { all, tags } = audienceOf(c);
  const [count] = await sql`SELECT COUNT(*) AS n FROM subscribers s WHERE s.org_id = ${c.orgId} AND s.seq <= ${last}
    AND (${all} = 1 OR EXISTS (SELECT 1 FROM subscriber_tags t WHERE t.subscriber_id = s.id AND t.tag IN ${sql(tags)}))`;
  await sql`UPDATE campaigns SET status = 'sending', cursor_seq = 0, last_seq = ${last}, recipients = ${num((count as { n: unknown }).n)}, updated_ms = ${nowMs} WHERE id = ${c.id}`;
}
