// The audience records, one suite on a SQLite file and on a PostgreSQL server this file starts.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Plan } from "../gen/mailcore/limiter/v1/limiter_pb";
import { Lane, MessageStatus } from "../gen/mailcore/limiter/v1/mail_pb";
import { recordDatabases, recordsWithTwoOrgs } from "../testkit/recorddbs";
import type { UpsertInput } from "./audience";
import type { MessageHistory } from "../model/history";
import type { Records } from "./records";

const databases = recordDatabases("audience");

const T0 = Date.UTC(2026, 10, 1);
const upsert = (email: string, over: Partial<UpsertInput> = {}): UpsertInput => ({
  email,
  triggerWorkflows: true,
  ...over,
});

for (const [name, fresh] of databases) {
  describe(`audience records: ${name}`, () => {
    let r: Records;
    let org: string;
    let other: string;
    beforeAll(async () => {
      ({ r, org, other } = await recordsWithTwoOrgs(fresh, "aud", T0));
    });
    afterAll(async () => {
      await r?.close();
    });
    const types = async (ref: string, o = org) => (await r.audience.events(o, ref, 100))!.data.map((e) => e.type);

    test("upsert: created, then compared trimmed and lower-cased; an identical upsert changes nothing and records nothing", async () => {
      const made = await r.audience.upsert(
        org,
        upsert("  Ann@Example.COM ", { name: "Ann", fields: { plan: "pro", seats: 3 }, tags: ["vip", "beta"] }),
        T0,
      );
      expect(made.result).toBe("created");
      expect(made.subscriber).toEqual({
        id: expect.stringMatching(/^sub_[0-9a-f]{24}$/),
        email: "ann@example.com",
        name: "Ann",
        status: "subscribed",
        fields: { plan: "pro", seats: 3 },
        tags: ["beta", "vip"],
        createdMs: T0,
        updatedMs: T0,
      });
      expect(await types(made.subscriber.id)).toEqual(["tag.added", "tag.added", "subscriber.created"]);
      const again = await r.audience.upsert(
        org,
        upsert("ann@example.com", { name: "Ann", fields: { seats: 3 }, tags: ["vip"] }),
        T0 + 5,
      );
      expect(again).toEqual({ result: "unchanged", subscriber: made.subscriber });
      expect(await types("ANN@example.com")).toHaveLength(3);
      const changed = await r.audience.upsert(
        org,
        upsert("ann@example.com", { name: "Ann B", fields: { seats: 4, extra: null } }),
        T0 + 10,
      );
      expect(changed.result).toBe("updated");
      expect(changed.subscriber).toMatchObject({
        name: "Ann B",
        fields: { plan: "pro", seats: 4, extra: null },
        tags: ["beta", "vip"],
        createdMs: T0,
        updatedMs: T0 + 10,
      });
      const [updated] = (await r.audience.events(org, made.subscriber.id, 1))!.data;
      expect(updated).toEqual({
        type: "subscriber.updated",
        atMs: T0 + 10,
        data: { changed: ["name", "fields.seats", "fields.extra"] },
        triggerWorkflows: true,
      });
      expect(await r.audience.get(org, made.subscriber.id)).toEqual(changed.subscriber);
    });

    test("tags: added by default, replaced with replaceTags, created in the organization, counted", async () => {
      const s = (await r.audience.upsert(org, upsert("tags@example.com", { tags: ["a", "b"] }), T0)).subscriber;
      expect(
        (await r.audience.upsert(org, upsert("tags@example.com", { tags: ["c"] }), T0 + 1)).subscriber.tags,
      ).toEqual(["a", "b", "c"]);
      const replaced = await r.audience.upsert(
        org,
        upsert("tags@example.com", { tags: ["c", "d"], replaceTags: true }),
        T0 + 2,
      );
      expect(replaced.subscriber.tags).toEqual(["c", "d"]);
      expect((await types(s.id)).slice(0, 3).sort()).toEqual(["tag.added", "tag.removed", "tag.removed"]);
      expect(
        await r.audience.upsert(org, upsert("tags@example.com", { tags: ["d", "c"], replaceTags: true }), T0 + 3),
      ).toMatchObject({ result: "unchanged" });
      // The tags endpoint: add and remove.
      const removed = await r.audience.update(org, s.id, { removeTags: ["c", "none"], triggerWorkflows: true }, T0 + 4);
      expect(removed!.subscriber.tags).toEqual(["d"]);
      const counts = new Map((await r.audience.tagCounts([org])).get(org)!.map((t) => [t.name, t.subscribers]));
      expect([...counts.keys()]).toEqual(expect.arrayContaining(["a", "b", "c", "d", "vip", "beta"]));
      expect([counts.get("a"), counts.get("c"), counts.get("d")]).toEqual([0, 0, 1]);
    });

    test("status: unsubscribed stays so unless resubscribe; each change an event", async () => {
      const s = (await r.audience.upsert(org, upsert("st@example.com"), T0)).subscriber;
      expect(
        (await r.audience.upsert(org, upsert("st@example.com", { status: "unsubscribed" }), T0 + 1)).subscriber.status,
      ).toBe("unsubscribed");
      expect(await r.audience.upsert(org, upsert("st@example.com", { status: "subscribed" }), T0 + 2)).toMatchObject({
        result: "unchanged",
      });
      expect(
        await r.audience.upsert(org, upsert("st@example.com", { name: "x", status: "subscribed" }), T0 + 3),
      ).toMatchObject({
        result: "updated",
        subscriber: { status: "unsubscribed" },
      });
      expect(
        (await r.audience.upsert(org, upsert("st@example.com", { resubscribe: true }), T0 + 4)).subscriber.status,
      ).toBe("subscribed");
      expect(await types(s.id)).toEqual([
        "subscriber.resubscribed",
        "subscriber.updated",
        "subscriber.unsubscribed",
        "subscriber.created",
      ]);
    });

    test("triggerWorkflows is recorded with every event of the change", async () => {
      const s = (await r.audience.upsert(org, upsert("tw@example.com", { tags: ["t1"], triggerWorkflows: false }), T0))
        .subscriber;
      await r.audience.upsert(org, upsert("tw@example.com", { tags: ["t2"] }), T0 + 1);
      const events = (await r.audience.events(org, s.id, 10))!.data;
      expect(events.map((e) => [e.type, e.triggerWorkflows])).toEqual([
        ["tag.added", true],
        ["tag.added", false],
        ["subscriber.created", false],
      ]);
    });

    test("concurrent upserts of one email make one subscriber", async () => {
      const results = await Promise.all(
        Array.from({ length: 12 }, (_, i) =>
          r.audience.upsert(org, upsert(" Race@Example.com", { tags: [`r${i % 3}`] }), T0 + i),
        ),
      );
      expect(results.filter((x) => x.result === "created")).toHaveLength(1);
      expect(new Set(results.map((x) => x.subscriber.id)).size).toBe(1);
      expect((await r.audience.get(org, "race@example.com"))!.tags).toEqual(["r0", "r1", "r2"]);
      expect((await r.audience.list(org, { emailPrefix: "race@" }, 10)).data).toHaveLength(1);
    });

    test("a batch: in order, one transaction, a repeated email sees the one before", async () => {
      const results = await r.audience.upsertMany(
        org,
        [upsert("b1@example.com"), upsert("b2@example.com"), upsert("B1@example.com", { name: "One" })],
        T0,
      );
      expect(results.map((x) => x.result)).toEqual(["created", "created", "updated"]);
      expect(results[2]!.subscriber.id).toBe(results[0]!.subscriber.id);
      // Within one batch: a tag added then replaced away, one removed then added back.
      await r.audience.upsert(org, upsert("b3@example.com", { tags: ["keep"] }), T0);
      const again = await r.audience.upsertMany(
        org,
        [
          upsert("b3@example.com", { tags: ["brief"] }),
          upsert("b3@example.com", { tags: ["other"], replaceTags: true }),
          upsert("b3@example.com", { tags: ["keep"] }),
        ],
        T0 + 1,
      );
      expect(again.map((x) => x.subscriber.tags)).toEqual([["brief", "keep"], ["other"], ["keep", "other"]]);
      expect((await r.audience.get(org, "b3@example.com"))!.tags).toEqual(["keep", "other"]);
      expect(await types("b3@example.com")).toEqual([
        "tag.added",
        "tag.removed",
        "tag.removed",
        "tag.added",
        "tag.added",
        "tag.added",
        "subscriber.created",
      ]);
    });

    test("concurrent batches over the same emails: one subscriber each, every tag kept", async () => {
      const emails = Array.from({ length: 50 }, (_, i) => `cb${i}@example.com`);
      const batches = await Promise.all(
        [0, 1, 2, 3].map((k) =>
          r.audience.upsertMany(
            org,
            (k % 2 ? [...emails].reverse() : emails).map((email) => upsert(email, { tags: [`k${k}`] })),
            T0,
          ),
        ),
      );
      expect(batches.flat().filter((x) => x.result === "created")).toHaveLength(50);
      for (const email of [emails[0]!, emails[49]!])
        expect((await r.audience.get(org, email))!.tags).toEqual(["k0", "k1", "k2", "k3"]);
    });

    test("list: newest first, filters, and a walk that neither skips nor repeats while rows are added", async () => {
      const o = (await r.directory.createOrganization("walk", Plan.PREMIUM, T0)).id;
      const first = Array.from({ length: 25 }, (_, i) =>
        upsert(`w${String(i).padStart(2, "0")}@walk.example`, { tags: i % 2 ? ["odd"] : [] }),
      );
      await r.audience.upsertMany(o, first, T0);
      const seen: string[] = [];
      let cursor: string | undefined;
      for (let added = 0; ; added++) {
        const page = await r.audience.list(o, {}, 10, cursor);
        seen.push(...page.data.map((s) => s.email));
        await r.audience.upsert(o, upsert(`new${added}@walk.example`), T0 + 1); // a row added during the walk
        if (!page.nextCursor) break;
        cursor = page.nextCursor;
      }
      expect(seen).toEqual(first.map((f) => f.email).reverse());
      const odd = await r.audience.list(o, { tag: "odd" }, 100);
      expect(odd.data.map((s) => s.email)).toEqual(
        first
          .filter((_, i) => i % 2)
          .map((f) => f.email)
          .reverse(),
      );
      expect(odd.nextCursor).toBeNull();
      // A walk by tag, in pages of 5, while tagged rows are added.
      const walked: string[] = [];
      let at: string | undefined;
      for (let added = 0; ; added++) {
        const page = await r.audience.list(o, { tag: "odd" }, 5, at);
        walked.push(...page.data.map((s) => s.email));
        await r.audience.upsert(o, upsert(`odd${added}@walk.example`, { tags: ["odd"] }), T0 + 1);
        if (!page.nextCursor) break;
        at = page.nextCursor;
      }
      expect(walked).toEqual(odd.data.map((s) => s.email));
      // An existing subscriber tagged later is found under the tag at its own place (newest first by creation).
      await r.audience.upsert(o, upsert("w00@walk.example", { tags: ["odd"] }), T0 + 2);
      expect((await r.audience.list(o, { tag: "odd", emailPrefix: "w" }, 100)).data.at(-1)!.email).toBe(
        "w00@walk.example",
      );
      expect((await r.audience.list(o, { emailPrefix: "W0" }, 100)).data).toHaveLength(10);
      expect((await r.audience.list(o, { emailPrefix: "w_" }, 100)).data).toHaveLength(0); // _ is no wildcard
      await r.audience.upsert(o, upsert("w00@walk.example", { status: "unsubscribed" }), T0 + 2);
      expect((await r.audience.list(o, { status: "unsubscribed" }, 100)).data.map((s) => s.email)).toEqual([
        "w00@walk.example",
      ]);
    });

    test("organizations are isolated: the same email twice, and nothing of one seen or changed by the other", async () => {
      const mine = (await r.audience.upsert(org, upsert("iso@example.com", { name: "Mine" }), T0)).subscriber;
      const theirs = (await r.audience.upsert(other, upsert("iso@example.com", { name: "Theirs" }), T0)).subscriber;
      expect(theirs.id).not.toBe(mine.id);
      expect((await r.audience.get(other, "iso@example.com"))!.name).toBe("Theirs");
      expect(await r.audience.get(other, mine.id)).toBeUndefined();
      expect(await r.audience.update(other, mine.id, { name: "x", triggerWorkflows: true }, T0)).toBeUndefined();
      expect(await r.audience.events(other, mine.id, 10)).toBeUndefined();
      expect(await r.audience.delete(other, mine.id, T0)).toBe(false);
      expect((await r.audience.get(org, mine.id))!.name).toBe("Mine");
      expect((await r.audience.list(other, {}, 100)).data.map((s) => s.id)).toEqual([theirs.id]);
    });

    test("delete a subscriber; delete a tag takes it off every subscriber", async () => {
      const s = (await r.audience.upsert(org, upsert("del@example.com", { tags: ["gone"] }), T0)).subscriber;
      await r.audience.upsert(org, upsert("del2@example.com", { tags: ["gone", "kept"] }), T0);
      expect(await r.audience.createTag(org, "gone", T0)).toBe(false);
      expect(await r.audience.createTag(org, "fresh", T0)).toBe(true);
      expect(await r.audience.deleteTag(org, "gone")).toBe(true);
      expect(await r.audience.deleteTag(org, "gone")).toBe(false);
      expect((await r.audience.get(org, "del2@example.com"))!.tags).toEqual(["kept"]);
      expect((await r.audience.tagCounts([org])).get(org)!.find((t) => t.name === "fresh")).toEqual({
        name: "fresh",
        subscribers: 0,
      });
      expect(await r.audience.delete(org, s.id, T0)).toBe(true);
      expect(await r.audience.get(org, s.id)).toBeUndefined();
      expect(await r.audience.delete(org, "del@example.com", T0)).toBe(false);
    });

    test("the kept tag counts agree with the subscribers' tags after everything above", async () => {
      const counted = await r.db.run(
        (
          sql,
        ) => sql`SELECT g.name, COUNT(s.subscriber_id) AS n FROM tags g LEFT JOIN subscriber_tags s ON s.org_id = g.org_id AND s.tag = g.name
          WHERE g.org_id = ${org} GROUP BY g.name ORDER BY g.name`,
      );
      expect((await r.audience.tagCounts([org])).get(org)).toEqual(
        counted.map((c: { name: string; n: unknown }) => ({ name: c.name, subscribers: Number(c.n) })),
      );
    });

    test("messages to a subscriber's address are its events, once each however often written", async () => {
      const s = (await r.audience.upsert(org, upsert("mail@example.com"), T0)).subscriber;
      const m: MessageHistory = {
        id: "msg_000000000000000000000001",
        orgId: org,
        lane: Lane.TRANSACTIONAL,
        from: "A <a@a.example>",
        to: "Mail Person <MAIL@example.com>",
        toMailbox: "mail@example.com",
        subject: "Hi",
        tags: [],
        status: MessageStatus.DELIVERED,
        attempts: 1,
        createdMs: T0 + 1,
        updatedMs: T0 + 3,
        version: 3,
        events: [
          { status: MessageStatus.QUEUED, atMs: T0 + 1, detail: "accepted" },
          { status: MessageStatus.QUEUED, atMs: T0 + 2, detail: "released" },
          { status: MessageStatus.SENDING, atMs: T0 + 2, detail: "attempt 1" },
          { status: MessageStatus.DELIVERED, atMs: T0 + 3, detail: "250 ok" },
        ],
      };
      const elsewhere = { ...m, id: "msg_000000000000000000000002", orgId: other };
      await r.audience.recordMessageEvents([m, elsewhere]);
      await r.audience.recordMessageEvents([m]);
      const events = (await r.audience.events(org, s.id, 10))!.data;
      expect(events.slice(0, 2)).toEqual([
        { type: "email.delivered", atMs: T0 + 3, data: { messageId: m.id, subject: "Hi" }, triggerWorkflows: false },
        { type: "email.queued", atMs: T0 + 1, data: { messageId: m.id, subject: "Hi" }, triggerWorkflows: false },
      ]);
      expect(events).toHaveLength(3);
      // A complaint: the fixture address that is delivered and complains.
      const complainer = (await r.audience.upsert(org, upsert("complained+1@fixtures.test"), T0)).subscriber;
      await r.audience.recordMessageEvents([
        { ...m, id: "msg_000000000000000000000003", to: "complained+1@fixtures.test" },
      ]);
      expect(await types(complainer.id)).toEqual([
        "email.complained",
        "email.delivered",
        "email.queued",
        "subscriber.created",
      ]);
    });
  });
}
