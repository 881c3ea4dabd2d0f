// What the console reads of an organization (its bucket, refusals over the last hour, its
// lanes), run against every adapter (embedded, Redis, Redis Cluster) with a moved clock.
import { afterAll, beforeEach, describe, expect, test } from "bun:test";
import { Redis } from "ioredis";
import { ManualClock } from "../clock/clock";
import { Plan, Verdict } from "../gen/mailcore/limiter/v1/limiter_pb";
import { Lane } from "../gen/mailcore/limiter/v1/mail_pb";
import { GUARD_LIMITS } from "../mail/policy";
import { hotStoreServers, hotStores, releaseNext, SUITE_QUEUE_CAP } from "../testkit/hotstores";
import { type HotStore, REFUSAL_MINUTES } from "./hotstore";
import { keys } from "./redis/layout";

const MIN = 60_000;

let seq = 0;
const servers = hotStoreServers();

for (const [name, open] of hotStores(servers)) {
  describe(`hot store usage: ${name}`, () => {
    let store: HotStore;
    let clock: ManualClock;
    let org: string;

    beforeEach(async () => {
      if (store) await store.lifecycle.close();
      store = await open();
      // On a whole minute, 30 s in: the test knows which minute each count falls in.
      clock = new ManualClock(Date.UTC(2026, 5, 1, 12, 0, 30) + ++seq * 24 * 60 * MIN);
      org = `org_${name}_${seq}`;
      await store.admission.projectOrg({
        id: org,
        slug: `slug-${org}`,
        plan: Plan.PREMIUM,
        version: 1,
        verifiedDomains: ["d.example"],
      });
      await store.admission.projectToken(`hash-${org}`, org, "write");
    });
    afterAll(async () => {
      await store?.lifecycle.close();
    });

    const usage = (id = org) => store.usage.orgUsage(id, Plan.PREMIUM, clock.nowMs());

    test("a fresh organization: a full bucket, an hour of empty minutes, empty lanes", async () => {
      const u = await usage();
      expect(u.remaining).toBe(700);
      expect(u.resetMs).toBe(0);
      expect(u.refusals).toHaveLength(REFUSAL_MINUTES);
      const minute = Math.floor(clock.nowMs() / MIN) * MIN;
      expect(u.refusals.at(-1)).toEqual({ minuteStartMs: minute, quota: 0, ip: 0, recipient: 0 });
      expect(u.refusals[0]!.minuteStartMs).toBe(minute - (REFUSAL_MINUTES - 1) * MIN);
      expect(u.lanes).toEqual([
        { lane: Lane.TRANSACTIONAL, depth: 0, released: 0 },
        { lane: Lane.BULK, depth: 0, released: 0 },
      ]);
    });

    test("the bucket as admission sees it, and reading it consumes nothing", async () => {
      const admitted = await store.admission.admit(
        Array.from({ length: 10 }, () => ({ tokenHash: `hash-${org}`, ip: "10.9.0.1" })),
        clock.nowMs(),
      );
      expect(admitted.every((a) => a.verdict === Verdict.ALLOWED)).toBe(true);
      const u = await usage();
      expect(u).toMatchObject({ remaining: 690, resetMs: admitted.at(-1)!.resetMs });
      expect((await usage()).remaining).toBe(690);
      clock.advance(900); // 10.5 tokens back on premium: full again
      expect(await usage()).toMatchObject({ remaining: 700, resetMs: 0 });
      const [next] = await store.admission.admit([{ tokenHash: `hash-${org}`, ip: "10.9.0.1" }], clock.nowMs());
      expect(next!.remaining).toBe(699);
    });

    test("refusals by kind and minute, over the last hour only, per organization", async () => {
      await store.usage.countRefusals(
        [
          { orgId: org, kind: "quota", n: 3 },
          { orgId: org, kind: "ip", n: 2 },
          { orgId: "someone-else", kind: "quota", n: 50 },
        ],
        clock.nowMs(),
      );
      await store.usage.countRefusals([{ orgId: org, kind: "quota", n: 1 }], clock.nowMs() + 20_000);
      clock.advance(MIN);
      await store.usage.countRefusals([{ orgId: org, kind: "recipient", n: 1 }], clock.nowMs());
      const u = await usage();
      expect(u.refusals.slice(-2).map(({ quota, ip, recipient }) => [quota, ip, recipient])).toEqual([
        [4, 2, 0],
        [0, 0, 1],
      ]);
      expect(u.refusals.slice(0, -2).every((m) => m.quota + m.ip + m.recipient === 0)).toBe(true);
      // 59 minutes on, the first minute is the oldest shown; one more and it is gone.
      clock.advance((REFUSAL_MINUTES - 2) * MIN);
      expect((await usage()).refusals[0]).toMatchObject({ quota: 4, ip: 2 });
      clock.advance(MIN);
      expect((await usage()).refusals.reduce((sum, m) => sum + m.quota + m.ip + m.recipient, 0)).toBe(1);
    });

    test("lanes: the organization's messages waiting and its releases over the last 10 whole seconds", async () => {
      const other = `${org}_other`;
      await store.admission.projectOrg({
        id: other,
        slug: `slug-${other}`,
        plan: Plan.FREE,
        version: 1,
        verifiedDomains: ["d.example"],
      });
      const send = (orgId: string, lane: Lane, i: number) =>
        store.mail.enqueue(
          {
            orgId,
            messageId: `msg_${orgId}_${lane}_${i}`,
            lane,
            payload: "{}",
            tags: [],
            from: "s@d.example",
            to: `delivered+${i}@fixtures.test`,
            subject: "s",
            fromDomain: "d.example",
            mailbox: `delivered@fixtures.test`,
            checkCooldown: false,
            countGuards: false,
            guards: GUARD_LIMITS,
            queueCap: SUITE_QUEUE_CAP,
          },
          clock.nowMs(),
        );
      for (let i = 0; i < 3; i++) expect((await send(org, Lane.TRANSACTIONAL, i)).kind).toBe("accepted");
      expect((await send(org, Lane.BULK, 0)).kind).toBe("accepted");
      for (let i = 0; i < 4; i++) expect((await send(other, Lane.TRANSACTIONAL, i)).kind).toBe("accepted");
      // Round-robin: four releases give two of each organization.
      for (let i = 0; i < 4; i++)
        expect(await releaseNext(store.mail, Lane.TRANSACTIONAL, clock.nowMs())).not.toBeNull();
      // The second under way is not counted yet.
      expect((await usage()).lanes).toEqual([
        { lane: Lane.TRANSACTIONAL, depth: 1, released: 0 },
        { lane: Lane.BULK, depth: 1, released: 0 },
      ]);
      clock.advance(1_000);
      expect((await usage()).lanes[0]).toEqual({ lane: Lane.TRANSACTIONAL, depth: 1, released: 2 });
      expect((await usage(other)).lanes[0]).toEqual({ lane: Lane.TRANSACTIONAL, depth: 2, released: 2 });
      clock.advance(10_000);
      expect((await usage()).lanes[0]).toEqual({ lane: Lane.TRANSACTIONAL, depth: 1, released: 0 });
    });

    if (name === "redis") {
      test("redis: the minute's counts live in the prelude's key, kept until the minute leaves the hour", async () => {
        await store.usage.countRefusals([{ orgId: org, kind: "ip", n: 7 }], clock.nowMs());
        const redis = new Redis(servers.redisUrl());
        const k = keys.refusals(org, Math.floor(clock.nowMs() / MIN));
        expect(k).toBe(`mc:org:{${org}}:429:${Math.floor(clock.nowMs() / MIN)}`);
        expect(await redis.hgetall(k)).toEqual({ ip: "7" });
        const ttl = await redis.pttl(k);
        // 30 s into the minute: kept for the rest of it and 60 more minutes.
        expect(ttl).toBeGreaterThan(REFUSAL_MINUTES * MIN + 29_000 - 5_000);
        expect(ttl).toBeLessThanOrEqual(REFUSAL_MINUTES * MIN + 30_000);
        redis.disconnect();
      });
    }
  });
}
