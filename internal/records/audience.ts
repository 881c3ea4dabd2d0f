import { MessageStatus } from "../gen/mailcore/limiter/v1/mail_pb";
import { fixtureKind, normalizeEmail } from "../mail/policy";
import { adjustTagCounts, type Announce, Changes, diff } from "./audience_changes";
import {
  type EventRow,
  type EventType,
  eventRow,
  type Fields,
  type Subscriber,
  type SubscriberChange,
  type SubscriberStatus,
} from "./audience_types";
import { chunks, type Db, num, type Sql, timeOrderedId } from "./db";
import type { MessageHistory } from "../model/history";
import { BY_SEQ, mapPage, newestFirst, type Order, type Page } from "./paging";

// The audience: subscribers (one per email and organization), their fields and tags, the
// organization's tags, and every subscriber's events. Upserts compare old and new so that a
// repeated identical upsert writes nothing and records no event.

export interface UpsertInput extends SubscriberChange {
  email: string;
}

export type UpsertOutcome = "created" | "updated" | "unchanged";

export interface UpsertResult {
  result: UpsertOutcome;
  subscriber: Subscriber;
}

export interface SubscriberEvent {
  type: EventType;
  atMs: number;
  data: Record<string, unknown>;
  triggerWorkflows: boolean;
}

export interface SubscriberFilter {
  tag?: string;
  status?: SubscriberStatus;
  /** A prefix of the (lower-case) email. */
  emailPrefix?: string;
}

export interface TagCount {
  name: string;
  subscribers: number;
}

/** The message statuses that are events of the recipient's subscriber. */
const EMAIL_EVENTS: Partial<Record<MessageStatus, EventType>> = {
  [MessageStatus.QUEUED]: "email.queued",
  [MessageStatus.DELIVERED]: "email.delivered",
  [MessageStatus.BOUNCED]: "email.bounced",
};

/** By tag: along the tag's index, whose subscriber_seq is the subscriber's seq. */
const BY_TAG_SEQ: Order = { at: "t.subscriber_seq" };

interface SubscriberRow {
  seq: unknown;
  id: string;
  email: string;
  name: string;
  status: string;
  fields: string;
  created_ms: unknown;
  updated_ms: unknown;
}

function fromRow(r: SubscriberRow, tags: string[]): Subscriber {
  return {
    id: r.id,
    email: r.email,
    name: r.name,
    status: r.status as SubscriberStatus,
    fields: JSON.parse(r.fields) as Fields,
    tags,
    createdMs: num(r.created_ms),
    updatedMs: num(r.updated_ms),
  };
}

/** Told, after the commit, that an organization's tags or their subscriber counts may have changed. */
export type TagsChanged = (orgId: string) => Promise<void>;

export class AudienceRecords {
  /** Set by the daemon (daemon.ts): the admission service's tag cache is invalidated through the hot store. */
  tagsChanged: TagsChanged = async () => {};

  constructor(
    private readonly db: Db,
    /** Hands the subscriber.* webhook events of a change to the webhooks, in its transaction. */
    private readonly announce: Announce,
  ) {}

  /** Runs a write, then tells tagsChanged when `changed` says the committed result changed anything. */
  private async thenTell<T>(orgId: string, write: Promise<T>, changed: (result: T) => boolean): Promise<T> {
    const result = await write;
    if (changed(result)) await this.db.afterCommit(() => this.tagsChanged(orgId));
    return result;
  }

  /** Creates or updates the subscriber with input's email. */
  async upsert(orgId: string, input: UpsertInput, nowMs: number): Promise<UpsertResult> {
    return (await this.upsertMany(orgId, [input], nowMs))[0]!;
  }

  /**
   * Upserts in one transaction, in order (a later item sees an earlier one of the same email).
   * Every subscriber of the batch is created or locked by one statement per 500 first, so
   * concurrent upserts of one email make one subscriber and never lose a change.
   */
  upsertMany(orgId: string, inputs: UpsertInput[], nowMs: number): Promise<UpsertResult[]> {
    return this.thenTell(orgId, this.upsertManyTx(orgId, inputs, nowMs), (rs) =>
      rs.some((r) => r.result !== "unchanged"),
    );
  }

  private upsertManyTx(orgId: string, inputs: UpsertInput[], nowMs: number): Promise<UpsertResult[]> {
    return this.db.tx(async (sql) => {
      const changes = new Changes(orgId);
      const { ids, created } = await createOrLock(sql, orgId, inputs, nowMs, changes);
      const results = inputs.map((input): UpsertResult => {
        const id = ids.get(normalizeEmail(input.email))!;
        const current = changes.current(id);
        if (created.delete(id)) {
          const tags = [...new Set(input.tags ?? [])].sort();
          const next = { ...current, tags };
          const trigger = input.triggerWorkflows;
          changes.changed(next, [
            eventRow(id, "subscriber.created", nowMs, { email: current.email, status: current.status }, trigger),
            ...tags.map((tag) => eventRow(id, "tag.added", nowMs, { tag }, trigger)),
          ]);
          return { result: "created", subscriber: next };
        }
        const d = diff(current, input, nowMs);
        if (!d) return { result: "unchanged", subscriber: current };
        changes.changed(d.next, d.events);
        return { result: "updated", subscriber: d.next };
      });
      await changes.write(sql, nowMs, this.announce);
      return results;
    });
  }

  /** A partial update of the subscriber ref names (an id, or an email); undefined when there is none. */
  update(orgId: string, ref: string, change: SubscriberChange, nowMs: number): Promise<UpsertResult | undefined> {
    const write = this.db.tx(async (sql): Promise<UpsertResult | undefined> => {
      const found = await find(sql, orgId, ref, { lock: true });
      if (!found) return undefined;
      const current = found.subscriber;
      const d = diff(current, change, nowMs);
      if (!d) return { result: "unchanged", subscriber: current };
      const changes = new Changes(orgId);
      changes.read(current, found.seq);
      changes.changed(d.next, d.events);
      await changes.write(sql, nowMs, this.announce);
      return { result: "updated", subscriber: d.next };
    });
    return this.thenTell(orgId, write, (r) => r !== undefined && r.result !== "unchanged");
  }

  get(orgId: string, ref: string): Promise<Subscriber | undefined> {
    return this.db.run(async (sql) => (await find(sql, orgId, ref))?.subscriber);
  }

  /** Deletes a subscriber with its tags and events; false when there is none. */
  delete(orgId: string, ref: string, nowMs: number): Promise<boolean> {
    const write = this.db.tx(async (sql) => {
      const current = (await find(sql, orgId, ref, { lock: true }))?.subscriber;
      if (!current) return false;
      await sql`DELETE FROM subscriber_tags WHERE subscriber_id = ${current.id}`;
      await adjustTagCounts(sql, orgId, new Map(current.tags.map((t) => [t, -1])));
      await sql`DELETE FROM subscriber_events WHERE subscriber_id = ${current.id}`;
      await sql`DELETE FROM subscribers WHERE id = ${current.id}`;
      await this.announce(
        sql,
        [{ orgId, type: "subscriber.deleted", atMs: nowMs, data: { id: current.id, email: current.email } }],
        nowMs,
      );
      return true;
    });
    return this.thenTell(orgId, write, (deleted) => deleted);
  }

  /** Newest first; a walk by cursor neither skips nor repeats a row while rows are added. */
  list(orgId: string, filter: SubscriberFilter, limit: number, cursor?: string): Promise<Page<Subscriber>> {
    const status = filter.status ?? "";
    const tag = filter.tag ?? "";
    const prefix =
      filter.emailPrefix === undefined
        ? ""
        : `${normalizeEmail(filter.emailPrefix).replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
    return this.db.run(async (sql) => {
      // By tag: newest first along the tag's index; otherwise along the organization's.
      const page = tag
        ? await newestFirst<SubscriberRow>(
            sql,
            sql`SELECT s.*, t.subscriber_seq FROM subscriber_tags t JOIN subscribers s ON s.id = t.subscriber_id
              WHERE t.org_id = ${orgId} AND t.tag = ${tag}
                AND (${status} = '' OR s.status = ${status})
                AND (${prefix} = '' OR s.email LIKE ${prefix} ESCAPE '\\')`,
            BY_TAG_SEQ,
            { limit, cursor },
          )
        : await newestFirst<SubscriberRow>(
            sql,
            sql`SELECT * FROM subscribers
              WHERE org_id = ${orgId}
                AND (${status} = '' OR status = ${status})
                AND (${prefix} = '' OR email LIKE ${prefix} ESCAPE '\\')`,
            BY_SEQ,
            { limit, cursor },
          );
      const tags = await tagsOfSubscribers(
        sql,
        page.data.map((r) => r.id),
      );
      return mapPage(page, (r) => fromRow(r, tags.get(r.id) ?? []));
    });
  }

  /** The subscriber's events, newest first; undefined when there is no such subscriber. */
  events(orgId: string, ref: string, limit: number, cursor?: string): Promise<Page<SubscriberEvent> | undefined> {
    return this.db.run(async (sql) => {
      const current = (await find(sql, orgId, ref))?.subscriber;
      if (!current) return undefined;
      const page = await newestFirst<{
        type: EventType;
        at_ms: unknown;
        data: string;
        trigger_workflows: unknown;
      }>(
        sql,
        sql`SELECT seq, type, at_ms, data, trigger_workflows FROM subscriber_events WHERE subscriber_id = ${current.id}`,
        BY_SEQ,
        { limit, cursor },
      );
      return mapPage(page, (e) => ({
        type: e.type,
        atMs: num(e.at_ms),
        data: JSON.parse(e.data),
        triggerWorkflows: num(e.trigger_workflows) === 1,
      }));
    });
  }

  /** Creates a tag; false when the organization has it already. */
  async createTag(orgId: string, name: string, nowMs: number): Promise<boolean> {
    const write = this.db.run(
      (sql) =>
        sql`INSERT INTO tags (org_id, name, created_ms) VALUES (${orgId}, ${name}, ${nowMs}) ON CONFLICT (org_id, name) DO NOTHING RETURNING name`,
    );
    return this.thenTell(
      orgId,
      write.then((rows) => rows.length === 1),
      (created) => created,
    );
  }

  /** Deletes a tag and takes it off every subscriber; false when there is no such tag. */
  deleteTag(orgId: string, name: string): Promise<boolean> {
    const write = this.db.tx(async (sql) => {
      const rows = await sql`DELETE FROM tags WHERE org_id = ${orgId} AND name = ${name} RETURNING name`;
      await sql`DELETE FROM subscriber_tags WHERE org_id = ${orgId} AND tag = ${name}`;
      return rows.length === 1;
    });
    return this.thenTell(orgId, write, (deleted) => deleted);
  }

  /** The tags of several organizations with their subscriber counts, in one query (admissions that carry GET /api/v1/tags). */
  async tagCounts(orgIds: string[]): Promise<Map<string, TagCount[]>> {
    const unique = [...new Set(orgIds)];
    const counts = new Map<string, TagCount[]>(unique.map((id) => [id, []]));
    if (unique.length === 0) return counts;
    const rows = await this.db.run(
      (sql) => sql`SELECT org_id, name, subscribers FROM tags WHERE org_id IN ${sql(unique)} ORDER BY org_id, name`,
    );
    for (const r of rows as { org_id: string; name: string; subscribers: unknown }[])
      counts.get(r.org_id)!.push({ name: r.name, subscribers: num(r.subscribers) });
    return counts;
  }

  /**
   * Records the queued, delivered, bounced (and complained) events of messages as events of the
   * subscriber with the recipient's address (once each, however often a message is written).
   */
  async recordMessageEvents(messages: MessageHistory[]): Promise<void> {
    const wanted = messages.flatMap((m) => {
      const email = recipientAddress(m.to);
      // The only complaints there are: the test-mode fixture address that is delivered and complains.
      const complains = fixtureKind(email) === "complained";
      return m.events.flatMap((e) => {
        const type = EMAIL_EVENTS[e.status];
        if (!type) return [];
        const event = { m, type, atMs: e.atMs, email };
        return type === "email.delivered" && complains
          ? [event, { ...event, type: "email.complained" as const }]
          : [event];
      });
    });
    if (wanted.length === 0) return;
    await this.db.tx(async (sql) => {
      // By organization, so that each lookup is a walk of the (org_id, email) index.
      const ids = new Map<string, string>();
      for (const orgId of new Set(wanted.map((w) => w.m.orgId))) {
        const emails = [...new Set(wanted.filter((w) => w.m.orgId === orgId).map((w) => w.email))];
        for (const part of chunks(emails)) {
          const found = await sql`SELECT id, email FROM subscribers WHERE org_id = ${orgId} AND email IN ${sql(part)}`;
          for (const r of found as { id: string; email: string }[]) ids.set(`${orgId} ${r.email}`, r.id);
        }
      }
      // The first event of each type per message (a message is queued again when released).
      const rows = new Map<string, EventRow>();
      for (const { m, type, atMs, email } of wanted) {
        const id = ids.get(`${m.orgId} ${email}`);
        const dedupe = `${m.id}:${type}`;
        if (id && !rows.has(dedupe))
          rows.set(dedupe, eventRow(id, type, atMs, { messageId: m.id, subject: m.subject }, false, dedupe));
      }
      if (rows.size > 0)
        await sql`INSERT INTO subscriber_events ${sql([...rows.values()])} ON CONFLICT (subscriber_id, dedupe) WHERE dedupe IS NOT NULL DO NOTHING`;
    });
  }
}

/** The bare address of a To header ("Name <a@b>" or "a@b"), as subscribers are compared. */
function recipientAddress(to: string): string {
  return normalizeEmail(/<([^>]*)>\s*$/.exec(to)?.[1] ?? to);
}

async function tagsOfSubscribers(sql: Sql, ids: string[]): Promise<Map<string, string[]>> {
  const tags = new Map<string, string[]>();
  if (ids.length === 0) return tags;
  const rows = [];
  for (const part of chunks(ids))
    rows.push(
      ...(await sql`SELECT subscriber_id, tag FROM subscriber_tags WHERE subscriber_id IN ${sql(part)} ORDER BY tag`),
    );
  for (const r of rows as { subscriber_id: string; tag: string }[]) {
    const list = tags.get(r.subscriber_id);
    if (list) list.push(r.tag);
    else tags.set(r.subscriber_id, [r.tag]);
  }
  return tags;
}

/**
 * The subscriber ref names: an email when it has an @, otherwise an id. With lock, the row is
 * locked until the transaction ends (a no-op update: the same SQL in both dialects).
 */
async function find(
  sql: Sql,
  orgId: string,
  ref: string,
  o: { lock?: boolean } = {},
): Promise<{ subscriber: Subscriber; seq: number } | undefined> {
  const byEmail = ref.includes("@");
  const email = normalizeEmail(ref);
  const [row] = (
    o.lock
      ? byEmail
        ? await sql`UPDATE subscribers SET email = email WHERE org_id = ${orgId} AND email = ${email} RETURNING *`
        : await sql`UPDATE subscribers SET email = email WHERE org_id = ${orgId} AND id = ${ref} RETURNING *`
      : byEmail
        ? await sql`SELECT * FROM subscribers WHERE org_id = ${orgId} AND email = ${email}`
        : await sql`SELECT * FROM subscribers WHERE org_id = ${orgId} AND id = ${ref}`
  ) as SubscriberRow[];
  if (!row) return undefined;
  return { subscriber: fromRow(row, (await tagsOfSubscribers(sql, [row.id])).get(row.id) ?? []), seq: num(row.seq) };
}

/**
 * Creates the subscribers of a batch that are missing and locks the others, in email order
 * (two batches lock in the same order), reading them into changes. Returns every email's id
 * and the ids created.
 */
async function createOrLock(
  sql: Sql,
  orgId: string,
  inputs: UpsertInput[],
  nowMs: number,
  changes: Changes,
): Promise<{ ids: Map<string, string>; created: Set<string> }> {
  const firsts = new Map<string, UpsertInput>();
  for (const input of inputs) {
    const email = normalizeEmail(input.email);
    if (!firsts.has(email)) firsts.set(email, input);
  }
  const fresh = [...firsts.keys()].sort().map((email) => {
    const input = firsts.get(email)!;
    const status: SubscriberStatus = input.status ?? "subscribed";
    return {
      id: timeOrderedId("sub"),
      org_id: orgId,
      email,
      name: input.name ?? "",
      status,
      fields: JSON.stringify(input.fields ?? {}),
      created_ms: nowMs,
      updated_ms: nowMs,
    };
  });
  const rows: SubscriberRow[] = [];
  for (const part of chunks(fresh)) {
    rows.push(
      ...((await sql`INSERT INTO subscribers ${sql(part)} ON CONFLICT (org_id, email) DO UPDATE SET email = excluded.email RETURNING *`) as SubscriberRow[]),
    );
  }
  const freshIds = new Set(fresh.map((f) => f.id));
  const tags = await tagsOfSubscribers(
    sql,
    rows.filter((r) => !freshIds.has(r.id)).map((r) => r.id),
  );
  for (const r of rows) changes.read(fromRow(r, tags.get(r.id) ?? []), num(r.seq));
  return {
    ids: new Map(rows.map((r) => [r.email, r.id])),
    created: new Set(rows.filter((r) => freshIds.has(r.id)).map((r) => r.id)),
  };
}
