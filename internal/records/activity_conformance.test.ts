// The activity log and the hourly counts, on a SQLite file and on a PostgreSQL server this file starts.
import { describe, expect, test } from "bun:test";
import { Lane, MessageStatus } from "../gen/mailcore/limiter/v1/mail_pb";
import type { MessageHistory } from "../model/history";
import { recordDatabases, recordsWithTwoOrgs } from "../testkit/recorddbs";
import type { MessageFilter } from "./history";
import type { Records } from "./records";
import { HOUR_MS } from "./stats";

const databases = recordDatabases("activity");
const T0 = Date.UTC(2026, 10, 1, 10);

function message(orgId: string, n: number, over: Partial<MessageHistory> = {}): MessageHistory {
  const createdMs = T0 + n * 1_000;
  return {
    id: `msg_${String(n).padStart(24, "0")}`,
    orgId,
    lane: n % 2 === 0 ? Lane.TRANSACTIONAL : Lane.BULK,
    from: "A <a@a.example>",
    to: `User ${n % 3} <u${n % 3}@example.org>`,
    toMailbox: `u${n % 3}@example.org`,
    subject: `message ${n}`,
    tags: n % 4 === 0 ? ["welcome", "t2"] : [],
    status: MessageStatus.QUEUED,
    attempts: 0,
    createdMs,
    updatedMs: createdMs,
    version: 1,
    events: [{ status: MessageStatus.QUEUED, atMs: createdMs, detail: "accepted" }],
    ...over,
  };
}

/** Every page of a filtered walk, page size 3. */
async function walk(r: Records, org: string, filter: MessageFilter): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = await r.history.list(org, filter, 3, cursor);
    ids.push(...page.data.map((m) => m.id));
    if (!page.nextCursor) return ids;
    cursor = page.nextCursor;
  }
}

for (const [name, fresh] of databases) {
  describe(`activity records: ${name}`, () => {
    test("the list walks each filter newest first, exactly, and never shows another organization's", async () => {
      const { r, org, other } = await recordsWithTwoOrgs(fresh, "activity", T0);
      const mine = Array.from({ length: 20 }, (_, n) => message(org, n));
      // Same times as mine: ties are broken by id, and ties across organizations stay apart.
      await r.history.write([...mine, ...Array.from({ length: 5 }, (_, n) => message(other, 100 + n))]);
      // Two of mine move on: the status filter sees where they are now.
      await r.history.write([
        { ...mine[4]!, status: MessageStatus.DELIVERED, version: 2 },
        { ...mine[7]!, status: MessageStatus.BOUNCED, version: 2 },
      ]);
      const newestFirst = (keep: (m: MessageHistory, n: number) => boolean) =>
        mine
          .filter(keep)
          .map((m) => m.id)
          .reverse();

      expect(await walk(r, org, {})).toEqual(newestFirst(() => true));
      expect(await walk(r, org, { status: MessageStatus.DELIVERED })).toEqual([mine[4]!.id]);
      expect(await walk(r, org, { status: MessageStatus.QUEUED })).toEqual(newestFirst((_, n) => n !== 4 && n !== 7));
      expect(await walk(r, org, { lane: Lane.BULK })).toEqual(newestFirst((_, n) => n % 2 === 1));
      expect(await walk(r, org, { toMailbox: "u1@example.org" })).toEqual(newestFirst((_, n) => n % 3 === 1));
      expect(await walk(r, org, { tag: "welcome" })).toEqual(newestFirst((_, n) => n % 4 === 0));
      expect(await walk(r, org, { tag: "welcome", lane: Lane.BULK })).toEqual([]);
      expect(await walk(r, org, { afterMs: T0 + 5_000, beforeMs: T0 + 9_000 })).toEqual(
        newestFirst((_, n) => n >= 5 && n < 9),
      );
      expect(await walk(r, org, { tag: "t2", afterMs: T0 + 4_000, beforeMs: T0 + 12_000 })).toEqual(
        newestFirst((_, n) => n % 4 === 0 && n >= 4 && n < 12),
      );
      expect(await walk(r, org, { tag: "nobody" })).toEqual([]);
      const [first] = (await r.history.list(org, { tag: "welcome" }, 1)).data;
      expect(first).toMatchObject({ id: mine[16]!.id, tags: ["welcome", "t2"], subject: "message 16", events: [] });
      await r.close();
    });

    test("what comes back after delivery: last in the history, a delivered message bounced; never on one under way; an older copy written again changes nothing", async () => {
      const { r, org } = await recordsWithTwoOrgs(fresh, "after", T0);
      const queued = message(org, 1);
      const sent = message(org, 2);
      const delivered: MessageHistory = {
        ...sent,
        status: MessageStatus.DELIVERED,
        version: 2,
        events: [...sent.events, { status: MessageStatus.DELIVERED, atMs: T0 + 10_000, detail: "250 ok" }],
      };
      await r.history.write([queued, delivered]);
      const at = T0 + 60_000;
      expect(await r.history.addAfterDelivery(queued.id, at, "hard bounce 5.1.1: x", MessageStatus.BOUNCED)).toBe(
        false,
      );
      expect(await r.history.addAfterDelivery(`msg_${"f".repeat(24)}`, at, "x", MessageStatus.BOUNCED)).toBe(false);
      expect((await r.history.get(org, queued.id))!.events).toHaveLength(1);
      expect(await r.history.addAfterDelivery(sent.id, at, "hard bounce 5.1.1: x", MessageStatus.BOUNCED)).toBe(true);
      expect(await r.history.addAfterDelivery(sent.id, at + 1, "complaint (abuse) from a feedback loop")).toBe(true);
      // A second bounce does not change a message that is no longer delivered.
      expect(await r.history.addAfterDelivery(sent.id, at + 2, "soft bounce 5.2.2: y", MessageStatus.FAILED)).toBe(
        true,
      );
      // The hot store's copy of the delivered message, written again: older, it changes nothing.
      await r.history.write([delivered]);
      const m = (await r.history.get(org, sent.id))!;
      expect([m.status, m.updatedMs]).toEqual([MessageStatus.BOUNCED, at]);
      expect(m.events.slice(1)).toEqual([
        { status: MessageStatus.DELIVERED, atMs: T0 + 10_000, detail: "250 ok" },
        { status: MessageStatus.BOUNCED, atMs: at, detail: "hard bounce 5.1.1: x" },
        { status: MessageStatus.BOUNCED, atMs: at + 1, detail: "complaint (abuse) from a feedback loop" },
        { status: MessageStatus.BOUNCED, atMs: at + 2, detail: "soft bounce 5.2.2: y" },
      ]);
      await r.close();
    });

    test("the hourly counts add every new event once, and the refusals given to them", async () => {
      const { r, org, other } = await recordsWithTwoOrgs(fresh, "stats", T0);
      const a = message(org, 1);
      const deliveredAt = T0 + HOUR_MS + 5;
      const delivered: MessageHistory = {
        ...a,
        status: MessageStatus.DELIVERED,
        version: 3,
        events: [
          ...a.events,
          { status: MessageStatus.SENDING, atMs: deliveredAt - 1, detail: "leased" },
          { status: MessageStatus.DELIVERED, atMs: deliveredAt, detail: "250 ok" },
        ],
      };
      const b = message(org, 2);
      const bounced: MessageHistory = {
        ...b,
        status: MessageStatus.BOUNCED,
        version: 4,
        events: [
          ...b.events,
          { status: MessageStatus.DEFERRED, atMs: b.createdMs + 10, detail: "451" },
          { status: MessageStatus.QUEUED, atMs: b.createdMs + 20, detail: "retry" },
          { status: MessageStatus.BOUNCED, atMs: b.createdMs + 30, detail: "550" },
        ],
      };
      await r.history.write([a, b, message(other, 3)]);
      // Written again with later events: the first ones are not counted twice.
      await r.history.write([delivered, bounced]);
      await r.history.write([delivered, bounced]);
      await r.stats.add([
        { orgId: org, atMs: T0 + 7, kind: "refused_quota", n: 3 },
        { orgId: org, atMs: T0 + 8, kind: "refused_quota", n: 2 },
        { orgId: org, atMs: deliveredAt, kind: "refused_recipient", n: 1 },
      ]);
      const zero = {
        accepted: 0,
        delivered: 0,
        bounced: 0,
        failed: 0,
        deferred: 0,
        refused_quota: 0,
        refused_ip: 0,
        refused_recipient: 0,
        complained: 0,
        opened: 0,
        opened_machine: 0,
        clicked: 0,
        clicked_machine: 0,
      };
      expect(await r.stats.hours(org, T0 - HOUR_MS, T0 + 3 * HOUR_MS)).toEqual([
        { ...zero, hourStartMs: T0, accepted: 2, deferred: 1, bounced: 1, refused_quota: 5 },
        { ...zero, hourStartMs: T0 + HOUR_MS, delivered: 1, refused_recipient: 1 },
      ]);
      expect(await r.stats.hours(org, T0 + HOUR_MS, T0 + 2 * HOUR_MS)).toHaveLength(1);
      expect(await r.stats.hours(other, T0, T0 + HOUR_MS)).toEqual([{ ...zero, hourStartMs: T0, accepted: 1 }]);
      await r.close();
    });
  });
}
