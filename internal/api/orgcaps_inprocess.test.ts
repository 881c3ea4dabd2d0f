// An organization's caps through the real HTTP API and the daemon's real RPCs: past its queue
// cap a send is refused with 429 QUEUE_FULL and Retry-After, nothing queued, while other
// organizations send on; past its webhooks cap a create is refused with 409 TOO_MANY_WEBHOOKS.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { ManualClock } from "../clock/clock";
import { Plan } from "../gen/mailcore/limiter/v1/limiter_pb";
import type { HotStore } from "../hotstore/hotstore";
import { QUEUE_FULL_MESSAGES } from "../mail/policy";
import { MAX_WEBHOOKS_PER_ORG } from "../webhooks/endpoint";
import { hotStoreServers, hotStores } from "../testkit/hotstores";
import { type InProcess, startInProcess } from "../testkit/inprocess";

const POLICY = { maxAttempts: 3, retryBaseMs: 1_000, bounceCooldownMs: 3_600_000 };
const servers = hotStoreServers();

for (const [name, open] of hotStores(servers)) {
  describe(`an organization's caps through the API (${name} store)`, () => {
    let store: HotStore;
    let svc: InProcess;
    const tokens: Record<string, string> = {};

    beforeAll(async () => {
      store = await open();
      svc = await startInProcess(store, new ManualClock(Date.UTC(2026, 10, 1, 8)), POLICY, 60_000, {
        queueCap: { messages: 3, bytes: 1_000_000 },
      });
      for (const slug of ["full", "roomy"]) tokens[slug] = (await svc.sender(slug, Plan.PREMIUM)).token;
    });
    afterAll(async () => {
      await svc?.stop();
      await store?.lifecycle.close();
    });

    const send = async (slug: string, i: number) => {
      const res = await fetch(`${svc.apiUrl}/api/v1/emails`, {
        method: "POST",
        headers: { Authorization: `Bearer ${tokens[slug]}`, "Content-Type": "application/json" },
        body: JSON.stringify({ from: `A <a@${slug}.example>`, to: `kim+${i}@example.org`, subject: "s", text: "t" }),
      });
      return { status: res.status, retryAfter: res.headers.get("Retry-After"), body: await res.json() };
    };

    test("past MAX_QUEUED_PER_ORG: 429 QUEUE_FULL with Retry-After; another organization is not held back", async () => {
      for (let i = 0; i < 3; i++) expect((await send("full", i)).status).toBe(202);
      expect(await send("full", 3)).toEqual({
        status: 429,
        retryAfter: "60",
        body: { code: "QUEUE_FULL", message: QUEUE_FULL_MESSAGES.messages },
      });
      expect((await send("roomy", 0)).status).toBe(202);
    });

    test("past MAX_WEBHOOKS_PER_ORG endpoints: 409 TOO_MANY_WEBHOOKS", async () => {
      const create = (i: number) =>
        fetch(`${svc.apiUrl}/api/v1/webhooks`, {
          method: "POST",
          headers: { Authorization: `Bearer ${tokens.roomy}`, "Content-Type": "application/json" },
          body: JSON.stringify({ url: `https://hooks.roomy.example/${i}`, events: ["email.queued"] }),
        });
      for (let i = 0; i < MAX_WEBHOOKS_PER_ORG; i++) expect((await create(i)).status).toBe(201);
      const refused = await create(MAX_WEBHOOKS_PER_ORG);
      expect([refused.status, await refused.json()]).toEqual([
        409,
        {
          code: "TOO_MANY_WEBHOOKS",
          message: `This organization has ${MAX_WEBHOOKS_PER_ORG} webhooks, the most it may have: delete one first.`,
        },
      ]);
    });
  });
}
