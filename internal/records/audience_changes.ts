import { type EventRow, type EventType, eventRow, type Subscriber, type SubscriberChange } from "./audience_types";
import { chunks, type Sql } from "./db";
import type { WebhookEventInput } from "./webhook_deliveries";
import { startWorkflowRuns } from "./workflows";

// How a change of subscribers is worked out and written: each change is compared, in memory,
// with the subscriber as the transaction last left it (so a batch of a thousand is a handful
// of multi-row statements), and what differs from the rows as they were read is written at
// the end, with the events in the order the changes were made.

/** Hands webhook events to the webhooks inside the caller's transaction. */
export type Announce = (sql: Sql, events: WebhookEventInput[], nowMs: number) => Promise<unknown>;

/** A subscriber as a webhook's data: the API's JSON of it. */
export function subscriberJson(s: Subscriber) {
  return {
    id: s.id,
    email: s.email,
    name: s.name,
    status: s.status,
    fields: s.fields,
    tags: s.tags,
    createdAt: new Date(s.createdMs).toISOString(),
    updatedAt: new Date(s.updatedMs).toISOString(),
  };
}

/**
 * The webhook events of one subscriber's changes in a transaction: subscriber.created for a new
 * one; otherwise subscriber.updated for any change but an unsubscription alone, and
 * subscriber.unsubscribed for that. Each with the subscriber as the transaction leaves it.
 */
function webhookEvents(orgId: string, s: Subscriber, types: Set<EventType>, nowMs: number): WebhookEventInput[] {
  const event = (type: string) => ({ orgId, type, atMs: nowMs, data: subscriberJson(s) });
  if (types.has("subscriber.created")) return [event("subscriber.created")];
  const out: WebhookEventInput[] = [];
  if ([...types].some((t) => t !== "subscriber.unsubscribed")) out.push(event("subscriber.updated"));
  if (types.has("subscriber.unsubscribed")) out.push(event("subscriber.unsubscribed"));
  return out;
}

/** A subscriber after a change, and the change's events; undefined when nothing would change. */
export function diff(
  current: Subscriber,
  change: SubscriberChange,
  nowMs: number,
): { next: Subscriber; events: EventRow[] } | undefined {
  const changed: string[] = [];
  const name = change.name ?? current.name;
  if (name !== current.name) changed.push("name");
  const fields = { ...current.fields, ...change.fields };
  for (const key of Object.keys(change.fields ?? {}))
    if (fields[key] !== current.fields[key]) changed.push(`fields.${key}`);

  let status = current.status;
  let statusEvent: EventType | undefined;
  if (change.status === "unsubscribed" && current.status === "subscribed") {
    status = "unsubscribed";
    statusEvent = "subscriber.unsubscribed";
  } else if (change.resubscribe && change.status !== "unsubscribed" && current.status === "unsubscribed") {
    status = "subscribed";
    statusEvent = "subscriber.resubscribed";
  }

  const have = new Set(current.tags);
  const given = new Set(change.tags ?? []);
  const added = [...given].filter((t) => !have.has(t)).sort();
  const dropped = new Set(change.removeTags ?? []);
  if (change.replaceTags && change.tags !== undefined) for (const t of have) if (!given.has(t)) dropped.add(t);
  const removed = current.tags.filter((t) => dropped.has(t) && !given.has(t));

  if (changed.length === 0 && !statusEvent && added.length === 0 && removed.length === 0) return undefined;
  const id = current.id;
  const trigger = change.triggerWorkflows;
  return {
    next: {
      ...current,
      name,
      fields,
      status,
      tags: [...current.tags.filter((t) => !removed.includes(t)), ...added].sort(),
      updatedMs: nowMs,
    },
    events: [
      ...(changed.length > 0 ? [eventRow(id, "subscriber.updated", nowMs, { changed }, trigger)] : []),
      ...(statusEvent ? [eventRow(id, statusEvent, nowMs, {}, trigger)] : []),
      ...added.map((tag) => eventRow(id, "tag.added", nowMs, { tag }, trigger)),
      ...removed.map((tag) => eventRow(id, "tag.removed", nowMs, { tag }, trigger)),
    ],
  };
}

/** The changes of one transaction: subscribers as read (and locked), as changed, and the events. */
export class Changes {
  /** By id: the subscriber as its row and tags are in the database now, and its seq. */
  private readonly stored = new Map<string, Subscriber>();
  private readonly seqs = new Map<string, number>();
  /** By id: the subscriber after the changes so far. */
  private readonly latest = new Map<string, Subscriber>();
  private readonly events: EventRow[] = [];

  constructor(private readonly orgId: string) {}

  /** A subscriber as read from the database (its row is locked by the read). */
  read(s: Subscriber, seq: number): void {
    this.stored.set(s.id, s);
    this.seqs.set(s.id, seq);
    this.latest.set(s.id, s);
  }

  /** The subscriber after the changes so far. */
  current(id: string): Subscriber {
    return this.latest.get(id)!;
  }

  /** Records a change: the subscriber's new state and its events. */
  changed(next: Subscriber, events: EventRow[]): void {
    this.latest.set(next.id, next);
    this.events.push(...events);
  }

  /** Writes what differs from what was read, then the events, and announces them. */
  async write(sql: Sql, nowMs: number, announce: Announce): Promise<void> {
    const addedTags: { subscriber_id: string; org_id: string; tag: string; subscriber_seq: number }[] = [];
    /** By tag: subscribers that have it now less those that had it. */
    const counts = new Map<string, number>();
    const count = (tag: string, by: number) => counts.set(tag, (counts.get(tag) ?? 0) + by);
    for (const [id, now] of this.latest) {
      const was = this.stored.get(id)!;
      if (
        now.name !== was.name ||
        now.status !== was.status ||
        now.updatedMs !== was.updatedMs ||
        JSON.stringify(now.fields) !== JSON.stringify(was.fields)
      ) {
        await sql`UPDATE subscribers SET name = ${now.name}, status = ${now.status}, fields = ${JSON.stringify(now.fields)}, updated_ms = ${now.updatedMs} WHERE id = ${id}`;
      }
      const removed = was.tags.filter((t) => !now.tags.includes(t));
      if (removed.length > 0)
        await sql`DELETE FROM subscriber_tags WHERE subscriber_id = ${id} AND tag IN ${sql(removed)}`;
      for (const tag of removed) count(tag, -1);
      for (const tag of now.tags) {
        if (was.tags.includes(tag)) continue;
        addedTags.push({ subscriber_id: id, org_id: this.orgId, tag, subscriber_seq: this.seqs.get(id)! });
        count(tag, 1);
      }
    }
    const names = [...counts.keys()].filter((t) => counts.get(t)! > 0);
    for (const part of chunks(names)) {
      await sql`INSERT INTO tags ${sql(part.map((name) => ({ org_id: this.orgId, name, created_ms: nowMs })))} ON CONFLICT (org_id, name) DO NOTHING`;
    }
    for (const part of chunks(addedTags)) await sql`INSERT INTO subscriber_tags ${sql(part)}`;
    await adjustTagCounts(sql, this.orgId, counts);
    for (const part of chunks(this.events)) await sql`INSERT INTO subscriber_events ${sql(part)}`;
    const types = new Map<string, Set<EventType>>();
    for (const e of this.events)
      (types.get(e.subscriber_id) ?? types.set(e.subscriber_id, new Set()).get(e.subscriber_id)!).add(e.type);
    await announce(
      sql,
      [...types].flatMap(([id, t]) => webhookEvents(this.orgId, this.latest.get(id)!, t, nowMs)),
      nowMs,
    );
    await startWorkflowRuns(sql, this.orgId, this.events, nowMs);
  }
}

/** Adds each tag's change to its subscriber count, in name order (two transactions lock tags in the same order). */
export async function adjustTagCounts(sql: Sql, orgId: string, counts: Map<string, number>): Promise<void> {
  for (const tag of [...counts.keys()].sort()) {
    const by = counts.get(tag)!;
    if (by !== 0)
      await sql`UPDATE tags SET subscribers = subscribers + ${by} WHERE org_id = ${orgId} AND name = ${tag}`;
  }
}
