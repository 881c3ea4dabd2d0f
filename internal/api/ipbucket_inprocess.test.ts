// The IP bucket (500 requests at once) through the real HTTP API and the daemon's real RPCs,
// with the daemon's clock held still, so the bucket never refills and every count is exact: the
// addresses of one IPv6 network share one bucket, and the pages that ask the daemon without an
// API token (the console, /readyz) count against it too. The API trusts X-Forwarded-For from
// this test, as it would from a proxy.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ManualClock } from "../clock/clock";
import type { HotStore } from "../hotstore/hotstore";
import { IP_QUOTA } from "../plans/plans";
import { hotStoreServers, hotStores } from "../testkit/hotstores";
import { type InProcess, startInProcess } from "../testkit/inprocess";

const POLICY = { maxAttempts: 3, retryBaseMs: 1_000, bounceCooldownMs: 3_600_000 };
const servers = hotStoreServers();

/** Sends fn(i) for i < n all at once; counts their statuses. */
async function burst(n: number, fn: (i: number) => Promise<Response>) {
  const statuses = await Promise.all(
    Array.from({ length: n }, async (_, i) => {
      const res = await fn(i);
      await res.arrayBuffer();
      return res.status;
    }),
  );
  return (status: number) => statuses.filter((s) => s === status).length;
}

for (const [name, open] of hotStores(servers)) {
  describe(`the IP bucket, the clock held still (${name} store)`, () => {
    let store: HotStore;
    let svc: InProcess;
    const clock = new ManualClock(Date.UTC(2026, 10, 1, 8));
    const get = (path: string, from: string) => fetch(`${svc.apiUrl}${path}`, { headers: { "X-Forwarded-For": from } });

    beforeAll(async () => {
      store = await open();
      svc = await startInProcess(store, clock, POLICY, 60_000, { trustProxy: ["127.0.0.1"] });
    });
    afterAll(async () => {
      await svc?.stop();
      await store?.lifecycle.close();
    });

    test("2,000 requests from 200 addresses of one /64 share one bucket: exactly 500 pass", async () => {
      // No token: a request the IP bucket admits is a 401, one it refuses a 429.
      const count = await burst(2_000, (i) =>
        get("/api/v1/tags", `2001:db8:1:2:${(i % 200).toString(16)}::${i.toString(16)}`),
      );
      expect([count(401), count(429)]).toEqual([IP_QUOTA, 2_000 - IP_QUOTA]);
    });

    test("2,000 requests from 2,000 networks: none is refused", async () => {
      const count = await burst(2_000, (i) => get("/api/v1/tags", `2001:db8:2:${i.toString(16)}::1`));
      expect(count(401)).toBe(2_000);
    });

    test("the console and /readyz take from the bucket of the address they come from", async () => {
      const from = "203.0.113.77";
      const paths = ["/api/v1/tags", "/readyz", "/console/sign-in"];
      const count = await burst(900, (i) => get(paths[i % 3]!, from));
      // 401 from the API, 200 from the pages: 500 in all; the rest are 429.
      expect([count(401) + count(200), count(429)]).toEqual([IP_QUOTA, 900 - IP_QUOTA]);
      const limited = await get("/console/sign-in", from);
      expect([limited.status, limited.headers.get("Retry-After")]).toEqual([429, "1"]);
      expect(await limited.text()).toContain("Too many requests from your address");
      expect((await get("/readyz", from)).status).toBe(429);
      // Another address is not held back by this one.
      expect((await get("/readyz", "203.0.113.78")).status).toBe(200);
    });
  });
}
