import { type SoftBounceRule, softBounceVerdict } from "../feedback/softbounces";
import type { BounceDetail } from "../mail/bounce_detail";
import { normalizeMailbox } from "../mail/policy";
import type { SuppressionReason } from "../mail/suppression";
import { chunks, type Db, num, type Sql } from "./db";
import { BY_SEQ, mapPage, newestFirst, type Page } from "./paging";
import { addStatsIn } from "./stats";
import type { WebhookEventInput } from "./webhook_deliveries";

// The suppression list of each organization: the mailboxes it sends nothing to. A hard bounce,
// soft bounces that repeat, a complaint put an address there; the organization adds and removes
// addresses itself too. A send to a listed address is refused at once; a campaign skips it. The
// address is kept as the recipient guards see it (lower case, without a +tag), so a listed
// mailbox is not reached again through a tag.

export interface Suppression {
  email: string;
  reason: SuppressionReason;
  /** Why, in words: the bounce's status and diagnostic, the complaint's feedback type, the caller's note. */
  detail: string;
  /** The message that led to it (a bounce, a complaint); null for an address added by hand. */
  messageId: string | null;
  createdMs: number;
}

export interface SuppressionInput {
  orgId: string;
  email: string;
  reason: SuppressionReason;
  detail: string;
  messageId?: string;
  nowMs: number;
}

/** The longest detail kept. */
const MAX_DETAIL = 1_000;

function suppressionOf(r: Record<string, unknown>): Suppression {
  return {
    email: r.email as string,
    reason: r.reason as SuppressionReason,
    detail: r.detail as string,
    messageId: (r.message_id as string | null) ?? null,
    createdMs: num(r.created_ms),
  };
}

/** A final refusal of one message, as the mailbox's organization learns it. */
export interface BounceInput {
  orgId: string;
  messageId: string;
  /** The recipient (normalised here). */
  email: string;
  bounce: BounceDetail;
  atMs: number;
}

/** What a bounce did to the organization's list. */
export interface BounceEffect {
  /** Listed by this bounce (false: listed already, or not listed: policy, or soft below the rule). */
  suppressed: boolean;
  /** For a soft bounce: those that count now, this one included. */
  softBounces: number;
}

/** Announces events to the organization's webhooks in the caller's transaction. */
export type AnnounceIn = (sql: Sql, events: WebhookEventInput[], nowMs: number) => Promise<unknown>;

export class SuppressionRecords {
  constructor(
    private readonly db: Db,
    private readonly announce: AnnounceIn,
    private readonly softRule?: SoftBounceRule,
  ) {}

  /**
   * Applies one message's final refusal to its organization's list, in one transaction: a hard
   * bounce lists the mailbox; a soft one is counted, and lists it when the soft-bounce rule
   * says so; a policy refusal is the sender's, and changes nothing. A listing is announced as
   * email.suppressed. The same message's bounce twice counts once.
   */
  async recordBounce(b: BounceInput): Promise<BounceEffect> {
    if (b.bounce.type === "policy") return { suppressed: false, softBounces: 0 };
    const email = normalizeMailbox(b.email);
    return this.db.tx(async (sql) => {
      let softBounces = 0;
      let reason: SuppressionReason = "hard_bounce";
      if (b.bounce.type === "soft") {
        reason = "soft_bounce";
        await sql`INSERT INTO soft_bounces ${sql({ org_id: b.orgId, email, message_id: b.messageId, at_ms: b.atMs })}
          ON CONFLICT (org_id, email, message_id) DO NOTHING`;
        const rows = await sql`SELECT at_ms FROM soft_bounces WHERE org_id = ${b.orgId} AND email = ${email}`;
        const verdict = softBounceVerdict(
          rows.map((r: { at_ms: unknown }) => ({ atMs: num(r.at_ms), outcome: "soft" as const })),
          b.atMs,
          this.softRule,
        );
        softBounces = verdict.softBounces;
        if (!verdict.suppress) return { suppressed: false, softBounces };
      }
      const detail = `${b.bounce.status ? `${b.bounce.status}: ` : ""}${b.bounce.diagnostic}`;
      const made = await this.addIn(sql, {
        orgId: b.orgId,
        email,
        reason,
        detail,
        messageId: b.messageId,
        nowMs: b.atMs,
      });
      if (made.created)
        await this.announce(
          sql,
          [
            {
              orgId: b.orgId,
              type: "email.suppressed",
              atMs: b.atMs,
              data: { email, reason, detail: made.suppression.detail, emailId: b.messageId },
            },
          ],
          b.atMs,
        );
      return { suppressed: made.created, softBounces };
    });
  }

  /**
   * A complaint about a message (an ARF report): the recipient goes on its organization's list,
   * announced as email.complained and, when it was not listed, email.suppressed.
   */
  async recordComplaint(c: {
    orgId: string;
    messageId: string;
    email: string;
    feedbackType: string;
    atMs: number;
  }): Promise<{ suppressed: boolean }> {
    return this.db.tx(async (sql) => {
      const detail = `complaint (${c.feedbackType || "abuse"})`;
      const made = await this.addIn(sql, {
        orgId: c.orgId,
        email: c.email,
        reason: "complaint",
        detail,
        messageId: c.messageId,
        nowMs: c.atMs,
      });
      const email = made.suppression.email;
      const data = { emailId: c.messageId, email, feedbackType: c.feedbackType };
      await this.announce(
        sql,
        [
          { orgId: c.orgId, type: "email.complained", atMs: c.atMs, data },
          ...(made.created
            ? [
                {
                  orgId: c.orgId,
                  type: "email.suppressed",
                  atMs: c.atMs,
                  data: { ...data, reason: "complaint", detail },
                },
              ]
            : []),
        ],
        c.atMs,
      );
      await addStatsIn(sql, [{ orgId: c.orgId, atMs: c.atMs, kind: "complained", n: 1 }]);
      return { suppressed: made.created };
    });
  }

  /** A delivery to each of these mailboxes: their soft bounces no longer count. */
  async delivered(orgId: string, emails: readonly string[]): Promise<void> {
    const mailboxes = [...new Set(emails.map(normalizeMailbox))];
    for (const part of chunks(mailboxes))
      await this.db.run((sql) => sql`DELETE FROM soft_bounces WHERE org_id = ${orgId} AND email IN ${sql(part)}`);
  }

  /**
   * Lists the address, unless it is listed already: the first reason stays (a complaint after
   * a hard bounce changes nothing). created: whether this call listed it.
   */
  async add(o: SuppressionInput): Promise<{ suppression: Suppression; created: boolean }> {
    return this.db.tx((sql) => this.addIn(sql, o));
  }

  /** add, in the caller's transaction. */
  async addIn(sql: Sql, o: SuppressionInput): Promise<{ suppression: Suppression; created: boolean }> {
    const row = {
      org_id: o.orgId,
      email: normalizeMailbox(o.email),
      reason: o.reason,
      detail: o.detail.slice(0, MAX_DETAIL),
      message_id: o.messageId ?? null,
      created_ms: o.nowMs,
    };
    const made = await sql`INSERT INTO suppressions ${sql(row)} ON CONFLICT (org_id, email) DO NOTHING RETURNING seq`;
    const [kept] = await sql`SELECT * FROM suppressions WHERE org_id = ${row.org_id} AND email = ${row.email}`;
    return { suppression: suppressionOf(kept), created: made.length > 0 };
  }

  /** A page of the organization's list, newest first; reason narrows it to one reason. */
  async list(
    orgId: string,
    o: { reason?: SuppressionReason; limit: number; cursor?: string },
  ): Promise<Page<Suppression>> {
    const page = await this.db.run((sql) =>
      newestFirst<Record<string, unknown>>(
        sql,
        o.reason === undefined
          ? sql`SELECT * FROM suppressions WHERE org_id = ${orgId}`
          : sql`SELECT * FROM suppressions WHERE org_id = ${orgId} AND reason = ${o.reason}`,
        BY_SEQ,
        { limit: o.limit, cursor: o.cursor },
      ),
    );
    return mapPage(page, suppressionOf);
  }

  /** Takes the address off the list; false when it was not on it. */
  async remove(orgId: string, email: string): Promise<boolean> {
    const mailbox = normalizeMailbox(email);
    const gone = await this.db.run(
      (sql) => sql`DELETE FROM suppressions WHERE org_id = ${orgId} AND email = ${mailbox} RETURNING seq`,
    );
    return gone.length > 0;
  }

  /** The organization's whole list, as [mailbox, reason] pairs (the hot store's copy is rebuilt from it). */
  async all(orgId: string): Promise<[string, SuppressionReason][]> {
    const rows = await this.db.run((sql) => sql`SELECT email, reason FROM suppressions WHERE org_id = ${orgId}`);
    return rows.map((r: { email: string; reason: SuppressionReason }) => [r.email, r.reason]);
  }

  /** Which of these addresses the organization's list holds (normalised, as stored). */
  async listed(orgId: string, emails: readonly string[]): Promise<Set<string>> {
    const mailboxes = [...new Set(emails.map(normalizeMailbox))];
    if (mailboxes.length === 0) return new Set();
    const rows = await this.db.run(
      (sql) => sql`SELECT email FROM suppressions WHERE org_id = ${orgId} AND email IN ${sql(mailboxes)}`,
    );
    return new Set(rows.map((r: { email: string }) => r.email));
  }
}
