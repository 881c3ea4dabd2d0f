// Accepted sends per second through the API (POST /api/v1/emails, 202), 32 clients, on each
// deployment of the stores: embedded (no Redis), Redis + SQLite, Redis + PostgreSQL. Each run
// starts its own limiterd and API (and Redis and PostgreSQL) and no worker, so the figure is the
// accept path alone: admission, validation, the guards and the enqueue.
//
//   bun run loadtest/send-rate.ts [--sends N]   (default 8,000 per deployment)
import { startPostgres } from "../internal/testkit/postgres";
import { pool, sendEmail, startRedis, startStack } from "../internal/testkit/testkit";
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

const deployments: { name: string; redisUrl?: string; env: Record<string, string> }[] = [
  { name: "embedded", env: {} },
  { name: "Redis + SQLite", redisUrl: redis.url, env: {} },
  { name: "Redis + PostgreSQL", redisUrl: redis.url, env: { DATABASE_URL: await postgres.newDatabase() } },
];
const rows: { deployment: string; sends: number; seconds: number; perSecond: number; p50Ms: number; p99Ms: number }[] =
  [];
for (const d of deployments) {
  const stack = await startStack({ redisUrl: d.redisUrl, env: { ...d.env, TRUST_PROXY: "127.0.0.1" } });
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
await cleanupAll();
process.exit(0);
