// Webhook endpoints on both databases: pages newest first that a walk never repeats or skips,
// per organization, deletion, and the cap on an organization's endpoints.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Plan } from "../gen/mailcore/limiter/v1/limiter_pb";
import { recordDatabases } from "../testkit/recorddbs";
import { Records } from "./records";

const databases = recordDatabases("webhook-endpoints");

const T0 = Date.UTC(2026, 10, 1);

for (const [name, fresh] of databases) {
  describe(`webhook endpoint records: ${name}`, () => {
    let r: Records;
    let orgA: string;
    let orgB: string;
    beforeAll(async () => {
      const where = await fresh();
      r = await Records.open({ databaseUrl: where.url, sqliteFile: where.sqliteFile });
      orgA = (await r.directory.createOrganization("a", Plan.PREMIUM, T0)).id;
      orgB = (await r.directory.createOrganization("b", Plan.PREMIUM, T0)).id;
    });
    afterAll(async () => {
      await r?.close();
    });

    test("endpoints: pages newest first that a walk never repeats or skips, per organization; delete", async () => {
      const made = [];
      for (let i = 0; i < 5; i++)
        made.push(
          await r.webhookEndpoints.create({
            orgId: orgB,
            url: `https://b.example/${i}`,
            events: ["email.queued"],
            secret: "whsec_b",
            nowMs: T0 + i,
          }),
        );
      const first = await r.webhookEndpoints.list(orgB, 2);
      expect(first.data.map((e) => e.url)).toEqual(["https://b.example/4", "https://b.example/3"]);
      // Added during the walk: newer than the cursor, not met by it.
      await r.webhookEndpoints.create({
        orgId: orgB,
        url: "https://b.example/new",
        events: ["email.queued"],
        secret: "whsec_b",
        nowMs: T0 + 10,
      });
      const second = await r.webhookEndpoints.list(orgB, 2, first.nextCursor!);
      const third = await r.webhookEndpoints.list(orgB, 2, second.nextCursor!);
      expect([...second.data, ...third.data].map((e) => e.url)).toEqual([
        "https://b.example/2",
        "https://b.example/1",
        "https://b.example/0",
      ]);
      expect(third.nextCursor).toBeNull();
      expect((await r.webhookEndpoints.list(orgB, 2, "garbage")).data).toEqual([]);
      expect(first.data[0]).toEqual({
        id: made[4]!.id,
        orgId: orgB,
        url: "https://b.example/4",
        events: ["email.queued"],
        createdMs: T0 + 4,
        disabledMs: null,
        disabledReason: null,
        lastSuccessMs: null,
        lastFailureMs: null,
        consecutiveFailures: 0,
      });
      expect(await r.webhookEndpoints.delete(orgA, made[0]!.id)).toBe(false);
      expect(await r.webhookDeliveries.list(orgA, made[0]!.id, 10)).toBeUndefined();
      for (const e of [...made, ...(await r.webhookEndpoints.list(orgB, 100)).data])
        await r.webhookEndpoints.delete(orgB, e.id);
      expect((await r.webhookEndpoints.list(orgB, 100)).data).toEqual([]);
    });

    test("a cap on an organization's endpoints: creates sent at once make no more than it", async () => {
      const create = (orgId: string, i: number) =>
        r.webhookEndpoints.create({
          orgId,
          url: `https://cap.example/${i}`,
          events: ["email.queued"],
          secret: "whsec_c",
          nowMs: T0,
          max: 3,
        });
      const made = await Promise.allSettled(Array.from({ length: 8 }, (_, i) => create(orgA, i)));
      expect(made.filter((m) => m.status === "fulfilled")).toHaveLength(3);
      for (const m of made.filter((m) => m.status === "rejected"))
        expect(m.reason).toMatchObject({
          kind: "too_many",
          message: "the organization has 3 webhooks, the most it may: delete one first",
        });
      // Another organization has a cap of its own; a deleted endpoint makes room.
      expect((await create(orgB, 0)).orgId).toBe(orgB);
      const mine = (await r.webhookEndpoints.list(orgA, 100)).data;
      await r.webhookEndpoints.delete(orgA, mine[0]!.id);
      expect((await create(orgA, 9)).orgId).toBe(orgA);
      for (const [orgId, e] of [
        ...(await r.webhookEndpoints.list(orgA, 100)).data.map((e) => [orgA, e] as const),
        ...(await r.webhookEndpoints.list(orgB, 100)).data.map((e) => [orgB, e] as const),
      ])
        await r.webhookEndpoints.delete(orgId, e.id);
    });
  });
}
