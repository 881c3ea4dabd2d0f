// What happened to an organization's mail, over separate processes (limiterd, api, worker) on
// both deployments: the activity log's filters and pages, the hourly counters with the 429s by
// kind, and the webhooks' test event, replay (of a delivered and of a failed delivery) and health
// against a receiver this test starts.
// The worker simulates the fixtures' outcomes; WEBHOOK_SCHEDULE_DIVISOR=1000 turns the retry
// schedule's 5 s and 5 min into 5 ms and 300 ms.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { MailcoreClient } from "../apiclient/client";
import { type PostgresServer, startPostgres } from "../testkit/postgres";
import { type Receiver, startReceiver } from "../testkit/receiver";
import { getJson, type RedisServer, sendEmail, type Stack, startRedis, startStack, waitFor } from "../testkit/testkit";

const ENV = { WEBHOOK_ALLOW_PRIVATE_URLS: "1", WEBHOOK_SCHEDULE_DIVISOR: "1000" };

interface Item {
  id: string;
  status: string;
  lane: string;
  to: string;
  tags: string[];
  createdAt: string;
}

const DEPLOYMENTS: [string, () => Promise<{ stack: Stack; stop: () => Promise<void> }>][] = [
  [
    "embedded store, SQLite records",
    async () => {
      const stack = await startStack({ workers: 1, env: ENV });
      return { stack, stop: () => stack.stop() };
    },
  ],
  [
    "Redis and PostgreSQL",
    async () => {
      let redis: RedisServer | undefined;
      let pg: PostgresServer | undefined;
      redis = await startRedis();
      pg = await startPostgres();
      const stack = await startStack({
        redisUrl: redis.url,
        workers: 1,
        env: { ...ENV, DATABASE_URL: await pg.newDatabase() },
      });
      return {
        stack,
        stop: async () => {
          await stack.stop();
          await redis?.stop();
          await pg?.stop();
        },
      };
    },
  ],
];

for (const [name, start] of DEPLOYMENTS) {
  describe(`activity over real processes: ${name}`, () => {
    let stack: Stack;
    let stop: () => Promise<void>;
    let token: string;
    let api: string;
    const get = async (path: string) => getJson(`${api}${path}`, token);
    const sent: { id: string; to: string; lane: string; tags: string[] }[] = [];
    let recipientRefusals = 0;

    beforeAll(async () => {
      ({ stack, stop } = await start());
      api = stack.apiUrls[0]!;
      token = await stack.org("acme", "enterprise");
      const sends = [
        { to: "delivered@fixtures.test", tags: ["welcome"] },
        { to: "bounced@fixtures.test", lane: "bulk", tags: ["news", "welcome"] },
        { to: "delivered@fixtures.test", lane: "bulk" },
        ...Array.from({ length: 6 }, (_, i) => ({
          to: i % 2 ? "Kim+x@Example.org" : "kim@example.org",
          tags: ["code"],
        })),
      ];
      for (const s of sends) {
        const lane = s.lane ?? "transactional";
        const res = await sendEmail(api, token, {
          from: "Acme <no-reply@acme.example>",
          to: s.to,
          subject: `To ${s.to}`,
          text: "Hello",
          lane,
          ...(s.tags ? { tags: s.tags } : {}),
        });
        if (res.status === 429) recipientRefusals++;
        else {
          expect(res.status).toBe(202);
          sent.push({ id: res.body.id as string, to: s.to, lane, tags: s.tags ?? [] });
        }
        // Distinct acceptance times, so that newest first is one order.
        await Bun.sleep(3);
      }
    }, 120_000);
    afterAll(async () => {
      await stop?.();
    });

    test("GET /api/v1/emails: newest first, every filter, pages by cursor, bad filters refused by name", async () => {
      expect(recipientRefusals).toBe(1);
      expect(sent).toHaveLength(8);
      await waitFor(
        "every message to be recorded as delivered or bounced",
        async () => {
          const listed = (await get("/api/v1/emails")).body.data as Item[];
          return listed.length === 8 && listed.every((m) => m.status === "delivered" || m.status === "bounced");
        },
        30_000,
      );
      const all = await get("/api/v1/emails");
      expect(all.status).toBe(200);
      expect(all.headers.get("RateLimit-Limit")).toBe("2000");
      const items = all.body.data as Item[];
      expect(items.map((m) => m.id)).toEqual(sent.map((s) => s.id).reverse());
      expect(all.body.nextCursor).toBeNull();
      expect(items.at(-1)).toMatchObject({
        id: sent[0]!.id,
        lane: "transactional",
        from: "Acme <no-reply@acme.example>",
        to: "delivered@fixtures.test",
        subject: "To delivered@fixtures.test",
        tags: ["welcome"],
      });

      const ids = async (query: string) =>
        ((await get(`/api/v1/emails?${query}`)).body.data as Item[]).map((m) => m.id);
      const expected = (keep: (s: (typeof sent)[number]) => boolean) =>
        sent
          .filter(keep)
          .map((s) => s.id)
          .reverse();
      expect(await ids("status=bounced")).toEqual([sent[1]!.id]);
      expect(await ids("tag=welcome")).toEqual(expected((s) => s.tags.includes("welcome")));
      expect(await ids("tag=welcome&lane=transactional")).toEqual([sent[0]!.id]);
      expect(await ids("lane=bulk")).toEqual(expected((s) => s.lane === "bulk"));
      // Compared as the guards compare mailboxes: case aside, without the +tag.
      expect(await ids(`to=${encodeURIComponent("KIM+whatever@example.ORG")}`)).toEqual(
        expected((s) => /kim/i.test(s.to)),
      );
      const third = items.find((m) => m.id === sent[2]!.id)!;
      expect(await ids(`after=${encodeURIComponent(third.createdAt)}&tag=code`)).toEqual(
        expected((s) => s.tags.includes("code")),
      );
      expect(await ids(`before=${encodeURIComponent(third.createdAt)}`)).toEqual([sent[1]!.id, sent[0]!.id]);

      // Pages of 3 through the typed client: each message once, in order.
      const client = new MailcoreClient({ baseUrl: api, token });
      const walked: string[] = [];
      let cursor: string | undefined;
      do {
        const { data, error } = await client.call("listEmails", { query: { limit: 3, ...(cursor ? { cursor } : {}) } });
        expect(error).toBeUndefined();
        expect(data!.data.length).toBeLessThanOrEqual(3);
        walked.push(...data!.data.map((m) => m.id));
        cursor = data!.nextCursor ?? undefined;
      } while (cursor);
      expect(walked).toEqual(items.map((m) => m.id));

      for (const [query, field] of [
        ["status=lost", "status"],
        ["lane=slow", "lane"],
        ["to=nobody", "to"],
        ["tag=two%20words", "tag"],
        ["after=yesterday", "after"],
        ["before=2026-13-01T00:00:00Z", "before"],
        ["after=2026-11-02T00:00:00Z&before=2026-11-01T00:00:00Z", "before"],
        ["limit=0", "limit"],
        ["limit=101", "limit"],
        ["cursor=notACursor", "cursor"],
      ]) {
        const res = await get(`/api/v1/emails?${query}`);
        expect({ query, status: res.status, code: res.body.code, field: res.body.field }).toEqual({
          query,
          status: 422,
          code: "VALIDATION_FAILED",
          field,
        });
      }
      // Another organization sees none of it.
      const other = await stack.org("other", "free");
      expect((await getJson(`${api}/api/v1/emails`, other)).body.data).toEqual([]);
    }, 60_000);

    test("GET /api/v1/stats/emails: the counters per hour and per day, the 429s by kind", async () => {
      // A free organization's bucket holds 100 requests: the rest of a burst of 130 are refused.
      const flood = await stack.org("flood", "free");
      const burst = await Promise.all(Array.from({ length: 130 }, () => getJson(`${api}/api/v1/tags`, flood)));
      let refused = burst.filter((r) => r.status === 429).length;
      expect(refused).toBeGreaterThanOrEqual(25);
      const stats = async (t: string, query = "") =>
        (await getJson(`${api}/api/v1/stats/emails${query}`, t)).body as {
          interval: string;
          since: string;
          until: string;
          data: {
            start: string;
            accepted: number;
            delivered: number;
            bounced: number;
            refused: { quota: number; ip: number; recipient: number };
          }[];
        };
      // The flood's own reads wait for its bucket to refill (one request per 600 ms); those
      // refused meanwhile are refusals too.
      let floodTotal = -1;
      await waitFor(
        "the refusals to be counted",
        async () => {
          const res = await getJson(`${api}/api/v1/stats/emails`, flood);
          if (res.status === 429) {
            refused++;
            return false;
          }
          const counted = (res.body as Awaited<ReturnType<typeof stats>>).data;
          floodTotal = counted.reduce((n, r) => n + r.refused.quota, 0);
          return floodTotal === refused;
        },
        20_000,
        700,
      );
      expect(floodTotal).toBe(refused);

      await waitFor(
        "every outcome to be counted",
        async () => {
          const rows = (await stats(token)).data;
          return rows.reduce((n, r) => n + r.delivered, 0) === 7 && rows.reduce((n, r) => n + r.bounced, 0) === 1;
        },
        30_000,
      );
      const hourly = await stats(token);
      expect(hourly.interval).toBe("hour");
      expect(hourly.data).toHaveLength(24);
      const sum = (k: "accepted" | "delivered" | "bounced") => hourly.data.reduce((n, r) => n + r[k], 0);
      expect([sum("accepted"), sum("delivered"), sum("bounced")]).toEqual([8, 7, 1]);
      expect(hourly.data.reduce((n, r) => n + r.refused.recipient, 0)).toBe(1);
      expect(Date.parse(hourly.until) - Date.parse(hourly.since)).toBe(24 * 3_600_000);

      const daily = await stats(token, "?interval=day");
      expect(daily.data).toHaveLength(30);
      expect(daily.data.reduce((n, r) => n + r.accepted, 0)).toBe(8);
      expect(daily.since.endsWith("T00:00:00.000Z")).toBe(true);
      const now = new Date();
      const later = new Date(now.getTime() + 3_600_000).toISOString();
      const earlier = new Date(now.getTime() - 41 * 86_400_000).toISOString();
      const none = await stats(
        token,
        `?since=${encodeURIComponent(later)}&until=${encodeURIComponent(new Date(now.getTime() + 7_200_000).toISOString())}`,
      );
      expect(none.data.map((r) => r.accepted)).toEqual(Array(none.data.length).fill(0));

      for (const [query, field] of [
        ["interval=week", "interval"],
        ["since=soon", "since"],
        [`since=${encodeURIComponent(later)}&until=${encodeURIComponent(now.toISOString())}`, "until"],
        [`since=${encodeURIComponent(earlier)}`, "since"],
      ]) {
        const res = await get(`/api/v1/stats/emails?${query}`);
        expect({ query, status: res.status, field: res.body.field }).toEqual({ query, status: 422, field });
      }
      expect((await get(`/api/v1/stats/emails?interval=day&since=${encodeURIComponent(earlier)}`)).status).toBe(200);
    }, 60_000);

    test("webhooks: a signed test event, the replay of a delivery, the endpoint's health, a cursor refused", async () => {
      const startedMs = Date.now();
      const receiver: Receiver = startReceiver();
      try {
        receiver.answer("/down", () => 500);
        const post = async (path: string, body?: unknown) => {
          const res = await fetch(`${api}${path}`, {
            method: "POST",
            headers: {
              Authorization: `Bearer ${token}`,
              ...(body ? { "Content-Type": "application/json" } : {}),
            },
            body: body ? JSON.stringify(body) : undefined,
          });
          return { status: res.status, body: (await res.json()) as Record<string, unknown> };
        };
        const up = (await post("/api/v1/webhooks", { url: `${receiver.url}/up`, events: ["email.failed"] })).body;
        const down = (await post("/api/v1/webhooks", { url: `${receiver.url}/down`, events: ["email.failed"] })).body;

        // Both lists page by cursor, and refuse one they did not give (as every list does).
        const first = await get("/api/v1/webhooks?limit=1");
        const second = await get(`/api/v1/webhooks?limit=1&cursor=${first.body.nextCursor}`);
        const ids = (page: typeof first) => (page.body.data as { id: string }[]).map((h) => h.id);
        expect([...ids(first), ...ids(second)]).toEqual([down.id as string, up.id as string]);
        expect(second.body.nextCursor).toBeNull();
        for (const path of ["/api/v1/webhooks", `/api/v1/webhooks/${up.id}/deliveries`]) {
          const res = await get(`${path}?cursor=notACursor`);
          expect({ path, status: res.status, code: res.body.code, field: res.body.field }).toEqual({
            path,
            status: 422,
            code: "VALIDATION_FAILED",
            field: "cursor",
          });
        }

        const tested = await post(`/api/v1/webhooks/${up.id}/test`);
        expect(tested.status).toBe(202);
        expect(tested.body).toMatchObject({ type: "webhook.test", state: "pending", attempts: [] });
        await waitFor("the test event", async () => receiver.at("/up").length === 1);
        const got = receiver.at("/up")[0]!;
        expect(JSON.parse(got.body)).toMatchObject({ type: "webhook.test", data: { webhookId: up.id } });
        expect(got.headers["webhook-id"]).toBe(tested.body.id as string);
        expect(got.headers["webhook-signature"]).toMatch(/^v1,/);

        const deliveryPath = `/api/v1/webhooks/${up.id}/deliveries`;
        await waitFor(
          "the test delivery to be delivered",
          async () => ((await get(deliveryPath)).body.data as { state: string }[])[0]?.state === "delivered",
        );
        const replay = await post(`/api/v1/webhooks/${up.id}/deliveries/${tested.body.id}/retry`);
        expect(replay.status).toBe(202);
        expect(replay.body).toMatchObject({ id: tested.body.id, state: "pending" });
        await waitFor("the replay", async () => receiver.at("/up").length === 2);
        expect(receiver.at("/up")[1]!.headers["webhook-id"]).toBe(tested.body.id as string);
        await waitFor(
          "the replay's attempt to be listed",
          async () => ((await get(deliveryPath)).body.data as { attempts: unknown[] }[])[0]?.attempts.length === 2,
        );

        const failing = await post(`/api/v1/webhooks/${down.id}/test`);
        await waitFor("two failed attempts", async () => receiver.at("/down").length >= 2);
        const pending = await post(`/api/v1/webhooks/${down.id}/deliveries/${failing.body.id}/retry`);
        expect(pending.status).toBe(409);
        expect(pending.body.code).toBe("DELIVERY_PENDING");
        expect((await post(`/api/v1/webhooks/${down.id}/deliveries/whd_000000000000000000000000/retry`)).status).toBe(
          404,
        );
        expect((await post(`/api/v1/webhooks/${up.id}/deliveries/${failing.body.id}/retry`)).status).toBe(404);
        expect((await post("/api/v1/webhooks/wh_000000000000000000000000/test")).status).toBe(404);
        expect((await post("/api/v1/webhooks/nope/test")).status).toBe(422);

        await waitFor("the health to show", async () => {
          const hooks = (await get("/api/v1/webhooks")).body.data as Record<string, unknown>[];
          const d = hooks.find((h) => h.id === down.id)!;
          return (d.consecutiveFailures as number) >= 2;
        });
        const hooks = (await get("/api/v1/webhooks")).body.data as Record<string, unknown>[];
        const u = hooks.find((h) => h.id === up.id)!;
        const d = hooks.find((h) => h.id === down.id)!;
        expect(u).toMatchObject({ consecutiveFailures: 0, lastFailureAt: null, disabled: false });
        expect(Date.parse(u.lastSuccessAt as string)).toBeGreaterThanOrEqual(startedMs - 1_000);
        expect(d).toMatchObject({ lastSuccessAt: null, disabled: false });
        expect(typeof d.lastFailureAt).toBe("string");
      } finally {
        await receiver.stop();
      }
    }, 60_000);
  });
}

// A delivery that ends failed takes the whole retry schedule: divided by 100,000 it is about a
// second (and the 5-day disable window 4.3 s, which fails a delivery too). Embedded store only:
// the replay is the same statement on both databases, and the replay of a delivered one runs on both above.
describe("a failed webhook delivery over real processes: embedded store, SQLite records", () => {
  let stack: Stack;
  let receiver: Receiver;
  beforeAll(async () => {
    receiver = startReceiver();
    stack = await startStack({ workers: 1, env: { ...ENV, WEBHOOK_SCHEDULE_DIVISOR: "100000" } });
  }, 60_000);
  afterAll(async () => {
    await stack?.stop();
    await receiver?.stop();
  });

  test("is replayed: pending again with its attempts, the next one numbered after them, the same webhook-id", async () => {
    const api = stack.apiUrls[0]!;
    const token = await stack.org("acme", "enterprise");
    const post = async (path: string, body?: unknown) => {
      const res = await fetch(`${api}${path}`, {
        method: "POST",
        headers: { Authorization: `Bearer ${token}`, ...(body ? { "Content-Type": "application/json" } : {}) },
        body: body ? JSON.stringify(body) : undefined,
      });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    receiver.answer("/flaky", () => 500);
    const hook = (await post("/api/v1/webhooks", { url: `${receiver.url}/flaky`, events: ["email.failed"] })).body;
    const tested = (await post(`/api/v1/webhooks/${hook.id}/test`)).body;
    type Delivery = { id: string; state: string; nextAttemptAt: string | null; attempts: Record<string, unknown>[] };
    const delivery = async () =>
      ((await getJson(`${api}/api/v1/webhooks/${hook.id}/deliveries`, token)).body.data as Delivery[])[0]!;
    await waitFor("the delivery to fail", async () => (await delivery()).state === "failed", 30_000);
    const failed = await delivery();
    expect(failed.nextAttemptAt).toBeNull();
    const tried = failed.attempts.length;
    expect(tried).toBeGreaterThanOrEqual(2);
    expect(failed.attempts.every((a) => a.statusCode === 500)).toBe(true);

    receiver.answer("/flaky", () => 200);
    const replay = await post(`/api/v1/webhooks/${hook.id}/deliveries/${tested.id}/retry`);
    expect(replay.status).toBe(202);
    expect(replay.body).toMatchObject({ id: tested.id, state: "pending" });
    expect((replay.body.attempts as unknown[]).length).toBe(tried);
    await waitFor("the replay to be delivered", async () => (await delivery()).state === "delivered");
    const delivered = await delivery();
    expect(delivered.attempts.length).toBe(tried + 1);
    expect(delivered.attempts.at(-1)).toMatchObject({ attempt: tried + 1, statusCode: 200 });
    expect(receiver.at("/flaky").at(-1)!.headers["webhook-id"]).toBe(tested.id as string);
  }, 60_000);
});
