// Accepted sends per second through the API (POST /api/v1/emails, 202), 32 clients, on each
// deployment of the stores: embedded (no Redis), Redis + SQLite, Redis + PostgreSQL. Each run
// starts its own limiterd and API (and Redis and PostgreSQL) and no worker, so the figure is the
// accept path alone: admission, validation, the guards and the enqueue. Then the wait for a
// replica (REDIS_WAIT_REPLICAS) off and on, on one Redis with a replica and on a Redis Cluster
// of three primaries with a replica each; and the accept step alone, off and on: the wait's cost
// per accept.
//
//   bun run loadtest/send-rate.ts [--sends N] [--wait-only]   (default 8,000 per deployment)
import { Plan } from "../internal/gen/mailcore/limiter/v1/limiter_pb";
import { Lane } from "../internal/gen/mailcore/limiter/v1/mail_pb";
import { connectRedis, RedisHot, waitingCommandTimeoutMs } from "../internal/hotstore/redis/redis";
import { GUARD_LIMITS } from "../internal/mail/policy";
import { startPostgres } from "../internal/testkit/postgres";
import {
  pool,
  sendEmail,
  startRedis,
  startRedisCluster,
  startRedisWithReplica,
  startStack,
} from "../internal/testkit/testkit";
import { cleanupAll, installSignalHandlers, onExit } from "./procs";

const CLIENTS = 32;
// Enterprise organizations: 2,000 requests each in their bucket, so the quota never refuses here.
const ORGS = 25;
const sends = process.argv.includes("--sends") ? Number(process.argv[process.argv.indexOf("--sends") + 1]) : 8_000;
if (!Number.isInteger(sends) || sends < 1 || sends > ORGS * 1_900)
  throw new Error(`--sends takes 1 to ${ORGS * 1_900}`);

installSignalHandlers();
const redis = await startRedis();
onExit("redis", () => redis.stop());
const postgres = await startPostgres();
onExit("postgres", () => postgres.stop());

const pair = await startRedisWithReplica();
onExit("redis with a replica", () => pair.stop());
const cluster = await startRedisCluster({ replicas: 1 });
onExit("redis cluster", () => cluster.stop());

const noWait = { REDIS_WAIT_REPLICAS: "0" };
// A wait of 1 s (not the default 250 ms): on a machine this loaded a replica can take longer than
// 250 ms to acknowledge, and a send would answer 503; the figure is the cost, not the timeout.
const wait = { REDIS_WAIT_TIMEOUT_MS: "1000" };
const deployments: { name: string; redisUrl?: string; clusterNodes?: string[]; env: Record<string, string> }[] = [
  ...(process.argv.includes("--wait-only")
    ? []
    : [
        { name: "embedded", env: {} },
        { name: "Redis + SQLite", redisUrl: redis.url, env: {} },
        { name: "Redis + PostgreSQL", redisUrl: redis.url, env: { DATABASE_URL: await postgres.newDatabase() } },
      ]),
  { name: "Redis with a replica, wait off", redisUrl: pair.primary.url, env: noWait },
  { name: "Redis with a replica, wait on", redisUrl: pair.primary.url, env: wait },
  { name: "Cluster 3+3, wait off", clusterNodes: cluster.nodes, env: noWait },
  { name: "Cluster 3+3, wait on", clusterNodes: cluster.nodes, env: wait },
];
const rows: { deployment: string; sends: number; seconds: number; perSecond: number; p50Ms: number; p99Ms: number }[] =
  [];
for (const d of deployments) {
  const stack = await startStack({
    redisUrl: d.redisUrl,
    redisClusterNodes: d.clusterNodes,
    env: { ...d.env, TRUST_PROXY: "127.0.0.1" },
  });
  try {
    const tokens = await pool(ORGS, 5, (i) => stack.org(`rate-${rows.length}-${i}`, "enterprise"));
    const latencies: number[] = [];
    const t0 = performance.now();
    await pool(sends, CLIENTS, async (i) => {
      const org = i % ORGS;
      const started = performance.now();
      const res = await sendEmail(
        stack.apiUrls[0]!,
        tokens[org]!,
        {
          from: `app@rate-${rows.length}-${org}.example`,
          to: `delivered+${i}@fixtures.test`,
          subject: `m${i}`,
          text: "x".repeat(200),
        },
        {},
        true,
      );
      latencies.push(performance.now() - started);
      if (res.status !== 202)
        throw new Error(`${d.name}: send ${i} answered ${res.status} ${JSON.stringify(res.body)}`);
    });
    const seconds = (performance.now() - t0) / 1000;
    latencies.sort((a, b) => a - b);
    const at = (q: number) =>
      Math.round(latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]! * 10) / 10;
    rows.push({
      deployment: d.name,
      sends,
      seconds: Math.round(seconds * 100) / 100,
      perSecond: Math.round(sends / seconds),
      p50Ms: at(0.5),
      p99Ms: at(0.99),
    });
    console.log(JSON.stringify(rows.at(-1)));
  } finally {
    await stack.stop();
  }
  await redis.restart(); // each deployment starts from an empty Redis
}
console.log(`\n| deployment | accepted sends/s (${CLIENTS} clients) | p50 | p99 |\n|---|---|---|---|`);
for (const r of rows)
  console.log(`| ${r.deployment} | ${r.perSecond} (${r.sends} in ${r.seconds} s) | ${r.p50Ms} ms | ${r.p99Ms} ms |`);
// The accept step alone (RedisHot's mail.enqueue on the Redis with a replica, no API, no daemon): the
// wait's own cost per accept, with one caller (each accept waits alone) and with CLIENTS callers
// (accepts share a WAIT), off and on, alternately, twice.
const acceptRows: { wait: string; callers: number; perSecond: number; p50Ms: number; p99Ms: number }[] = [];
for (const round of [1, 2]) {
  for (const replicas of [0, 1]) {
    for (const callers of [1, CLIENTS]) {
      const url = pair.primary.url;
      const hot = new RedisHot(await connectRedis(url), {
        policy: { replicas, timeoutMs: 1_000 },
        writer: await connectRedis(url, { commandTimeoutMs: waitingCommandTimeoutMs(1_000) }),
      });
      await hot.admission.projectOrg({
        id: "bench",
        slug: "bench",
        plan: Plan.ENTERPRISE,
        version: 1,
        verifiedDomains: ["b.example"],
      });
      const n = Math.min(sends, 3_000);
      const latencies: number[] = [];
      const t0 = performance.now();
      await pool(n, callers, async (i) => {
        const started = performance.now();
        const r = await hot.mail.enqueue(
          {
            orgId: "bench",
            tags: [],
            messageId: `m-${round}-${replicas}-${callers}-${i}`,
            lane: Lane.BULK,
            payload: "x".repeat(400),
            from: "a@b.example",
            to: `r${i}@fixtures.test`,
            subject: "s",
            fromDomain: "b.example",
            mailbox: `r${i}@fixtures.test`,
            checkCooldown: false,
            countGuards: false,
            guards: GUARD_LIMITS,
            queueCap: { messages: 1_000_000, bytes: 1_000_000_000 },
          },
          Date.now(),
        );
        if (r.kind !== "accepted") throw new Error(`accept ${i}: ${r.kind}`);
        latencies.push(performance.now() - started);
      });
      const seconds = (performance.now() - t0) / 1000;
      latencies.sort((a, b) => a - b);
      const at = (q: number) =>
        Math.round(latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]! * 100) / 100;
      acceptRows.push({
        wait: replicas ? "on" : "off",
        callers,
        perSecond: Math.round(n / seconds),
        p50Ms: at(0.5),
        p99Ms: at(0.99),
      });
      console.log(JSON.stringify({ round, ...acceptRows.at(-1) }));
      await hot.lifecycle.close();
    }
  }
}
console.log("\n| accept step alone | callers | accepts/s | p50 | p99 |\n|---|---|---|---|---|");
for (const r of acceptRows)
  console.log(`| wait ${r.wait} | ${r.callers} | ${r.perSecond} | ${r.p50Ms} ms | ${r.p99Ms} ms |`);

// The wait's cost, as ratios within this run (the machine's load moves the absolute figures).
const row = (name: string) => rows.find((r) => r.deployment === name)!;
console.log(
  "\n| hot store | wait on / off: sends/s | p50 | p99 | added per accept (1/rate on - 1/rate off) |\n|---|---|---|---|---|",
);
for (const store of ["Redis with a replica", "Cluster 3+3"]) {
  const off = row(`${store}, wait off`);
  const on = row(`${store}, wait on`);
  const ratio = (a: number, b: number) => (a / b).toFixed(2);
  const addedMs = (1_000 / on.perSecond - 1_000 / off.perSecond) * CLIENTS;
  console.log(
    `| ${store} | ${ratio(on.perSecond, off.perSecond)} | ${ratio(on.p50Ms, off.p50Ms)} | ${ratio(on.p99Ms, off.p99Ms)} | ${addedMs.toFixed(1)} ms of latency at ${CLIENTS} clients |`,
  );
}
await cleanupAll();
process.exit(0);
