// test-runner: alone
// Record-bound calls while a transaction holds the records' tables locked: every call of the API
// that reads or writes them (the creates, the changes and deletes, the lists) answers within
// AUDIENCE_TIMEOUT_MS (plus a margin) with 503, all of them at once in one lock window; none of
// those that answered 503 was written, nor is any of their statements left running on the
// server; a create's retry with the same Idempotency-Key creates it once; and sends and
// GET /api/v1/tags do not notice the lock. limiterd, the API, a worker and PostgreSQL and Redis
// are real processes this file starts.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { SQL } from "bun";
import { BOUNDED_APPLICATION } from "../records/db";
import { type PostgresServer, startPostgres } from "../testkit/postgres";
import { type Receiver, startReceiver } from "../testkit/receiver";
import { type RedisServer, sendEmail, type Stack, startRedis, startStack, waitFor } from "../testkit/testkit";

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
let receiver: Receiver;
let stack: Stack;
let databaseUrl: string;
let token: string;
beforeAll(async () => {
  pg = await startPostgres();
  redis = await startRedis();
  receiver = startReceiver();
  databaseUrl = await pg.newDatabase();
  stack = await startStack({
    redisUrl: redis.url,
    workers: 1,
    env: { DATABASE_URL: databaseUrl, WEBHOOK_ALLOW_PRIVATE_URLS: "1" },
  });
  token = await stack.org("locked", "enterprise");
  await prepare();
}, 60_000);
afterAll(async () => {
  await stack?.stop();
  await receiver?.stop();
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

/** A GET's status and body. */
const get = async (path: string) => {
  const { status, body } = await call("GET", path);
  return { status, body };
};

/** What must answer 200 before the lock. */
async function ok(method: string, path: string, body?: unknown): Promise<Json> {
  const answer = await call(method, path, body);
  if (answer.status >= 300) throw new Error(`${method} ${path}: ${answer.status} ${JSON.stringify(answer.body)}`);
  return answer.body;
}

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

/**
 * A record-bound call that is not a create: its request, and what it would change (the same
 * before the lock and once it goes, when the call was not written). A read has nothing to show.
 */
interface Other {
  name: string;
  method: string;
  path: string;
  body?: Json;
  shows?: () => Promise<unknown>;
}

const others: Other[] = [];

/**
 * What the calls during the lock work on, made before it: subscribers to change, delete and tag,
 * a draft and a scheduled campaign, workflows, webhooks and a delivered webhook test event.
 */
async function prepare(): Promise<void> {
  // Bounces only: the sends during the lock, delivered, give the webhooks nothing to deliver.
  const [tested, other, doomedHook, up] = await Promise.all(
    ["tested", "other-tested", "doomed"]
      .map((name) => `https://hooks.locked.example/${name}`)
      .concat(`${receiver.url}/up`)
      .map((url) => ok("POST", "/api/v1/webhooks", { url, events: ["email.bounced"] })),
  );
  creates.push(testEvent(tested!.id as string, other!.id as string));
  const delivery = await ok("POST", `/api/v1/webhooks/${up!.id}/test`);
  const deliveries = `/api/v1/webhooks/${up!.id}/deliveries`;
  await waitFor("the test event delivered", async () =>
    ((await get(deliveries)).body.data as Json[]).some((d) => d.state === "delivered"),
  );
  const subscriber = async (name: string, tags: string[] = []) =>
    `/api/v1/subscribers/${(await ok("POST", "/api/v1/subscribers", { email: `${name}@locked.example`, tags })).id}`;
  const [patched, deleted, tagged, untagged, withDoomed] = await Promise.all([
    subscriber("patched"),
    subscriber("deleted"),
    subscriber("tagged"),
    subscriber("untagged", ["kept"]),
    subscriber("with-doomed", ["doomed"]),
  ]);
  const campaign = async (name: string) =>
    `/api/v1/campaigns/${(await ok("POST", "/api/v1/campaigns", { name, ...message, audience: { tags: ["nobody"] } })).id}`;
  const [draft, scheduled] = await Promise.all([campaign("Draft"), campaign("Scheduled")]);
  await ok("POST", `${scheduled}/send`, { scheduledAt: new Date(Date.now() + 86_400_000).toISOString() });
  const workflow = async (name: string) =>
    (
      await ok("POST", "/api/v1/workflows", {
        name,
        trigger: { type: "tag.added", tag: "never" },
        steps: [{ type: "wait", seconds: 60 }],
      })
    ).id as string;
  const [patchedFlow, deletedFlow, rotatedFlow] = await Promise.all(["Patched", "Deleted", "Rotated"].map(workflow));
  // A workflow's secret is never shown again: it is read from the records.
  const secretOf = async (id: string) => {
    const sql = new SQL({ url: databaseUrl, max: 1 });
    try {
      return [...(await sql`SELECT secret FROM webhook_endpoints WHERE workflow_id = ${id}`)].map((r) => r.secret);
    } finally {
      await sql.close();
    }
  };
  const shown = (path: string) => () => get(path);
  others.push(
    {
      name: "subscriber batch",
      method: "POST",
      path: "/api/v1/subscribers/batch",
      body: { subscribers: [{ email: "batch@locked.example" }] },
      shows: shown("/api/v1/subscribers?email=batch"),
    },
    { name: "subscriber patch", method: "PATCH", path: patched, body: { name: "Changed" }, shows: shown(patched) },
    { name: "subscriber delete", method: "DELETE", path: deleted, shows: shown(deleted) },
    {
      name: "subscriber tags add",
      method: "POST",
      path: `${tagged}/tags`,
      body: { tags: ["added"] },
      shows: shown(tagged),
    },
    {
      name: "subscriber tags remove",
      method: "DELETE",
      path: `${untagged}/tags`,
      body: { tags: ["kept"] },
      shows: shown(untagged),
    },
    { name: "tag delete", method: "DELETE", path: "/api/v1/tags/doomed", shows: shown(withDoomed) },
    { name: "campaign send", method: "POST", path: `${draft}/send`, shows: shown(draft) },
    { name: "campaign cancel", method: "POST", path: `${scheduled}/cancel`, shows: shown(scheduled) },
    {
      name: "workflow patch",
      method: "PATCH",
      path: `/api/v1/workflows/${patchedFlow}`,
      body: { name: "Changed" },
      shows: shown(`/api/v1/workflows/${patchedFlow}`),
    },
    {
      name: "workflow delete",
      method: "DELETE",
      path: `/api/v1/workflows/${deletedFlow}`,
      shows: shown(`/api/v1/workflows/${deletedFlow}`),
    },
    {
      name: "workflow secret rotation",
      method: "POST",
      path: `/api/v1/workflows/${rotatedFlow}/secret`,
      shows: () => secretOf(rotatedFlow!),
    },
    {
      name: "webhook delete",
      method: "DELETE",
      path: `/api/v1/webhooks/${doomedHook!.id}`,
      shows: shown(`/api/v1/webhooks/${doomedHook!.id}/deliveries`),
    },
    {
      name: "webhook delivery retry",
      method: "POST",
      path: `${deliveries}/${delivery.id}/retry`,
      shows: async () => ({ deliveries: await get(deliveries), received: receiver.at("/up").length }),
    },
    { name: "subscriber list", method: "GET", path: "/api/v1/subscribers" },
    { name: "subscriber read", method: "GET", path: patched },
    { name: "subscriber events", method: "GET", path: `${patched}/events` },
    { name: "campaign list", method: "GET", path: "/api/v1/campaigns" },
    { name: "campaign read", method: "GET", path: draft },
    { name: "workflow list", method: "GET", path: "/api/v1/workflows" },
    { name: "workflow read", method: "GET", path: `/api/v1/workflows/${patchedFlow}` },
    { name: "workflow runs", method: "GET", path: `/api/v1/workflows/${patchedFlow}/runs` },
    { name: "webhook list", method: "GET", path: "/api/v1/webhooks" },
    { name: "webhook deliveries", method: "GET", path: deliveries },
  );
}

/** The statements of calls with a deadline still running on the server (the daemon's own work may wait for the lock). */
async function running(sql: SQL): Promise<string[]> {
  const rows = await sql`SELECT query FROM pg_stat_activity
    WHERE datname = current_database() AND state <> 'idle' AND application_name = ${BOUNDED_APPLICATION}`;
  return [...rows].map((r) => r.query as string);
}

describe("the records' tables locked for 12 s", () => {
  const during: Answer[] = [];
  const othersDuring: Answer[] = [];
  const shownBefore: unknown[] = [];
  let seenWaiting = 0;
  let leftRunning: string[] = [];
  const sends: { status: number; ms: number }[] = [];
  const tagReads: Answer[] = [];

  beforeAll(async () => {
    // The tags' counts are read once before the lock, as any organization in use has them.
    expect((await call("GET", "/api/v1/tags")).status).toBe(200);
    for (const o of others) shownBefore.push(await o.shows?.());
    const locker = new SQL({ url: databaseUrl, max: 2 });
    const conn = await locker.reserve();
    await conn`BEGIN`;
    await conn.unsafe(`LOCK TABLE ${LOCKED_TABLES} IN ACCESS EXCLUSIVE MODE`);
    const lockedAt = performance.now();
    const creating = Promise.all(creates.map((c, i) => call("POST", c.path, c.body, `held-${i}`)));
    const othering = Promise.all(others.map((o) => call(o.method, o.path, o.body)));
    // Seen waiting meanwhile, so that none seen after is not for want of looking in the right place.
    const waiting = Bun.sleep(1_000).then(() => running(locker));
    // Sends and tag reads meanwhile, for as long as the calls wait.
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
    othersDuring.push(...(await othering));
    // The lock still held: whatever the calls sent was cancelled by the server, not left waiting.
    seenWaiting = (await waiting).length;
    leftRunning = await running(locker);
    await Bun.sleep(Math.max(0, LOCK_MS - (performance.now() - lockedAt)));
    await conn`ROLLBACK`;
    conn.release();
    await locker.close();
  }, 60_000);

  test("every record-bound call answers 503 with Retry-After within the bound, saying nothing was written", () => {
    const calls = [...creates.map((c) => c.name), ...others.map((o) => o.name)];
    for (const [i, answer] of [...during, ...othersDuring].entries()) {
      expect({ call: calls[i], status: answer.status, code: answer.body.code }).toEqual({
        call: calls[i],
        status: 503,
        code: "RECORDS_TIMEOUT",
      });
      expect(answer.headers.get("Retry-After")).toBe("1");
      expect(answer.body.message).toContain("nothing was written");
      expect({ call: calls[i], inBound: answer.ms < BOUND_MS + MARGIN_MS }).toEqual({ call: calls[i], inBound: true });
    }
  });

  test("nothing the calls sent is still running on the server after their 503", () => {
    expect(seenWaiting).toBeGreaterThan(0);
    expect(leftRunning).toEqual([]);
  });

  test("sends and GET /api/v1/tags keep answering meanwhile", () => {
    expect(sends.length).toBeGreaterThan(5);
    expect(sends.every((s) => s.status === 202)).toBe(true);
    expect(tagReads.every((t) => t.status === 200)).toBe(true);
    expect(Math.max(...sends.map((s) => s.ms), ...tagReads.map((t) => t.ms))).toBeLessThan(1_000);
  });

  test("once the lock goes, none of them was written", async () => {
    for (const c of creates) expect({ create: c.name, found: await found(c) }).toEqual({ create: c.name, found: 0 });
    for (const [i, o] of others.entries())
      if (o.shows) expect({ call: o.name, shows: await o.shows() }).toEqual({ call: o.name, shows: shownBefore[i] });
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

  test("made now, each change shows where the check above looked", async () => {
    for (const [i, o] of others.entries()) {
      if (!o.shows) continue;
      const answer = await call(o.method, o.path, o.body);
      expect({ call: o.name, ok: answer.status < 300 }).toEqual({ call: o.name, ok: true });
      await waitFor(`${o.name} shown`, async () => !Bun.deepEquals(await o.shows!(), shownBefore[i]));
    }
  });
});
