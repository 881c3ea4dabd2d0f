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
/** Each record-bound create: its path, a body, and how to find what it made in its list. */
const creates: { name: string; path: string; body: Json; other: Json; list: string; made: (item: Json) => boolean }[] =
  [
    {
      name: "subscriber upsert",
      path: "/api/v1/subscribers",
      body: { email: "held@locked.example", tags: ["held"] },
      other: { email: "other@locked.example" },
      list: "/api/v1/subscribers?limit=100",
      made: (s) => s.email === "held@locked.example",
    },
    {
      name: "tag",
      path: "/api/v1/tags",
      body: { name: "held-tag" },
      other: { name: "other-tag" },
      list: "/api/v1/tags",
      made: (t) => t.name === "held-tag",
    },
    {
      name: "campaign",
      path: "/api/v1/campaigns",
      body: { name: "Held campaign", ...message, audience: { all: true } },
      other: { name: "Other campaign", ...message, audience: { all: true } },
      list: "/api/v1/campaigns?limit=100",
      made: (c) => c.name === "Held campaign",
    },
    {
      name: "workflow",
      path: "/api/v1/workflows",
      body: { name: "Held workflow", trigger: { type: "subscriber.created" }, steps: [{ type: "wait", seconds: 60 }] },
      other: { name: "Other workflow", trigger: { type: "subscriber.created" }, steps: [] },
      list: "/api/v1/workflows?limit=100",
      made: (w) => w.name === "Held workflow",
    },
    {
      name: "webhook",
      path: "/api/v1/webhooks",
      body: { url: "https://hooks.locked.example/held", events: ["email.delivered"] },
      other: { url: "https://hooks.locked.example/other", events: ["email.delivered"] },
      list: "/api/v1/webhooks?limit=100",
      made: (w) => w.url === "https://hooks.locked.example/held",
    },
  ];

const found = async (c: (typeof creates)[number]) =>
  ((await call("GET", c.list)).body.data as Json[]).filter(c.made).length;

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
      expect({ create: c.name, status: first.status }).toEqual({ create: c.name, status: 201 });
      const again = await call("POST", c.path, c.body, `held-${i}`);
      expect({ create: c.name, status: again.status }).toEqual({ create: c.name, status: 201 });
      expect(again.body).toEqual(first.body);
      expect({ create: c.name, found: await found(c) }).toEqual({ create: c.name, found: 1 });
      const other = await call("POST", c.path, c.other, `held-${i}`);
      expect({ create: c.name, status: other.status, code: other.body.code }).toEqual({
        create: c.name,
        status: 409,
        code: "IDEMPOTENCY_KEY_REUSED",
      });
    }
  });
});
