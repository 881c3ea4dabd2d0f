import { type Lane, MessageStatus } from "../gen/mailcore/limiter/v1/mail_pb";
import {
  type DeliveryAttemptRecord,
  joinTags,
  type MessageEvent,
  type MessageHistory,
  splitTags,
} from "../model/history";
import { FINAL_STATUSES } from "../mail/policy";
import { chunks, type Db, num, type Sql } from "./db";
import { BY_CREATED, mapPage, newestFirst, type Order, type Page } from "./paging";
import { addStatsIn, type StatCount, type StatKind } from "./stats";

// The history of every message: its record and its events, kept for the retention period.
// The hot store writes it here in batches as messages change (see daemon/recordswriter.ts).

/** A message event written for the first time, with its message. */
export interface NewMessageEvent {
  message: MessageHistory;
  event: MessageEvent;
  /** The event's place in the message's events (0: the acceptance). */
  seq: number;
}

/** Runs in the history write's transaction with the events it wrote first (a rewrite of an event is not new). */
export type OnNewEvents = (sql: Sql, events: NewMessageEvent[]) => Promise<unknown>;

/** What a list of messages is narrowed to; every field optional. */
export interface MessageFilter {
  status?: MessageStatus;
  /** The recipient as the guards compare it (lower case, no +tag). */
  toMailbox?: string;
  tag?: string;
  lane?: Lane;
  /** Created at or after afterMs, and before beforeMs. */
  afterMs?: number;
  beforeMs?: number;
}

/** Messages newest first (BY_CREATED) walked through message_tags, whose rows carry the message's time and id. */
const BY_TAGGED: Order = { at: "t.created_ms", id: "t.message_id" };

/** The counter a message event adds to; none for a lease, or a message queued again. */
const STAT_OF_STATUS: Partial<Record<MessageStatus, StatKind>> = {
  [MessageStatus.DELIVERED]: "delivered",
  [MessageStatus.BOUNCED]: "bounced",
  [MessageStatus.FAILED]: "failed",
  [MessageStatus.DEFERRED]: "deferred",
};

function statOf({ message, event, seq }: NewMessageEvent): StatCount[] {
  const kind = event.status === MessageStatus.QUEUED && seq === 0 ? "accepted" : STAT_OF_STATUS[event.status];
  return kind ? [{ orgId: message.orgId, atMs: event.atMs, kind, n: 1 }] : [];
}

function messageOf(m: Record<string, unknown>, events: MessageEvent[]): MessageHistory {
  return {
    id: m.id as string,
    orgId: m.org_id as string,
    lane: num(m.lane) as Lane,
    from: m.from_header as string,
    to: m.to_header as string,
    toMailbox: m.to_mailbox as string,
    subject: m.subject as string,
    tags: splitTags(m.tags as string),
    status: num(m.status) as MessageStatus,
    attempts: num(m.attempts),
    createdMs: num(m.created_ms),
    updatedMs: num(m.updated_ms),
    version: num(m.version),
    events,
    ...(m.payload == null ? {} : { payload: m.payload as string }),
  };
}

/** message_events rows (in order) as a message's events. */
function eventsOf(rows: Record<string, unknown>[]): MessageEvent[] {
  return rows.map((e) => ({ status: num(e.status) as MessageStatus, atMs: num(e.at_ms), detail: e.detail as string }));
}

/** message_attempts rows (in order) as a message's tries. */
function triesOf(rows: Record<string, unknown>[]): DeliveryAttemptRecord[] {
  return rows.map((a) => ({
    atMs: num(a.at_ms),
    host: a.host as string,
    address: a.address as string,
    tls: a.tls as string,
    stage: a.stage as string,
    reply: a.reply as string,
    enhancedCode: a.enhanced_code as string,
  }));
}

export class HistoryRecords {
  constructor(private readonly db: Db) {}

  /** Writes (or brings up to date) the given messages and their events, in one transaction. */
  async write(messages: MessageHistory[], onNewEvents?: OnNewEvents): Promise<void> {
    if (messages.length === 0) return;
    const rows = messages.map((m) => ({
      // A final message needs no body any more: the records keep bodies for the backlog only.
      payload: FINAL_STATUSES.has(m.status) ? null : (m.payload ?? null),
      id: m.id,
      org_id: m.orgId,
      lane: m.lane,
      from_header: m.from,
      to_header: m.to,
      to_mailbox: m.toMailbox,
      subject: m.subject,
      tags: joinTags(m.tags),
      status: m.status,
      attempts: m.attempts,
      created_ms: m.createdMs,
      updated_ms: m.updatedMs,
      version: m.version,
    }));
    const events = messages.flatMap((m) =>
      m.events.map((e, seq) => ({ message_id: m.id, seq, status: e.status, at_ms: e.atMs, detail: e.detail })),
    );
    const tries = messages.flatMap((m) =>
      (m.deliveryAttempts ?? []).map((a, seq) => ({
        message_id: m.id,
        seq,
        at_ms: a.atMs,
        host: a.host,
        address: a.address,
        tls: a.tls,
        stage: a.stage,
        reply: a.reply,
        enhanced_code: a.enhancedCode,
      })),
    );
    await this.db.tx(async (sql) => {
      for (const part of chunks(rows)) {
        await sql`INSERT INTO messages ${sql(part)} ON CONFLICT (id) DO UPDATE SET
          status = excluded.status, attempts = excluded.attempts, updated_ms = excluded.updated_ms, version = excluded.version,
          payload = CASE WHEN excluded.status IN ${sql([...FINAL_STATUSES])} THEN NULL ELSE COALESCE(excluded.payload, messages.payload) END
          WHERE messages.version < excluded.version`;
      }
      const fresh: NewMessageEvent[] = [];
      const byId = new Map(messages.map((m) => [m.id, m]));
      for (const part of chunks(events)) {
        const written =
          await sql`INSERT INTO message_events ${sql(part)} ON CONFLICT (message_id, seq) DO NOTHING RETURNING message_id, seq`;
        for (const w of written) {
          const message = byId.get(w.message_id)!;
          const seq = num(w.seq);
          fresh.push({ message, event: message.events[seq]!, seq });
        }
      }
      for (const part of chunks(tries))
        await sql`INSERT INTO message_attempts ${sql(part)} ON CONFLICT (message_id, seq) DO NOTHING`;
      // A message whose acceptance is new here is new: its tags are listed once.
      const tagged = fresh
        .filter((f) => f.seq === 0)
        .flatMap(({ message: m }) =>
          m.tags.map((tag) => ({ message_id: m.id, org_id: m.orgId, tag, created_ms: m.createdMs })),
        );
      for (const part of chunks(tagged))
        await sql`INSERT INTO message_tags ${sql(part)} ON CONFLICT (message_id, tag) DO NOTHING`;
      await addStatsIn(sql, fresh.flatMap(statOf));
      await onNewEvents?.(sql, fresh);
    });
  }

  async get(orgId: string, id: string): Promise<MessageHistory | null> {
    return this.db.run(async (sql) => {
      // Everything but the payload, which only the reconciliation reads.
      const [m] =
        await sql`SELECT id, org_id, lane, from_header, to_header, to_mailbox, subject, tags, status, attempts,
        created_ms, updated_ms, version FROM messages WHERE id = ${id} AND org_id = ${orgId}`;
      if (!m) return null;
      const events = await sql`SELECT status, at_ms, detail FROM message_events WHERE message_id = ${id} ORDER BY seq`;
      const tries =
        await sql`SELECT at_ms, host, address, tls, stage, reply, enhanced_code FROM message_attempts WHERE message_id = ${id} ORDER BY seq`;
      return { ...messageOf(m, eventsOf(events)), deliveryAttempts: triesOf(tries) };
    });
  }

  /**
   * The organization and recipient of a message, whichever organization it is of: for tying what
   * comes back after delivery (a bounce, a complaint) to its message. Undefined when there is none.
   */
  async recipientOf(
    id: string,
  ): Promise<{ orgId: string; toMailbox: string; deliveredMs: number | undefined } | undefined> {
    const [m] = await this.db.run(
      (sql) => sql`SELECT org_id, to_mailbox,
        (SELECT MIN(at_ms) FROM message_events WHERE message_id = ${id} AND status = ${MessageStatus.DELIVERED}) AS delivered_ms
        FROM messages WHERE id = ${id}`,
    );
    return m
      ? {
          orgId: m.org_id as string,
          toMailbox: m.to_mailbox as string,
          deliveredMs: m.delivered_ms === null ? undefined : num(m.delivered_ms),
        }
      : undefined;
  }

  /**
   * What came back about a message after its delivery (a bounce by DSN, a complaint), added to
   * its history: an event after the others, with the status it makes of a delivered message (a
   * DSN after a 250: bounced or failed) or, without one, the message's status as it is. Only on a
   * message the records hold as final: one still under way is the hot store's, whose writes would
   * overwrite the change; false then, and nothing is written.
   */
  async addAfterDelivery(id: string, atMs: number, detail: string, status?: MessageStatus): Promise<boolean> {
    return this.db.tx(async (sql) => {
      const [m] = await sql`SELECT status FROM messages WHERE id = ${id}`;
      const was = m ? (num(m.status) as MessageStatus) : undefined;
      if (was === undefined || !FINAL_STATUSES.has(was)) return false;
      const becomes = status !== undefined && was === MessageStatus.DELIVERED ? status : was;
      const [last] = await sql`SELECT COALESCE(MAX(seq) + 1, 0) AS seq FROM message_events WHERE message_id = ${id}`;
      await sql`INSERT INTO message_events ${sql({ message_id: id, seq: num(last.seq), status: becomes, at_ms: atMs, detail })}`;
      // The version grows: a copy the hot store still has of the delivered message never overwrites the change.
      if (becomes !== was)
        await sql`UPDATE messages SET status = ${becomes}, updated_ms = ${atMs}, version = version + 1 WHERE id = ${id}`;
      return true;
    });
  }

  /** The messages not yet final with ids after afterId, in id order, at most limit: the reconciliation's walk. */
  async unfinishedAfter(afterId: string, limit: number): Promise<{ orgId: string; id: string }[]> {
    return this.db.run(async (sql) => {
      const rows =
        await sql`SELECT id, org_id FROM messages WHERE payload IS NOT NULL AND id > ${afterId} ORDER BY id LIMIT ${limit}`;
      return rows.map((r: { id: string; org_id: string }) => ({ orgId: r.org_id, id: r.id }));
    });
  }

  /** The version the records hold of each of the given messages they have, and whether it is final. */
  async versions(ids: string[]): Promise<Map<string, { version: number; final: boolean }>> {
    if (ids.length === 0) return new Map();
    return this.db.run(async (sql) => {
      const rows = await sql`SELECT id, version, status FROM messages WHERE id IN ${sql(ids)}`;
      return new Map(
        rows.map((r: Record<string, unknown>) => [
          r.id as string,
          { version: num(r.version), final: FINAL_STATUSES.has(num(r.status) as MessageStatus) },
        ]),
      );
    });
  }

  /** Those of the given messages that are not yet final, with their events and payload: what rebuilds them. */
  async unfinished(ids: string[]): Promise<MessageHistory[]> {
    if (ids.length === 0) return [];
    return this.db.run(async (sql) => {
      const rows = await sql`SELECT * FROM messages WHERE payload IS NOT NULL AND id IN ${sql(ids)} ORDER BY id`;
      if (rows.length === 0) return [];
      const found = rows.map((r: { id: string }) => r.id);
      const events =
        await sql`SELECT message_id, status, at_ms, detail FROM message_events WHERE message_id IN ${sql(found)} ORDER BY message_id, seq`;
      const byId = Map.groupBy(events as Record<string, unknown>[], (e) => e.message_id as string);
      // The tries too: a message put back in the hot store goes on numbering them after these.
      const tries =
        await sql`SELECT message_id, at_ms, host, address, tls, stage, reply, enhanced_code FROM message_attempts WHERE message_id IN ${sql(found)} ORDER BY message_id, seq`;
      const triesById = Map.groupBy(tries as Record<string, unknown>[], (a) => a.message_id as string);
      return rows.map((m: Record<string, unknown>) => ({
        ...messageOf(m, eventsOf(byId.get(m.id as string) ?? [])),
        deliveryAttempts: triesOf(triesById.get(m.id as string) ?? []),
      }));
    });
  }

  /**
   * A page of the organization's messages, newest first, without their events. Each filter
   * narrows an index walk: by tag message_tags (org_id, tag, created_ms, message_id), else
   * messages by (org_id, to_mailbox | status | lane, created_ms, id), else (org_id, created_ms, id).
   */
  // Every column but the payload (up to 1 MB for a message not yet final), which a list never shows.
  async list(orgId: string, filter: MessageFilter, limit: number, cursor?: string): Promise<Page<MessageHistory>> {
    const page = await this.db.run(async (sql) => {
      let select =
        filter.tag === undefined
          ? sql`SELECT m.id, m.org_id, m.lane, m.from_header, m.to_header, m.to_mailbox, m.subject, m.tags, m.status, m.attempts, m.created_ms, m.updated_ms, m.version FROM messages m WHERE m.org_id = ${orgId}`
          : sql`SELECT m.id, m.org_id, m.lane, m.from_header, m.to_header, m.to_mailbox, m.subject, m.tags, m.status, m.attempts, m.created_ms, m.updated_ms, m.version, t.message_id FROM message_tags t JOIN messages m ON m.id = t.message_id
              WHERE t.org_id = ${orgId} AND t.tag = ${filter.tag}`;
      if (filter.status !== undefined) select = sql`${select} AND m.status = ${filter.status}`;
      if (filter.toMailbox !== undefined) select = sql`${select} AND m.to_mailbox = ${filter.toMailbox}`;
      if (filter.lane !== undefined) select = sql`${select} AND m.lane = ${filter.lane}`;
      const at = filter.tag === undefined ? sql`m.created_ms` : sql`t.created_ms`;
      if (filter.afterMs !== undefined) select = sql`${select} AND ${at} >= ${filter.afterMs}`;
      return newestFirst<Record<string, unknown>>(sql, select, filter.tag === undefined ? BY_CREATED : BY_TAGGED, {
        limit,
        cursor,
        below: filter.beforeMs,
      });
    });
    return mapPage(page, (m) => messageOf(m, []));
  }

  /**
   * Deletes up to limit finished messages last changed before beforeMs, with their events;
   * returns how many. Called in a loop, it deletes in batches without long locks.
   */
  async deleteFinishedBefore(beforeMs: number, limit: number): Promise<number> {
    return this.db.tx(async (sql) => {
      const ids = (
        await sql`SELECT id FROM messages WHERE updated_ms < ${beforeMs} AND status IN ${sql([...FINAL_STATUSES])} ORDER BY updated_ms LIMIT ${limit}`
      ).map((r: { id: string }) => r.id);
      if (ids.length === 0) return 0;
      await sql`DELETE FROM message_events WHERE message_id IN ${sql(ids)}`;
      await sql`DELETE FROM message_attempts WHERE message_id IN ${sql(ids)}`;
      await sql`DELETE FROM message_tags WHERE message_id IN ${sql(ids)}`;
      await sql`DELETE FROM messages WHERE id IN ${sql(ids)}`;
      return ids.length;
    });
  }
}
