// A call's records work within its deadline (Db.within) and the idempotency keys written in it,
// one suite on a SQLite file and on a PostgreSQL server this file starts.
import { Database } from "bun:sqlite";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { SQL } from "bun";
import { type FreshDatabase, recordDatabases, recordsWithTwoOrgs } from "../testkit/recorddbs";
import { DeadlinePassed } from "./db";
import { IDEMPOTENCY_TTL_MS } from "./idempotency";
import type { Records } from "./records";

const databases = recordDatabases("deadline");

/** What a loaded test machine adds to a deadline. */
const MARGIN_MS = 450;

/** Another connection's lock on the tags (SQLite: on the whole database), until the returned release. */
async function lockTags(where: Awaited<ReturnType<FreshDatabase>>): Promise<() => Promise<void>> {
  if (!where.url) {
    const db = new Database(where.sqliteFile);
    db.run("BEGIN IMMEDIATE");
    return async () => {
      db.run("ROLLBACK");
      db.close();
    };
  }
  const sql = new SQL({ url: where.url, max: 1 });
  const conn = await sql.reserve();
  await conn`BEGIN`;
  await conn`LOCK TABLE tags IN ACCESS EXCLUSIVE MODE`;
  return async () => {
    await conn`ROLLBACK`;
    conn.release();
    await sql.close();
  };
}

for (const [name, fresh] of databases) {
  describe(`records within a deadline: ${name}`, () => {
    let r: Records;
    let org: string;
    let where: Awaited<ReturnType<FreshDatabase>>;
    beforeAll(async () => {
      ({ r, org, where } = await recordsWithTwoOrgs(fresh, "dl", Date.now()));
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

    test("a lock met late in the transaction is waited for only as long as the deadline leaves", async () => {
      const release = await lockTags(where);
      try {
        const started = performance.now();
        const late = r.db.within(Date.now() + 1_000, async () => {
          await Bun.sleep(600);
          await r.audience.createTag(org, "behind-lock", Date.now());
        });
        expect(await late.catch((err) => err)).toBeInstanceOf(DeadlinePassed);
        // The whole deadline, not the time left at the start again for the locked statement.
        expect(performance.now() - started).toBeLessThan(1_000 + MARGIN_MS);
      } finally {
        await release();
      }
      expect(await tags()).not.toContain("behind-lock");
    });

    if (name === "postgres")
      test("slow statements end at the deadline, not each after it, cancelled on the server", async () => {
        const sleep = (s: number) => r.db.run((q) => q`SELECT pg_sleep(${s})`);
        const started = performance.now();
        const slow = r.db.within(Date.now() + 1_000, async () => {
          await r.audience.createTag(org, "slow", Date.now());
          await sleep(0.4);
          await sleep(0.4);
          await sleep(30);
        });
        expect(await slow.catch((err) => err)).toBeInstanceOf(DeadlinePassed);
        expect(performance.now() - started).toBeLessThan(1_000 + MARGIN_MS);
        // Told that nothing was written, nothing of the transaction is left on the server either.
        const left = await r.db.run(
          (q) => q`SELECT state, query FROM pg_stat_activity
            WHERE datname = current_database() AND pid <> pg_backend_pid() AND state <> 'idle'`,
        );
        expect([...left]).toEqual([]);
        expect(await tags()).not.toContain("slow");
      });
  });
}
