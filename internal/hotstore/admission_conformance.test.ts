// One contract, every adapter, one suite: admission and the projection it reads, run against
// the embedded hot store, and the Redis hot store on a redis-server and on a Redis Cluster of
// three primaries of its own.
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test";
import type { Redis } from "ioredis";
import { ManualClock } from "../clock/clock";
import { Plan, Verdict } from "../gen/mailcore/limiter/v1/limiter_pb";
import { planQuota } from "../plans/plans";
import { hotStoreServers, hotStores } from "../testkit/hotstores";
import type { AdmitInput, HotStore } from "./hotstore";
import { keys } from "./redis/layout";
import { connectRedis, RedisHot } from "./redis/redis";

let seq = 0;
const servers = hotStoreServers();

const adapters = hotStores(servers);

for (const [name, open] of adapters) {
  describe(`hot store admission: ${name}`, () => {
    let store: HotStore;
    let clock: ManualClock;

    beforeEach(async () => {
      if (store) await store.lifecycle.close();
      store = await open();
      clock = new ManualClock();
    });

    afterAll(async () => {
      await store?.lifecycle.close();
    });

    /** An organization and a token, as the daemon projects them from the records. */
    async function org(plan: Plan) {
      const slug = `org-${name}-${++seq}`;
      const id = `id-${name}-${seq}`;
      await store.admission.projectOrg({ id, slug, plan, version: 1, verifiedDomains: [] });
      const tokenHash = `hash-${name}-${seq}`;
      await store.admission.projectToken(tokenHash, id, "write");
      return { id, slug, plan, tokenHash };
    }

    const ip = () => `10.0.${(seq >> 8) & 255}.${seq++ & 255}`;

    async function burst(n: number, input: AdmitInput) {
      return store.admission.admit(
        Array.from({ length: n }, () => input),
        clock.nowMs(),
      );
    }

    const count = (results: { verdict: Verdict }[], v: Verdict) => results.filter((r) => r.verdict === v).length;

    for (const plan of [Plan.FREE, Plan.PREMIUM, Plan.ENTERPRISE]) {
      const q = planQuota(plan);
      test(`plan ${Plan[plan]}: a burst of q+50 admits exactly q=${q}`, async () => {
        const o = await org(plan);
        // Spread over IPs so the 500/s IP bucket is not what limits the enterprise burst.
        const results = [];
        for (let i = 0; i < q + 50; i += 400) {
          results.push(...(await burst(Math.min(400, q + 50 - i), { tokenHash: o.tokenHash, ip: ip() })));
        }
        expect(count(results, Verdict.ALLOWED)).toBe(q);
        expect(count(results, Verdict.ORG_LIMITED)).toBe(50);
        // Remaining counts down exactly, and the refused carry the time to one token.
        expect(results.slice(0, q).map((r) => r.remaining)).toEqual(Array.from({ length: q }, (_, i) => q - 1 - i));
        const refused = results[q]!;
        expect(refused.remaining).toBe(0);
        expect(refused.retryAfterMs).toBe(Math.ceil(60_000 / q));
        expect(refused.resetMs).toBe(60_000);
        expect(refused.org).toEqual({ id: o.id, slug: o.slug, plan, audienceStamp: expect.any(String) });
      });

      test(`plan ${Plan[plan]}: refills at q per 60 s`, async () => {
        const o = await org(plan);
        const addr = ip();
        for (let i = 0; i < q; i += 400) await burst(Math.min(400, q - i), { tokenHash: o.tokenHash, ip: ip() });
        expect(count(await burst(1, { tokenHash: o.tokenHash, ip: addr }), Verdict.ORG_LIMITED)).toBe(1);
        // The bucket is empty now. After e ms it has given back exactly floor(e * q / 60000)
        // tokens: k tokens take ceil(k * 60000 / q) ms, and one millisecond less gives k-1.
        let elapsed = 0;
        let admitted = 0;
        for (const k of [1, 3, 7]) {
          for (const at of [Math.ceil((k * 60_000) / q) - 1, Math.ceil((k * 60_000) / q)]) {
            clock.advance(at - elapsed);
            elapsed = at;
            const due = Math.floor((elapsed * q) / 60_000) - admitted;
            expect(count(await burst(due + 1, { tokenHash: o.tokenHash, ip: addr }), Verdict.ALLOWED)).toBe(due);
            admitted += due;
          }
          expect(admitted).toBe(k);
        }
        // After a full minute the bucket is full again, and never above q.
        clock.advance(120_000);
        const full = [];
        for (let i = 0; i < q + 10; i += 400)
          full.push(...(await burst(Math.min(400, q + 10 - i), { tokenHash: o.tokenHash, ip: ip() })));
        expect(count(full, Verdict.ALLOWED)).toBe(q);
      });
    }

    test("remaining and reset match the bucket", async () => {
      const o = await org(Plan.FREE);
      const addr = ip();
      const [first] = await burst(1, { tokenHash: o.tokenHash, ip: addr });
      expect(first).toMatchObject({ verdict: Verdict.ALLOWED, remaining: 99, resetMs: 600, retryAfterMs: 0 });
      const next = await burst(9, { tokenHash: o.tokenHash, ip: addr });
      expect(next.at(-1)).toMatchObject({ remaining: 90, resetMs: 6_000 });
      clock.advance(900); // 1.5 tokens back: 91.5 tokens, 8.5 short of full
      const [after] = await burst(1, { tokenHash: o.tokenHash, ip: addr });
      expect(after).toMatchObject({ remaining: 90, resetMs: 5_700 });
      clock.advance(5_700);
      const [full] = await burst(1, { tokenHash: o.tokenHash, ip: addr });
      expect(full).toMatchObject({ remaining: 99, resetMs: 600 });
    });

    test("IP bucket admits 500 per second per IP, authenticated or not", async () => {
      const addr = ip();
      const results = await burst(550, { tokenHash: null, ip: addr });
      expect(count(results, Verdict.UNAUTHENTICATED)).toBe(500);
      expect(count(results, Verdict.IP_LIMITED)).toBe(50);
      expect(results[500]!.retryAfterMs).toBe(2);
      // Another IP is unaffected.
      expect(count(await burst(10, { tokenHash: null, ip: ip() }), Verdict.UNAUTHENTICATED)).toBe(10);
      // 500 per second: 2 ms gives one back, a full second gives 500 back.
      clock.advance(2);
      expect(count(await burst(2, { tokenHash: null, ip: addr }), Verdict.UNAUTHENTICATED)).toBe(1);
      clock.advance(1_000);
      expect(count(await burst(501, { tokenHash: null, ip: addr }), Verdict.UNAUTHENTICATED)).toBe(500);
      // Tokens known not to be valid count against the IP as well.
      const other = ip();
      await store.admission.projectToken("no-such-token", null, "fill");
      const unknown = await burst(501, { tokenHash: "no-such-token", ip: other });
      expect(count(unknown, Verdict.UNAUTHENTICATED)).toBe(500);
      expect(count(unknown, Verdict.IP_LIMITED)).toBe(1);
      expect(unknown[0]).toMatchObject({ remaining: 100, resetMs: 0 });
      expect(unknown[0]!.org).toBeUndefined();
    });

    test("a request refused by the org bucket consumes nothing from the IP bucket", async () => {
      const o = await org(Plan.FREE);
      const addr = ip();
      const results = await burst(450, { tokenHash: o.tokenHash, ip: addr });
      expect(count(results, Verdict.ALLOWED)).toBe(100);
      expect(count(results, Verdict.ORG_LIMITED)).toBe(350);
      // 100 taken from the IP's 500, the 350 refusals took none: exactly 400 left.
      const rest = await burst(401, { tokenHash: null, ip: addr });
      expect(count(rest, Verdict.UNAUTHENTICATED)).toBe(400);
      expect(count(rest, Verdict.IP_LIMITED)).toBe(1);
    });

    test("a request refused by the IP bucket consumes nothing from the org bucket", async () => {
      const o = await org(Plan.FREE);
      const addr = ip();
      await burst(500, { tokenHash: null, ip: addr });
      const refused = await burst(30, { tokenHash: o.tokenHash, ip: addr });
      expect(count(refused, Verdict.IP_LIMITED)).toBe(30);
      expect(refused[0]).toMatchObject({
        remaining: 100,
        resetMs: 0,
        retryAfterMs: 2,
        org: { id: o.id, slug: o.slug, plan: Plan.FREE },
      });
      const [fromElsewhere] = await burst(1, { tokenHash: o.tokenHash, ip: ip() });
      expect(fromElsewhere).toMatchObject({ verdict: Verdict.ALLOWED, remaining: 99 });
    });

    test("a plan change takes effect on the next request, keeping the tokens left", async () => {
      const o = await org(Plan.FREE);
      const addr = ip();
      expect(count(await burst(101, { tokenHash: o.tokenHash, ip: addr }), Verdict.ALLOWED)).toBe(100);
      await store.admission.projectOrg({ id: o.id, slug: o.slug, plan: Plan.PREMIUM, version: 2, verifiedDomains: [] });
      const [r] = await burst(1, { tokenHash: o.tokenHash, ip: addr });
      expect(r).toMatchObject({
        verdict: Verdict.ORG_LIMITED,
        org: { plan: Plan.PREMIUM },
        remaining: 0,
        resetMs: 60_000,
      });
      // Premium refills at 700 per minute: 86 ms (85.71...) gives one token.
      clock.advance(86);
      expect((await burst(1, { tokenHash: o.tokenHash, ip: addr }))[0]!.verdict).toBe(Verdict.ALLOWED);
    });

    test("the audience stamp: the same on every admission until touchAudience or a new projection, then another", async () => {
      const o = await org(Plan.PREMIUM);
      const stamp = async () => (await burst(1, { tokenHash: o.tokenHash, ip: ip() }))[0]!.org!.audienceStamp;
      const first = await stamp();
      expect(first).toMatch(/^[A-Za-z0-9_-]{12}$/);
      expect(await stamp()).toBe(first);
      await store.admission.touchAudience(o.id);
      const touched = await stamp();
      expect(touched).not.toBe(first);
      expect(await stamp()).toBe(touched);
      await store.admission.projectOrg({ id: o.id, slug: o.slug, plan: Plan.PREMIUM, version: 5, verifiedDomains: [] });
      expect(await stamp()).not.toBe(touched);
      // An organization that is not projected: nothing to touch, and the next admission rebuilds it.
      await store.admission.touchAudience("not-projected");
    });

    test("a revoked token is refused on the next request", async () => {
      const o = await org(Plan.PREMIUM);
      expect(await store.admission.lookupToken(o.tokenHash)).toMatchObject({
        kind: "valid",
        org: { id: o.id, slug: o.slug, plan: Plan.PREMIUM },
      });
      const addr = ip();
      expect((await burst(1, { tokenHash: o.tokenHash, ip: addr }))[0]!.verdict).toBe(Verdict.ALLOWED);
      await store.admission.projectToken(o.tokenHash, null, "write");
      const [after] = await burst(1, { tokenHash: o.tokenHash, ip: addr });
      expect(after!.verdict).toBe(Verdict.UNAUTHENTICATED);
      expect(after!.org).toBeUndefined();
      expect(await store.admission.lookupToken(o.tokenHash)).toEqual({ kind: "invalid" });
      // A rebuild from older records ("fill") never undoes the revocation.
      await store.admission.projectToken(o.tokenHash, o.id, "fill");
      expect((await burst(1, { tokenHash: o.tokenHash, ip: addr }))[0]!.verdict).toBe(Verdict.UNAUTHENTICATED);
    });

    test("a token the projection does not know is a miss: nothing is consumed", async () => {
      const addr = ip();
      const [r] = await burst(1, { tokenHash: "never-projected", ip: addr });
      expect(r).toMatchObject({ miss: true, remaining: 0 });
      expect(await store.admission.lookupToken("never-projected")).toEqual({ kind: "miss" });
      // The IP bucket is untouched: all 500 are still there.
      expect(count(await burst(501, { tokenHash: null, ip: addr }), Verdict.UNAUTHENTICATED)).toBe(500);
      // A token whose organization is not projected is a miss too.
      await store.admission.projectToken("orphan", "no-such-org", "fill");
      expect((await burst(1, { tokenHash: "orphan", ip: ip() }))[0]).toMatchObject({ miss: true });
      // Filled from the records, it is admitted.
      await store.admission.projectOrg({
        id: "no-such-org",
        slug: "late",
        plan: Plan.FREE,
        version: 1,
        verifiedDomains: [],
      });
      expect((await burst(1, { tokenHash: "orphan", ip: ip() }))[0]).toMatchObject({
        verdict: Verdict.ALLOWED,
        org: { slug: "late" },
      });
    });

    test("one batch mixing a miss, a valid token, no token and a revoked token answers each in order, as alone", async () => {
      const o = await org(Plan.FREE);
      await store.admission.projectToken("revoked-in-batch", null, "write");
      const addr = ip();
      const results = await store.admission.admit(
        [
          { tokenHash: "never-projected-in-batch", ip: addr },
          { tokenHash: o.tokenHash, ip: addr },
          { tokenHash: null, ip: addr },
          { tokenHash: "revoked-in-batch", ip: addr },
          { tokenHash: o.tokenHash, ip: addr },
        ],
        clock.nowMs(),
      );
      expect(results.map((r) => (r.miss ? "miss" : Verdict[r.verdict]))).toEqual([
        "miss",
        "ALLOWED",
        "UNAUTHENTICATED",
        "UNAUTHENTICATED",
        "ALLOWED",
      ]);
      expect(results.map((r) => r.remaining)).toEqual([0, 99, 100, 100, 98]);
      // The miss took nothing: the IP gave exactly four of its 500.
      expect(count(await burst(500, { tokenHash: null, ip: addr }), Verdict.UNAUTHENTICATED)).toBe(496);
    });

    test("an older projection of an organization never overwrites a newer one", async () => {
      const o = await org(Plan.FREE);
      await store.admission.projectOrg({
        id: o.id,
        slug: o.slug,
        plan: Plan.ENTERPRISE,
        version: 5,
        verifiedDomains: [],
      });
      await store.admission.projectOrg({ id: o.id, slug: o.slug, plan: Plan.PREMIUM, version: 4, verifiedDomains: [] });
      expect((await burst(1, { tokenHash: o.tokenHash, ip: ip() }))[0]!.org!.plan).toBe(Plan.ENTERPRISE);
      // The same version again (a rebuild of what is there) is harmless.
      await store.admission.projectOrg({
        id: o.id,
        slug: o.slug,
        plan: Plan.ENTERPRISE,
        version: 5,
        verifiedDomains: [],
      });
      expect((await burst(1, { tokenHash: o.tokenHash, ip: ip() }))[0]!.org!.plan).toBe(Plan.ENTERPRISE);
    });
  });
}

describe("redis hot store: the admission script on the wire", () => {
  let redis: Redis;
  let store: RedisHot;
  beforeAll(async () => {
    redis = await connectRedis(servers.redisUrl());
    store = new RedisHot(await connectRedis(servers.redisUrl()));
  });
  afterAll(async () => {
    redis.disconnect();
    await store.lifecycle.close();
  });

  test("writes the two buckets ('level:ms') with TTLs until full, and nothing when refused", async () => {
    const now = 1_800_000_000_000;
    await store.admission.projectOrg({
      id: "wire-org",
      slug: "wire",
      plan: Plan.FREE,
      version: 1,
      verifiedDomains: ["wire.example"],
    });
    await store.admission.projectToken("wire-hash", "wire-org", "write");
    expect(await redis.hgetall(keys.org("wire-org"))).toEqual({
      v: "1",
      slug: "wire",
      plan: "1",
      a: expect.any(String),
      "d:wire.example": "1",
    });
    expect(await redis.get(keys.token("wire-hash"))).toBe("wire-org");
    const [r] = await store.admission.admit([{ tokenHash: "wire-hash", ip: "192.0.2.7" }], now);
    expect(r).toMatchObject({ verdict: Verdict.ALLOWED, remaining: 99, resetMs: 600 });
    expect(await redis.get(keys.orgBucket("wire-org"))).toBe(`${99 * 60_000}:${now}`);
    expect(await redis.get(keys.ipBucket("192.0.2.7"))).toBe(`${499 * 1_000}:${now}`);
    const orgTtl = await redis.pttl(keys.orgBucket("wire-org"));
    expect(orgTtl).toBeGreaterThan(1_500);
    expect(orgTtl).toBeLessThanOrEqual(1_600);
    expect(await redis.pttl(keys.ipBucket("192.0.2.7"))).toBeLessThanOrEqual(1_002);

    // A refusal by the IP bucket writes nothing.
    await redis.set(keys.ipBucket("192.0.2.8"), `999:${now}`);
    const [limited] = await store.admission.admit([{ tokenHash: "wire-hash", ip: "192.0.2.8" }], now);
    expect(limited).toMatchObject({ verdict: Verdict.IP_LIMITED, retryAfterMs: 1 });
    expect(await redis.get(keys.orgBucket("wire-org"))).toBe(`${99 * 60_000}:${now}`);
    expect(await redis.get(keys.ipBucket("192.0.2.8"))).toBe(`999:${now}`);
  });

  test("a token known not to be valid is remembered for a minute only", async () => {
    await store.admission.projectToken("bad-hash", null, "fill");
    expect(await redis.get(keys.token("bad-hash"))).toBe("");
    const ttl = await redis.pttl(keys.token("bad-hash"));
    expect(ttl).toBeGreaterThan(59_000);
    expect(ttl).toBeLessThanOrEqual(60_000);
  });

  test("survives SCRIPT FLUSH (EVALSHA reloads on NOSCRIPT)", async () => {
    await redis.script("FLUSH");
    const [r] = await store.admission.admit([{ tokenHash: null, ip: "192.0.2.9" }], Date.now());
    expect(r!.verdict).toBe(Verdict.UNAUTHENTICATED);
  });
});
