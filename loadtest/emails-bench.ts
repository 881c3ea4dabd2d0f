// The activity log's page time with 1,000,000 messages in the records (npm run bench:emails
// [--messages 1000000] [--pages 100]): starts limiterd and one API process on the embedded
// store (SQLite records) and on Redis + PostgreSQL (its own servers), fills the records with
// one INSERT ... SELECT from a number series (90% of the messages are one organization's,
// spread over 30 days, with realistic statuses, lanes, 10,000 mailboxes and two tags), and
// times GET /api/v1/emails one request at a time per filter: the first page, and pages
// further on by cursor (each walk reads 5 pages from a random point in the range).
import { SQL } from "bun";
import { join } from "node:path";
import { Plan } from "../internal/gen/mailcore/limiter/v1/limiter_pb";
import { limiterClients } from "../internal/limiterclient/client";
import { REPO_ROOT, tempDir } from "../internal/testkit/testkit";
import { cleanupAll, installSignalHandlers, startLimiterAndApi, startRedisAndPostgres } from "./procs";
import { percentile, table } from "./report";

const flags: Record<string, string> = Object.fromEntries(
  process.argv.slice(2).flatMap((a, i, all) => (a.startsWith("--") ? [[a.slice(2), all[i + 1] ?? ""]] : [])),
);
const MESSAGES = Number(flags.messages || 1_000_000);
const PAGES = Number(flags.pages || 100);
const SPAN_MS = 30 * 86_400_000;
const END_MS = Date.UTC(2026, 10, 25);
const log = (line: string) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${line}`);
const LOGS = tempDir("mailcore-emails-bench-logs-");

/**
 * The columns of message i, as SQL over the series column i (the same in both dialects but for
 * the id's hex): i grows with time; org 1 in 10 is another organization's; statuses by (i / 7)
 * % 100: 90 delivered, 3 bounced, 1 failed, 1 deferred, 4 queued, 1 sending; a third bulk;
 * 10,000 mailboxes; tag "welcome" on every 5th, "rare" on every 997th.
 */
function fill(org: string, hexId: string): string {
  return `SELECT ${hexId}, CASE WHEN i % 10 = 9 THEN 'org_other' ELSE '${org}' END,
    CASE WHEN i % 3 = 0 THEN 2 ELSE 1 END,
    'Bench <bench@bench.example>', 'user' || ((i * 31) % 10000) || '@example.org', 'user' || ((i * 31) % 10000) || '@example.org',
    'Message ' || i,
    CASE WHEN (i / 7) % 100 < 90 THEN 3 WHEN (i / 7) % 100 < 93 THEN 5 WHEN (i / 7) % 100 < 94 THEN 6
         WHEN (i / 7) % 100 < 95 THEN 4 WHEN (i / 7) % 100 < 99 THEN 1 ELSE 2 END,
    1, ${END_MS - SPAN_MS} + i * ${Math.floor(SPAN_MS / MESSAGES)}, ${END_MS - SPAN_MS} + i * ${Math.floor(SPAN_MS / MESSAGES)} + 900, 3,
    CASE WHEN i % 997 = 0 THEN 'rare' WHEN i % 5 = 0 THEN 'welcome' ELSE '' END`;
}
const COLUMNS =
  "(id, org_id, lane, from_header, to_header, to_mailbox, subject, status, attempts, created_ms, updated_ms, version, tags)";
const TAGS_FROM_MESSAGES =
  "INSERT INTO message_tags (message_id, org_id, tag, created_ms) SELECT id, org_id, tags, created_ms FROM messages WHERE tags <> ''";

interface Backend {
  name: string;
  env: Record<string, string>;
  seed(org: string): Promise<void>;
}

async function embedded(): Promise<Backend> {
  const dataDir = tempDir("mailcore-emails-bench-");
  return {
    name: "embedded (SQLite records)",
    env: { DATA_DIR: dataDir },
    async seed(org) {
      const sql = new SQL({ adapter: "sqlite", filename: join(dataDir, "records.db") });
      await sql.unsafe("PRAGMA busy_timeout = 10000");
      await sql.unsafe(
        `INSERT INTO messages ${COLUMNS} WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ${MESSAGES - 1})
         ${fill(org, "printf('msg_%024x', i)")} FROM n`,
      );
      await sql.unsafe(TAGS_FROM_MESSAGES);
      await sql.unsafe("ANALYZE");
      await sql.close();
    },
  };
}

async function redisPostgres(): Promise<Backend> {
  const { url, env } = await startRedisAndPostgres("mailcore-emails-bench-");
  return {
    name: "Redis + PostgreSQL",
    env,
    async seed(org) {
      const sql = new SQL({ url });
      await sql.unsafe(
        `INSERT INTO messages ${COLUMNS} ${fill(org, "'msg_' || lpad(to_hex(i), 24, '0')")} FROM generate_series(0::bigint, ${MESSAGES - 1}) AS i`,
      );
      await sql.unsafe(TAGS_FROM_MESSAGES);
      // As a database in use would be: vacuumed, so that autovacuum does not run during the timing.
      await sql.unsafe("VACUUM ANALYZE");
      await sql.close();
    },
  };
}

/** The filters timed, as query strings (the mailbox has about 90 messages, "rare" about 900). */
const FILTERS: [string, string][] = [
  ["none", ""],
  ["status=delivered", "status=delivered"],
  ["status=failed", "status=failed"],
  ["lane=bulk", "lane=bulk"],
  ["to (one mailbox)", "to=user4242%40example.org"],
  ["tag=welcome", "tag=welcome"],
  ["tag=rare", "tag=rare"],
  ["after/before (one day)", "after=2026-11-10T00:00:00Z&before=2026-11-11T00:00:00Z"],
  ["status=bounced&lane=bulk", "status=bounced&lane=bulk"],
];

async function measure(backend: Backend) {
  // A loaded machine can hold an admission past the 1 s default; a 503 would end the run.
  const { limiterUrl, api, limiterd, apiProc, credential } = await startLimiterAndApi(REPO_ROOT, LOGS, backend.env, {
    LIMITER_TIMEOUT_MS: "5000",
  });
  const clients = limiterClients(limiterUrl, credential);
  const { organization } = await clients.directory.createOrganization({ slug: "bench", plan: Plan.ENTERPRISE });
  const token = (await clients.directory.createToken({ slug: "bench" })).token;
  log(`${backend.name}: filling ${MESSAGES.toLocaleString("en")} messages`);
  const started = performance.now();
  await backend.seed(organization!.id);
  const fillS = (performance.now() - started) / 1_000;
  log(`${backend.name}: filled in ${fillS.toFixed(1)} s`);

  const get = async (query: string) => {
    const t = performance.now();
    const res = await fetch(`${api}/api/v1/emails?${query}`, { headers: { Authorization: `Bearer ${token}` } });
    const body = (await res.json()) as { data: unknown[]; nextCursor: string | null };
    if (res.status !== 200) throw new Error(`${query}: ${res.status} ${JSON.stringify(body)}`);
    return { ms: performance.now() - t, body };
  };
  const rows: string[][] = [];
  for (const [name, query] of FILTERS) {
    await get(query); // warm
    const first: number[] = [];
    const further: number[] = [];
    let found = 0;
    for (let p = 0; p < PAGES; p++) {
      const r = await get(query);
      first.push(r.ms);
      found = r.body.data.length;
    }
    // Walks of 5 pages from random points (a before= bound inside the 30 days).
    for (let w = 0; w < PAGES / 5; w++) {
      const at = new Date(END_MS - Math.floor(Math.random() * SPAN_MS)).toISOString();
      let q = `${query}${query ? "&" : ""}before=${encodeURIComponent(at)}`;
      if (query.includes("before=")) q = query;
      for (let p = 0; p < 5; p++) {
        const r = await get(q);
        further.push(r.ms);
        if (!r.body.nextCursor) break;
        q = `${query}${query ? "&" : ""}cursor=${r.body.nextCursor}`;
      }
    }
    first.sort((a, b) => a - b);
    further.sort((a, b) => a - b);
    const f = (v: number | undefined) => (v === undefined ? "-" : `${v.toFixed(1)} ms`);
    rows.push([
      name,
      String(found),
      f(percentile(first, 50)),
      f(percentile(first, 99)),
      f(percentile(further, 50)),
      f(percentile(further, 99)),
    ]);
    log(
      `${backend.name}: ${name}: first page p99 ${f(percentile(first, 99))}, further p99 ${f(percentile(further, 99))}`,
    );
  }
  apiProc.kill("SIGKILL");
  limiterd.kill("SIGKILL");
  return { fillS, rows };
}

async function main() {
  installSignalHandlers();
  const load = (await Bun.file("/proc/loadavg").text()).split(" ").slice(0, 3).join(" ");
  log(`load average before: ${load}; process logs in ${LOGS}`);
  for (const make of [embedded, redisPostgres]) {
    const backend = await make();
    const { fillS, rows } = await measure(backend);
    console.log(
      table(
        `${backend.name}: ${MESSAGES.toLocaleString("en")} messages (filled in ${fillS.toFixed(1)} s), ${PAGES} first pages and ${PAGES} further pages per filter, 20 a page`,
        ["filter", "on page 1", "first p50", "first p99", "further p50", "further p99"],
        rows,
      ),
    );
  }
  const after = (await Bun.file("/proc/loadavg").text()).split(" ").slice(0, 3).join(" ");
  console.log(`\nload average after: ${after}`);
}

try {
  await main();
} finally {
  await cleanupAll();
}
process.exit(0);
