// A call's records work within its deadline (Db.within) and the idempotency keys written in it,
// one suite on a SQLite file and on a PostgreSQL server this file starts.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { recordDatabases, recordsWithTwoOrgs } from "../testkit/recorddbs";
import { DeadlinePassed } from "./db";
import { IDEMPOTENCY_TTL_MS } from "./idempotency";
import type { Records } from "./records";

const databases = recordDatabases("deadline");

for (const [name, fresh] of databases) {
  describe(`records within a deadline: ${name}`, () => {
    let r: Records;
    let org: string;
    beforeAll(async () => {
      ({ r, org } = await recordsWithTwoOrgs(fresh, "dl", Date.now()));
    });
    afterAll(async () => {
      await r?.close();
    });
    const tags = async () => (await r.audience.tagCounts([org])).get(org)!.map((t) => t.name);

    test("the operations inside join one transaction: committed together before the deadline, then told", async () => {
      const told: string[] = [];
      r.audience.tagsChanged = async (orgId) => {
        told.push(orgId);
      };
      await r.db.within(Date.now() + 5_000, async () => {
        await r.audience.createTag(org, "both-a", Date.now());
        await r.idempotency.keep(org, "k1", { requestHash: "h1", response: "answer" }, Date.now());
        expect(told).toEqual([]);
      });
      expect(told).toEqual([org]);
      expect(await tags()).toContain("both-a");
      expect(await r.idempotency.find(org, "k1", Date.now())).toEqual({ requestHash: "h1", response: "answer" });
    });

    test("work that ends after the deadline rolls back, all of it, and says so", async () => {
      const late = r.db.within(Date.now() + 200, async () => {
        await r.audience.createTag(org, "late", Date.now());
        await r.idempotency.keep(org, "k2", { requestHash: "h2", response: "answer" }, Date.now());
        await Bun.sleep(400);
      });
      expect(await late.catch((err) => err)).toBeInstanceOf(DeadlinePassed);
      expect(await tags()).not.toContain("late");
      expect(await r.idempotency.find(org, "k2", Date.now())).toBeUndefined();
      expect(await r.db.within(Date.now() - 1, async () => "ran").catch((err) => err)).toBeInstanceOf(DeadlinePassed);
    });

    test("a failure rolls back the whole; a key kept twice is a unique violation; an expired key is free again", async () => {
      const failed = r.db.within(Date.now() + 5_000, async () => {
        await r.audience.createTag(org, "failed", Date.now());
        throw new Error("refused");
      });
      expect((await failed.catch((err) => err)).message).toBe("refused");
      expect(await tags()).not.toContain("failed");
      const now = Date.now();
      await r.idempotency.keep(org, "k3", { requestHash: "h3", response: "first" }, now);
      expect(
        await r.idempotency.keep(org, "k3", { requestHash: "h3", response: "again" }, now).catch(() => "refused"),
      ).toBe("refused");
      const later = now + IDEMPOTENCY_TTL_MS;
      expect(await r.idempotency.find(org, "k3", later)).toBeUndefined();
      await r.idempotency.keep(org, "k3", { requestHash: "h4", response: "next" }, later);
      expect(await r.idempotency.find(org, "k3", later)).toEqual({ requestHash: "h4", response: "next" });
    });
  });
}
