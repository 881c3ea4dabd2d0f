// Campaigns and workflows with two daemons on Redis + PostgreSQL: the fan-out and the runner
// each run in one daemon at a time (their leases), so every subscriber gets each message once.
// And the tags each daemon serves from memory: a change made through one daemon is seen at once
// through the other.
import { afterAll, beforeAll, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { limiterClients } from "../limiterclient/client";
import { type PostgresServer, startPostgres } from "../testkit/postgres";
import {
  freePort,
  type Proc,
  type RedisServer,
  runBun,
  type Stack,
  startRedis,
  startStack,
  waitFor,
} from "../testkit/testkit";

let pg: PostgresServer;
let redis: RedisServer;
let stack: Stack;
let second: Proc;
let secondApi: Proc;
let secondApiUrl: string;
let token: string;
beforeAll(async () => {
  [pg, redis] = await Promise.all([startPostgres(), startRedis()]);
  stack = await startStack({ redisUrl: redis.url, workers: 1, env: { DATABASE_URL: pg.url, LANE_RATE: "200" } });
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  second = runBun("cmd/limiterd/index.ts", [], { ...stack.env, LIMITER_PORT: String(port) });
  await waitFor(
    "the second daemon",
    async () => (await limiterClients(url, stack.credential).lanes.getLanes({})).lanes.length === 2,
    15_000,
  );
  const apiPort = await freePort();
  secondApiUrl = `http://127.0.0.1:${apiPort}`;
  secondApi = runBun("cmd/api/index.ts", [], { ...stack.env, LIMITER_URL: url, API_PORT: String(apiPort) });
  await waitFor("the second daemon's API", async () => (await fetch(`${secondApiUrl}/readyz`)).ok, 15_000);
  token = await stack.org("pair", "enterprise");
}, 60_000);
afterAll(async () => {
  await secondApi?.stop("SIGKILL");
  await second?.stop("SIGKILL");
  await stack?.stop();
  await Promise.all([redis?.stop(), pg?.stop()]);
});

type Json = Record<string, any>;

async function api(method: string, path: string, body?: unknown, base = stack.apiUrls[0]): Promise<Json> {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: {
      Authorization: `Bearer ${token}`,
      ...(body === undefined ? {} : { "Content-Type": "application/json" }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return (await res.json()) as Json;
}

/** Recipients of the .eml files with this subject, one entry per file. */
function recipients(subject: string): string[] {
  const dir = join(stack.dataDir, "sink");
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((n) => n.endsWith(".eml"))
    .map((f) => readFileSync(join(dir, f), "utf8"))
    .filter((eml) => eml.includes(`\r\nSubject: ${subject}\r\n`))
    .map((eml) => /^To: (.*)$/m.exec(eml)![1]!);
}

test("a campaign to 400 and a workflow for 20 new subscribers: each message once, with two daemons", async () => {
  const wf = await api("POST", "/api/v1/workflows", {
    name: "welcome",
    trigger: { type: "subscriber.created" },
    steps: [
      { type: "wait", seconds: 1 },
      { type: "email", from: "Team <team@pair.example>", subject: "Welcome", text: "Hi {{subscriber.email}}" },
    ],
    active: true,
  });
  await api("POST", "/api/v1/subscribers/batch", {
    subscribers: Array.from({ length: 380 }, (_, i) => ({ email: `quiet${i}@list.example` })),
    triggerWorkflows: false,
  });
  await api("POST", "/api/v1/subscribers/batch", {
    subscribers: Array.from({ length: 20 }, (_, i) => ({ email: `new${i}@list.example` })),
    triggerWorkflows: true,
  });
  const c = await api("POST", "/api/v1/campaigns", {
    name: "Pair",
    from: "News <news@pair.example>",
    subject: "Both daemons",
    text: "Hello",
    audience: { all: true },
  });
  await api("POST", `/api/v1/campaigns/${c.id}/send`);

  await waitFor(
    "the campaign",
    async () => (await api("GET", `/api/v1/campaigns/${c.id}`)).stats.delivered === 400,
    60_000,
  );
  await waitFor(
    "the runs",
    async () =>
      ((await api("GET", `/api/v1/workflows/${wf.id}/runs?limit=100`)).data as Json[]).filter(
        (r) => r.state === "completed",
      ).length === 20,
    30_000,
  );
  await waitFor("the workflow emails", async () => recipients("Welcome").length >= 20, 30_000);
  await Bun.sleep(1_000);

  expect((await api("GET", `/api/v1/campaigns/${c.id}`)).stats).toEqual({
    recipients: 400,
    queued: 400,
    delivered: 400,
    bounced: 0,
    failed: 0,
    skipped: 0,
    suppressed: 0,
  });
  const campaign = recipients("Both daemons");
  expect(campaign).toHaveLength(400);
  expect(new Set(campaign).size).toBe(400);
  const welcome = recipients("Welcome").sort();
  expect(welcome).toEqual(Array.from({ length: 20 }, (_, i) => `new${i}@list.example`).sort());
}, 120_000);

test("GET /api/v1/tags through the other daemon sees every change of tags and counts at once", async () => {
  const tagsThere = async () => {
    const first = (await api("GET", "/api/v1/tags", undefined, secondApiUrl)).data as Json[];
    expect((await api("GET", "/api/v1/tags", undefined, secondApiUrl)).data).toEqual(first); // again: from its memory
    return Object.fromEntries(first.map((t) => [t.name, t.subscribers]));
  };
  const before = await tagsThere();
  expect(before.vip).toBeUndefined();
  await api("POST", "/api/v1/tags", { name: "vip" });
  expect((await tagsThere()).vip).toBe(0);
  await api("POST", "/api/v1/subscribers", { email: "ann@vip.example", tags: ["vip"] });
  expect((await tagsThere()).vip).toBe(1);
  await api("POST", "/api/v1/subscribers/batch", {
    subscribers: [
      { email: "bob@vip.example", tags: ["vip"] },
      { email: "cy@vip.example", tags: ["vip", "gold"] },
    ],
  });
  expect(await tagsThere()).toMatchObject({ vip: 3, gold: 1 });
  await api("DELETE", "/api/v1/subscribers/bob@vip.example/tags", { tags: ["vip"] });
  expect((await tagsThere()).vip).toBe(2);
  await fetch(`${stack.apiUrls[0]}/api/v1/subscribers/ann@vip.example`, {
    method: "DELETE",
    headers: { Authorization: `Bearer ${token}` },
  });
  expect((await tagsThere()).vip).toBe(1);
  await fetch(`${stack.apiUrls[0]}/api/v1/tags/vip`, {
    method: "DELETE",
    headers: { Authorization: `Bearer ${token}` },
  });
  const after = await tagsThere();
  expect(after.vip).toBeUndefined();
  expect(after.gold).toBe(1);
}, 60_000);
