// test-runner: alone
// Record-bound calls while a transaction holds the records' tables locked: each answers within
// AUDIENCE_TIMEOUT_MS (plus a margin), one that answers 503 was not written, its retry with the
// same Idempotency-Key creates it once, and sends and GET /api/v1/tags do not notice the lock.
// limiterd, the API and PostgreSQL and Redis are real processes this file starts.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { SQL } from "bun";
import { type PostgresServer, startPostgres } from "../testkit/postgres";
import { type RedisServer, sendEmail, type Stack, startRedis, startStack } from "../testkit/testkit";

/** AUDIENCE_TIMEOUT_MS's default: the bound a record-bound call answers within. */
const BOUND_MS = 5_000;
/** What a loaded test machine adds to it. */
const MARGIN_MS = 1_500;
const LOCK_MS = 12_000;
const LOCKED_TABLES = "subscribers, tags, campaigns, workflows, webhook_endpoints, idempotency_keys";

type Json = Record<string, unknown>;
interface Answer {
  status: number;
  headers: Headers;
  body: Json;
  ms: number;
}

let pg: PostgresServer;
let redis: RedisServer;
let stack: Stack;
let databaseUrl: string;
let token: string;
beforeAll(async () => {
  pg = await startPostgres();
  redis = await startRedis();
  databaseUrl = await pg.newDatabase();
  stack = await startStack({ redisUrl: redis.url, env: { DATABASE_URL: databaseUrl } });
  token = await stack.org("locked", "enterprise");
  const [tested, other] = await Promise.all(
    ["tested", "other-tested"].map((name) =>
      call("POST", "/api/v1/webhooks", { url: `https://hooks.locked.example/${name}`, events: ["email.delivered"] }),
    ),
  );
  creates.push(testEvent(tested!.body.id as string, other!.body.id as string));
}, 60_000);
afterAll(async () => {
  await stack?.stop();
  await redis?.stop();
  await pg?.stop();
});

async function call(method: string, path: string, body?: unknown, key?: string): Promise<Answer> {
  const started = performance.now();
  const res = await fetch(`${stack.apiUrls[0]}${path}`, {
    method,
    headers: {
      Authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { "Content-Type": "application/json" }),
      ...(key === undefined ? {} : { "Idempotency-Key": key }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return {
    status: res.status,
    headers: res.headers,
    body: text ? JSON.parse(text) : {},
    ms: performance.now() - started,
  };
}

const message = { from: "News <news@locked.example>", subject: "Hello", text: "Hi" };

/**
 * A record-bound create: its request (a path and a body, or none), another request to send under
 * the same key, its status, and how to find what it made in its list.
 */
interface Create {
  name: string;
  path: string;
  body?: Json;
  other: { path: string; body?: Json };
  created: number;
  list: string;
  made: (item: Json) => boolean;
}

const creates: Create[] = [
  {
    name: "subscriber upsert",
    path: "/api/v1/subscribers",
    body: { email: "held@locked.example", tags: ["held"] },
    other: { path: "/api/v1/subscribers", body: { email: "other@locked.example" } },
    created: 201,
    list: "/api/v1/subscribers?limit=100",
    made: (s) => s.email === "held@locked.example",
  },
  {
    name: "tag",
    path: "/api/v1/tags",
    body: { name: "held-tag" },
    other: { path: "/api/v1/tags", body: { name: "other-tag" } },
    created: 201,
    list: "/api/v1/tags",
    made: (t) => t.name === "held-tag",
  },
  {
    name: "campaign",
    path: "/api/v1/campaigns",
    body: { name: "Held campaign", ...message, audience: { all: true } },
    other: { path: "/api/v1/campaigns", body: { name: "Other campaign", ...message, audience: { all: true } } },
    created: 201,
    list: "/api/v1/campaigns?limit=100",
    made: (c) => c.name === "Held campaign",
  },
  {
    name: "workflow",
    path: "/api/v1/workflows",
    body: { name: "Held workflow", trigger: { type: "subscriber.created" }, steps: [{ type: "wait", seconds: 60 }] },
    other: {
      path: "/api/v1/workflows",
      body: { name: "Other workflow", trigger: { type: "subscriber.created" }, steps: [] },
    },
    created: 201,
    list: "/api/v1/workflows?limit=100",
    made: (w) => w.name === "Held workflow",
  },
  {
    name: "webhook",
    path: "/api/v1/webhooks",
    body: { url: "https://hooks.locked.example/held", events: ["email.delivered"] },
    other: {
      path: "/api/v1/webhooks",
      body: { url: "https://hooks.locked.example/other", events: ["email.delivered"] },
    },
    created: 201,
    list: "/api/v1/webhooks?limit=100",
    made: (w) => w.url === "https://hooks.locked.example/held",
  },
];

/** A webhook's test event (a delivery, no body), to a webhook made before the lock; other: another webhook's. */
const testEvent = (id: string, otherId: string): Create => ({
  name: "webhook test event",
  path: `/api/v1/webhooks/${id}/test`,
  other: { path: `/api/v1/webhooks/${otherId}/test` },
  created: 202,
  list: `/api/v1/webhooks/${id}/deliveries?limit=100`,
  made: (d) => d.type === "webhook.test",
});

const found = async (c: Create) => ((await call("GET", c.list)).body.data as Json[]).filter(c.made).length;

describe("the records' tables locked for 12 s", () => {
  const during: Answer[] = [];
  const sends: { status: number; ms: number }[] = [];
  const tagReads: Answer[] = [];

  beforeAll(async () => {
    // The tags' counts are read once before the lock, as any organization in use has them.
    expect((await call("GET", "/api/v1/tags")).status).toBe(200);
    const locker = new SQL({ url: databaseUrl, max: 1 });
    const conn = await locker.reserve();
    await conn`BEGIN`;
    await conn.unsafe(`LOCK TABLE ${LOCKED_TABLES} IN ACCESS EXCLUSIVE MODE`);
    const lockedAt = performance.now();
    const creating = Promise.all(creates.map((c, i) => call("POST", c.path, c.body, `held-${i}`)));
    // Sends and tag reads meanwhile, for as long as the creates wait.
    const until = lockedAt + BOUND_MS;
    let n = 0;
    while (performance.now() < until) {
      const sent = performance.now();
      const [send, tags] = await Promise.all([
        sendEmail(stack.apiUrls[0]!, token, { ...message, to: `r${n++}@inbox.example` }),
        call("GET", "/api/v1/tags"),
      ]);
      sends.push({ status: send.status, ms: performance.now() - sent });
      tagReads.push(tags);
      await Bun.sleep(100);
    }
    during.push(...(await creating));
    await Bun.sleep(Math.max(0, LOCK_MS - (performance.now() - lockedAt)));
    await conn`ROLLBACK`;
    conn.release();
    await locker.close();
  }, 60_000);

  test("every record-bound create answers 503 with Retry-After within the bound, saying nothing was written", () => {
    for (const [i, answer] of during.entries()) {
      expect({ create: creates[i]!.name, status: answer.status, code: answer.body.code }).toEqual({
        create: creates[i]!.name,
        status: 503,
        code: "RECORDS_TIMEOUT",
      });
      expect(answer.headers.get("Retry-After")).toBe("1");
      expect(answer.body.message).toContain("nothing was written");
      expect(answer.ms).toBeLessThan(BOUND_MS + MARGIN_MS);
    }
  });

  test("sends and GET /api/v1/tags keep answering meanwhile", () => {
    expect(sends.length).toBeGreaterThan(5);
    expect(sends.every((s) => s.status === 202)).toBe(true);
    expect(tagReads.every((t) => t.status === 200)).toBe(true);
    expect(Math.max(...sends.map((s) => s.ms), ...tagReads.map((t) => t.ms))).toBeLessThan(1_000);
  });

  test("once the lock goes, none of them was written", async () => {
    for (const c of creates) expect({ create: c.name, found: await found(c) }).toEqual({ create: c.name, found: 0 });
  });

  test("the retry with the same Idempotency-Key creates each once; again, the same answer; another body, 409", async () => {
    for (const [i, c] of creates.entries()) {
      const first = await call("POST", c.path, c.body, `held-${i}`);
      expect({ create: c.name, status: first.status }).toEqual({ create: c.name, status: c.created });
      const again = await call("POST", c.path, c.body, `held-${i}`);
      expect({ create: c.name, status: again.status }).toEqual({ create: c.name, status: c.created });
      expect(again.body).toEqual(first.body);
      expect({ create: c.name, found: await found(c) }).toEqual({ create: c.name, found: 1 });
      const other = await call("POST", c.other.path, c.other.body, `held-${i}`);
      expect({ create: c.name, status: other.status, code: other.body.code }).toEqual({
        create: c.name,
        status: 409,
        code: "IDEMPOTENCY_KEY_REUSED",
      });
    }
  });
});
