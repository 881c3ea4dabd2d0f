// Suppression lists on both databases: one per organization, the first reason kept, pages newest
// first by reason that a walk never repeats or skips, removal, and the check of many addresses;
// bounces: a hard one lists the mailbox, soft ones by the rule, a policy refusal never, each
// listing announced to the organization's webhooks.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Plan } from "../gen/mailcore/limiter/v1/limiter_pb";
import { recordDatabases } from "../testkit/recorddbs";
import { Records } from "./records";

const databases = recordDatabases("suppressions");

const T0 = Date.UTC(2026, 10, 1);
const HOUR = 3_600_000;

for (const [name, fresh] of databases) {
  describe(`suppression records: ${name}`, () => {
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

    test("an address listed once per organization, as the guards see it; the first reason stays", async () => {
      const first = await r.suppressions.add({
        orgId: orgA,
        email: "Gone+news@Example.COM",
        reason: "hard_bounce",
        detail: "5.1.1 user unknown",
        messageId: "msg_1",
        nowMs: T0,
      });
      expect(first).toEqual({
        created: true,
        suppression: {
          email: "gone@example.com",
          reason: "hard_bounce",
          detail: "5.1.1 user unknown",
          messageId: "msg_1",
          createdMs: T0,
        },
      });
      const again = await r.suppressions.add({
        orgId: orgA,
        email: "gone@example.com",
        reason: "complaint",
        detail: "abuse",
        nowMs: T0 + 1,
      });
      expect(again).toEqual({ created: false, suppression: first.suppression });
      // Another organization's list is its own.
      expect(await r.suppressions.listed(orgB, ["gone@example.com"])).toEqual(new Set());
      expect(await r.suppressions.listed(orgA, ["GONE+x@example.com", "other@example.com"])).toEqual(
        new Set(["gone@example.com"]),
      );
      expect(await r.suppressions.listed(orgA, [])).toEqual(new Set());
      expect(await r.suppressions.remove(orgB, "gone@example.com")).toBe(false);
      expect(await r.suppressions.remove(orgA, "Gone@example.com")).toBe(true);
      expect(await r.suppressions.remove(orgA, "gone@example.com")).toBe(false);
      expect(await r.suppressions.listed(orgA, ["gone@example.com"])).toEqual(new Set());
    });

    test("pages newest first, by reason, that a walk never repeats or skips", async () => {
      const reasons = ["manual", "complaint", "manual", "hard_bounce", "manual"] as const;
      for (const [i, reason] of reasons.entries())
        await r.suppressions.add({ orgId: orgB, email: `p${i}@example.com`, reason, detail: "", nowMs: T0 + i });
      const first = await r.suppressions.list(orgB, { limit: 2 });
      expect(first.data.map((s) => s.email)).toEqual(["p4@example.com", "p3@example.com"]);
      await r.suppressions.add({ orgId: orgB, email: "new@example.com", reason: "manual", detail: "", nowMs: T0 + 9 });
      const rest = await r.suppressions.list(orgB, { limit: 10, cursor: first.nextCursor! });
      expect(rest.data.map((s) => s.email)).toEqual(["p2@example.com", "p1@example.com", "p0@example.com"]);
      expect(rest.nextCursor).toBeNull();
      const manual = await r.suppressions.list(orgB, { reason: "manual", limit: 2 });
      expect(manual.data.map((s) => s.email)).toEqual(["new@example.com", "p4@example.com"]);
      const manualRest = await r.suppressions.list(orgB, { reason: "manual", limit: 2, cursor: manual.nextCursor! });
      expect(manualRest.data.map((s) => s.email)).toEqual(["p2@example.com", "p0@example.com"]);
      expect(manualRest.nextCursor).toBeNull();
      expect((await r.suppressions.list(orgA, { limit: 10 })).data).toEqual([]);
      expect((await r.suppressions.list(orgB, { limit: 10, cursor: "garbage" })).data).toEqual([]);
    });

    test("bounces: hard lists at once, soft by the rule (a delivery starts the count again), policy never; each listing announced", async () => {
      await r.webhookEndpoints.create({
        orgId: orgA,
        url: "https://a.example/hook",
        events: ["email.suppressed"],
        secret: "whsec_a",
        nowMs: T0,
      });
      const bounce = (type: "hard" | "soft" | "policy", email: string, messageId: string, atMs: number) =>
        r.suppressions.recordBounce({
          orgId: orgA,
          messageId,
          email,
          bounce: { type, status: type === "policy" ? "5.7.1" : "5.1.1", diagnostic: `550 ${type}` },
          atMs,
        });
      expect(await bounce("policy", "spam@example.net", "m1", T0)).toEqual({ suppressed: false, softBounces: 0 });
      expect(await bounce("hard", "Kim+x@Example.net", "m2", T0)).toEqual({ suppressed: true, softBounces: 0 });
      expect(await bounce("hard", "kim@example.net", "m3", T0 + 1)).toEqual({ suppressed: false, softBounces: 0 });
      const listed = (await r.suppressions.list(orgA, { limit: 10 })).data;
      expect(listed).toEqual([
        { email: "kim@example.net", reason: "hard_bounce", detail: "5.1.1: 550 hard", messageId: "m2", createdMs: T0 },
      ]);
      // Soft: 3 since the last delivery, 72 hours or more from the first to the last.
      expect(await bounce("soft", "full@example.net", "s1", T0)).toEqual({ suppressed: false, softBounces: 1 });
      expect(await bounce("soft", "full@example.net", "s1", T0)).toEqual({ suppressed: false, softBounces: 1 });
      expect(await bounce("soft", "full@example.net", "s2", T0 + HOUR)).toEqual({ suppressed: false, softBounces: 2 });
      expect(await bounce("soft", "full@example.net", "s3", T0 + 2 * HOUR)).toEqual({
        suppressed: false,
        softBounces: 3,
      });
      await r.suppressions.delivered(orgA, ["Full@example.net"]);
      expect(await bounce("soft", "full@example.net", "s4", T0 + 10 * HOUR)).toEqual({
        suppressed: false,
        softBounces: 1,
      });
      expect(await bounce("soft", "full@example.net", "s5", T0 + 40 * HOUR)).toEqual({
        suppressed: false,
        softBounces: 2,
      });
      expect(await bounce("soft", "full@example.net", "s6", T0 + 82 * HOUR)).toEqual({
        suppressed: true,
        softBounces: 3,
      });
      const reasonOf = async (email: string) => (await r.suppressions.all(orgA)).find(([e]) => e === email)?.[1];
      expect(await reasonOf("full@example.net")).toBe("soft_bounce");
      expect(await r.suppressions.listed(orgB, ["kim@example.net", "full@example.net", "spam@example.net"])).toEqual(
        new Set(),
      );
      expect(await reasonOf("spam@example.net")).toBeUndefined();
      const [endpoint] = (await r.webhookEndpoints.list(orgA, 1)).data;
      const announced = (await r.webhookDeliveries.list(orgA, endpoint!.id, 10))!.data;
      expect(announced.map((d) => d.eventType)).toEqual(["email.suppressed", "email.suppressed"]);
    });

    test("complaints: the rate over the last 24 hours of counters; a bulk pause kept until resumed", async () => {
      const now = T0 + 30 * HOUR + 5;
      await r.stats.add([
        { orgId: orgB, atMs: T0, kind: "complained", n: 9 }, // 30 hours ago: outside the window
        { orgId: orgB, atMs: now - 20 * HOUR, kind: "delivered", n: 1_500 },
        { orgId: orgB, atMs: now - HOUR, kind: "delivered", n: 500 },
        { orgId: orgB, atMs: now, kind: "complained", n: 7 },
        { orgId: orgA, atMs: now, kind: "complained", n: 1 },
      ]);
      expect(await r.complaints.rate(orgB, now)).toEqual({ complained: 7, delivered: 2_000, rate: 0.0035 });
      expect(await r.complaints.rate(orgA, now)).toEqual({ complained: 1, delivered: 0, rate: 0 });
      expect(await r.complaints.paused(orgB)).toBeUndefined();
      await r.complaints.pause(orgB, "complaint rate 0.35%", now);
      await r.complaints.pause(orgB, "again", now + 1);
      expect(await r.complaints.paused(orgB)).toEqual({ pausedMs: now, reason: "complaint rate 0.35%" });
      expect(await r.complaints.paused(orgA)).toBeUndefined();
      expect(await r.complaints.resume(orgB)).toBe(true);
      expect(await r.complaints.resume(orgB)).toBe(false);
      expect(await r.complaints.paused(orgB)).toBeUndefined();
    });
  });
}
