// The audience's figures (bun run loadtest/audience-bench.ts [--root <checkout>] [--seconds 10] [--tags-only 1]):
// upserts per second through the API, one subscriber a request and 1,000 a request, and
// GET /api/v1/tags per second (wrk), on the embedded store and on Redis + PostgreSQL. Every
// process is started fresh here from --root (default: this checkout), so the tags figure of
// another build (the one before the counts) is measured by the same harness on the same
// machine: a build without the subscriber endpoints gets the tags figure only. Each
// organization gets 5 tags, written straight into the records, so both builds read the same.
import { SQL } from "bun";
import { join, resolve } from "node:path";
import { limiterClients } from "../internal/limiterclient/client";
import { Plan } from "../internal/gen/mailcore/limiter/v1/limiter_pb";
import { pool, REPO_ROOT, tempDir } from "../internal/testkit/testkit";
import { cpuSeconds } from "../internal/testkit/machine";
import { cleanupAll, installSignalHandlers, startLimiterAndApi, startRedisAndPostgres } from "./procs";
import { fmt, table } from "./report";
import { ensureWrk, runWrk } from "./wrk";

const flags: Record<string, string> = Object.fromEntries(
  process.argv.slice(2).flatMap((a, i, all) => (a.startsWith("--") ? [[a.slice(2), all[i + 1] ?? ""]] : [])),
);
const ROOT = resolve(flags.root || REPO_ROOT);
const SECONDS = Number(flags.seconds || 10);
const TAGS_ONLY = Boolean(flags["tags-only"]);
const ORGS = 200; // enterprise: each bucket holds 2,000 requests, so quota never limits a run
const SINGLE = 4_000; // single upserts, CONCURRENCY at a time
const CONCURRENCY = 32;
const BATCHES = 30; // batches of 1,000, 2 at a time
const TAGS_PER_ORG = 5;

const log = (line: string) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${line}`);

const LOGS = tempDir("mailcore-audience-bench-logs-");

interface Backend {
  name: string;
  env: Record<string, string>;
  /** Writes rows into the records' tags table. */
  seedTags(rows: { org_id: string; name: string; created_ms: number }[]): Promise<void>;
}

async function embedded(): Promise<Backend> {
  const dataDir = tempDir("mailcore-audience-bench-");
  return {
    name: "embedded",
    env: { DATA_DIR: dataDir },
    async seedTags(rows) {
      const sql = new SQL({ adapter: "sqlite", filename: join(dataDir, "records.db") });
      await sql`PRAGMA busy_timeout = 5000`;
      await sql`INSERT INTO tags ${sql(rows)}`;
      await sql.close();
    },
  };
}

async function redisPostgres(): Promise<Backend> {
  const { url, env } = await startRedisAndPostgres("mailcore-audience-bench-");
  return {
    name: "redis+postgres",
    env,
    async seedTags(rows) {
      const sql = new SQL({ url });
      await sql`INSERT INTO tags ${sql(rows)}`;
      await sql.close();
    },
  };
}

async function measure(backend: Backend) {
  // wrk's requests name their client IPs in X-Forwarded-For (4,096 of them), so the IP limit does not cap the run.
  const { limiterUrl, api, limiterd, apiProc, credential } = await startLimiterAndApi(ROOT, LOGS, backend.env, {
    TRUST_PROXY: "127.0.0.1",
  });
  const clients = limiterClients(limiterUrl, credential);
  const orgs = await pool(ORGS, 8, async (i) => {
    const slug = `bench-${i}`;
    const { organization } = await clients.directory.createOrganization({ slug, plan: Plan.ENTERPRISE });
    return { id: organization!.id, token: (await clients.directory.createToken({ slug })).token };
  });
  await backend.seedTags(
    orgs.flatMap((o) =>
      Array.from({ length: TAGS_PER_ORG }, (_, t) => ({ org_id: o.id, name: `tag ${t}`, created_ms: 0 })),
    ),
  );
  // Each request from another client IP (198.18.0.0/15), so the IP limit (500/s) does not cap the run.
  let requests = 0;
  const post = (token: string, path: string, body: unknown) => {
    const n = requests++;
    const ip = `198.18.${(n >> 8) & 255}.${n & 255}`;
    return fetch(`${api}${path}`, {
      method: "POST",
      headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json", "X-Forwarded-For": ip },
      body: JSON.stringify(body),
    });
  };

  const row: Record<string, string> = { backend: backend.name };
  const probe = await post(orgs[0]!.token, "/api/v1/subscribers", { email: "probe@bench.example" });
  if (TAGS_ONLY || probe.status === 404) {
    row.single = row.batched = TAGS_ONLY ? "not measured" : "no such endpoint";
  } else {
    log(`${backend.name}: ${SINGLE} single upserts, ${CONCURRENCY} at a time`);
    let started = performance.now();
    const statuses = await pool(SINGLE, CONCURRENCY, (i) =>
      post(orgs[i % ORGS]!.token, "/api/v1/subscribers", {
        email: `single${i}@bench.example`,
        name: `S ${i}`,
        fields: { i },
        tags: ["single"],
      }).then((r) => r.status),
    );
    row.single = `${fmt(SINGLE / ((performance.now() - started) / 1_000))}/s (${statuses.filter((s) => s === 201).length} of ${SINGLE} created)`;
    log(`${backend.name}: ${BATCHES} batches of 1,000, 2 at a time`);
    started = performance.now();
    const batches = await pool(BATCHES, 2, (b) =>
      post(orgs[b % ORGS]!.token, "/api/v1/subscribers/batch", {
        triggerWorkflows: false,
        subscribers: Array.from({ length: 1_000 }, (_, i) => ({
          email: `batch${b * 1_000 + i}@bench.example`,
          name: `B ${i}`,
          fields: { i },
          tags: ["batch"],
        })),
      }).then((r) => r.status),
    );
    row.batched = `${fmt((BATCHES * 1_000) / ((performance.now() - started) / 1_000))}/s (${batches.filter((s) => s === 200).length} of ${BATCHES} answered 200)`;
  }

  log(`${backend.name}: GET /api/v1/tags, wrk -t2 -c64, 2 s warm-up then ${SECONDS} s`);
  const tokensFile = join(tempDir("mailcore-audience-bench-tokens-"), "tokens.txt");
  await Bun.write(tokensFile, `${orgs.map((o) => o.token).join("\n")}\n`);
  const wrk = { url: `${api}/api/v1/tags`, threads: 2, connections: 64, tokensFile, ips: 4096 };
  await runWrk({ ...wrk, seconds: 2 });
  const cpu = () => [apiProc.pid, limiterd.pid].map((pid) => cpuSeconds(pid) ?? Number.NaN);
  const cpuBefore = cpu();
  const tags = await runWrk({ ...wrk, seconds: SECONDS });
  const [apiUs, limiterdUs] = cpu().map((c, i) => Math.round(((c - cpuBefore[i]!) / tags.requests) * 1e6));
  row.tags = `${fmt(tags.okPerSecond)}/s (p50 ${tags.latencyMs.p50} ms, p99 ${tags.latencyMs.p99} ms; ${tags.notOk} not 200; CPU per request: api ${apiUs} us, limiterd ${limiterdUs} us)`;
  const sample = await (
    await fetch(`${api}/api/v1/tags`, { headers: { Authorization: `Bearer ${orgs[1]!.token}` } })
  ).text();
  row.body = sample.slice(0, 80);
  apiProc.kill("SIGKILL");
  limiterd.kill("SIGKILL");
  return row;
}

async function main() {
  installSignalHandlers();
  ensureWrk();
  const load = (await Bun.file("/proc/loadavg").text()).split(" ").slice(0, 3).join(" ");
  log(`build: ${ROOT}; load average before: ${load}; process logs in ${LOGS}`);
  const rows = [];
  for (const make of [embedded, redisPostgres]) rows.push(await measure(await make()));
  const after = (await Bun.file("/proc/loadavg").text()).split(" ").slice(0, 3).join(" ");
  console.log(
    table(
      `build ${ROOT}; load average ${load} before, ${after} after`,
      [
        "backend",
        "upserts, 1 a request (32 in flight)",
        "upserts, 1,000 a request (2 in flight)",
        "GET /api/v1/tags",
        "a GET /api/v1/tags body",
      ],
      rows.map((r) => [r.backend!, r.single!, r.batched!, r.tags!, r.body!]),
    ),
  );
}

try {
  await main();
} finally {
  await cleanupAll();
}
process.exit(0);
