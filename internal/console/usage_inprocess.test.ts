// What the console's usage counts, exactly: every 429 through the real HTTP API and the
// daemon's real RPCs, by kind, per organization, with the daemon's clock held still so the
// buckets do not refill. On every hot store (embedded, Redis, Redis Cluster).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ManualClock } from "../clock/clock";
import { type GetUsageResponse, SignInOutcome } from "../gen/mailcore/limiter/v1/console_pb";
import { Plan } from "../gen/mailcore/limiter/v1/limiter_pb";
import type { HotStore } from "../hotstore/hotstore";
import { hotStoreServers, hotStores } from "../testkit/hotstores";
import { type InProcess, startInProcess } from "../testkit/inprocess";
import { pool } from "../testkit/testkit";

const POLICY = { maxAttempts: 3, retryBaseMs: 1_000, bounceCooldownMs: 3_600_000 };
const PASSWORD = "a long enough password";

const servers = hotStoreServers();

for (const [name, open] of hotStores(servers)) {
  describe(`usage through the API (${name} store)`, () => {
    let store: HotStore;
    let clock: ManualClock;
    let svc: InProcess;
    const tokens: Record<string, string> = {};
    const sessions: Record<string, string> = {};

    beforeAll(async () => {
      store = await open();
      clock = new ManualClock(Date.UTC(2026, 10, 1, 8, 0, 30));
      svc = await startInProcess(store, clock, POLICY);
      for (const [slug, plan] of [
        ["small", Plan.FREE],
        ["large", Plan.ENTERPRISE],
      ] as const) {
        await svc.clients.directory.createOrganization({ slug, plan });
        await svc.clients.directory.addDomain({ slug, domain: `${slug}.example`, verified: true });
        tokens[slug] = (await svc.clients.directory.createToken({ slug })).token;
        await svc.clients.console.createUser({ slug, email: `ops@${slug}.example`, password: PASSWORD });
        const s = await svc.clients.console.signIn({
          email: `ops@${slug}.example`,
          password: PASSWORD,
          clientIp: "127.0.0.1",
        });
        expect(s.outcome).toBe(SignInOutcome.SIGNED_IN);
        sessions[slug] = s.sessionToken;
      }
    });
    afterAll(async () => {
      await svc?.stop();
      await store?.lifecycle.close();
    });

    const tags = (slug: string) =>
      fetch(`${svc.apiUrl}/api/v1/tags`, { headers: { Authorization: `Bearer ${tokens[slug]}` } }).then(
        (r) => r.status,
      );
    const send = (slug: string, to: string) =>
      fetch(`${svc.apiUrl}/api/v1/emails`, {
        method: "POST",
        headers: { Authorization: `Bearer ${tokens[slug]}`, "Content-Type": "application/json" },
        body: JSON.stringify({ from: `app@${slug}.example`, to, subject: "s", text: "t" }),
      }).then(async (r) => ({ status: r.status, body: (await r.json()) as Record<string, unknown> }));
    const usage = (slug: string) => svc.clients.console.getUsage({ sessionToken: sessions[slug] });
    const totals = (u: GetUsageResponse) =>
      u.refusals.reduce(
        (t, m) => ({ quota: t.quota + m.quota, ip: t.ip + m.ip, recipient: t.recipient + m.recipient }),
        { quota: 0, ip: 0, recipient: 0 },
      );

    test("quota, IP and recipient refusals are counted exactly, each for its own organization; admitted requests are not", async () => {
      // All requests come from 127.0.0.1, whose bucket holds 500; the clock stands still.
      const small = await pool(103, 8, () => tags("small"));
      expect(small.filter((s) => s === 429)).toHaveLength(3); // the free plan's 100, then its quota
      // A refused request consumes nothing: the IP has 400 left.
      const large = await pool(401, 8, () => tags("large"));
      expect(large.filter((s) => s === 429)).toHaveLength(1);
      clock.advance(1_000); // the IP bucket refills; the organizations' barely
      const sends = [];
      for (let i = 0; i < 6; i++) sends.push(await send("large", "someone@example.org"));
      expect(sends.map((s) => s.status)).toEqual([202, 202, 202, 202, 202, 429]);
      expect(sends[5]!.body.code).toBe("RECIPIENT_RATE_LIMITED");

      const [s, l] = [await usage("small"), await usage("large")];
      expect(totals(s)).toEqual({ quota: 3, ip: 0, recipient: 0 });
      expect(totals(l)).toEqual({ quota: 0, ip: 1, recipient: 1 });
      // The current minute holds them all.
      expect(l.refusals.at(-1)).toMatchObject({ quota: 0, ip: 1, recipient: 1 });
      expect(l.refusals.at(-1)!.minuteStartMs).toBe(BigInt(Date.UTC(2026, 10, 1, 8, 0, 0)));
      // The buckets as admission left them: 1 s refilled 1.67 tokens of free, 33.3 of enterprise.
      expect(s).toMatchObject({ plan: Plan.FREE, quota: 100, remaining: 1, resetSeconds: 59 });
      expect(l).toMatchObject({ plan: Plan.ENTERPRISE, quota: 2_000, remaining: 2_000 - 400 - 6 + 33 });
      expect(l.lanes.map((x) => [x.depth, x.rate])).toEqual([
        [5n, 40],
        [0n, 40],
      ]);
    });
  });
}
