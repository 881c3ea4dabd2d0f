import { normalizeMailbox } from "../mail/policy";
import type { SuppressionReason } from "../mail/suppression";
import { type Db, num, type Sql } from "./db";
import { BY_SEQ, mapPage, newestFirst, type Page } from "./paging";

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

export class SuppressionRecords {
  constructor(private readonly db: Db) {}

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

  /** Why the organization's list holds the address; undefined when it does not. */
  async reasonOf(orgId: string, email: string): Promise<SuppressionReason | undefined> {
    const mailbox = normalizeMailbox(email);
    const [row] = await this.db.run(
      (sql) => sql`SELECT reason FROM suppressions WHERE org_id = ${orgId} AND email = ${mailbox}`,
    );
    return (row?.reason as SuppressionReason | undefined) ?? undefined;
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
