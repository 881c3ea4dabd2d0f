// The fault table (docs/operations.md, "Fault table"): the whole service on Redis (AOF, fsync always) and
// PostgreSQL under a steady load of HTTP and SMTP sends, then kill -9 of each process in turn,
// restarted a second later as a supervisor would. For each fault: what the clients saw and for
// how long; at the end, whether every accepted message was delivered, and how many twice.
// With --cluster the hot store is a Redis Cluster of three primaries, each with a replica, and
// the Redis fault is the primary that holds the service's slot: its replica takes over.
//
//   bun run loadtest/faults.ts [--cluster] [--only limiterd,api,smtp,worker,redis,postgres]
import { SQL } from "bun";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { createTransport } from "nodemailer";
import { startPostgres } from "../internal/testkit/postgres";
import { startRelay } from "../internal/testkit/relay";
import {
  freePort,
  type Proc,
  REPO_ROOT,
  runBun,
  runToEnd,
  sendEmail,
  startRedis,
  startRedisCluster,
  tempDir,
  waitFor,
} from "../internal/testkit/testkit";
import { cleanupAll, installSignalHandlers, onExit, trackDir, trackProc } from "./procs";

const TARGETS = ["limiterd", "api", "smtp", "worker", "redis", "postgres"] as const;
type Store = "redis" | "postgres";
type Target = (typeof TARGETS)[number];
const RESTART_AFTER_MS = 1_000;
const AFTER_RESTART_MS = 5_000;
const VISIBILITY_MS = 10_000;

interface Attempt {
  via: "http" | "smtp";
  at: number;
  /** "202", "503 LIMITER_UNAVAILABLE", "250", "451 4.3.0", "ECONNREFUSED"... */
  saw: string;
  id?: string;
}

installSignalHandlers();
const only = process.argv.includes("--only")
  ? (process.argv[process.argv.indexOf("--only") + 1] ?? "").split(",")
  : [...TARGETS];
const targets = TARGETS.filter((t) => only.includes(t));

// The mail pipeline's keys share one hash slot, {mail} (docs/adr/0006-one-lua-prelude-one-slot-per-script.md); this key is in it.
const SERVICE_SLOT_KEY = "{mail}";
const clusterMode = process.argv.includes("--cluster");
const cluster = clusterMode ? await startRedisCluster({ replicas: 1, nodeTimeoutMs: 2_000 }) : undefined;
const redis = clusterMode ? undefined : await startRedis({ aof: true });
onExit("redis", () => (cluster ?? redis)!.stop());
const postgres = await startPostgres();
onExit("postgres", () => postgres.stop());
const relay = await startRelay();
onExit("relay", () => relay.stop());
const dataDir = trackDir(tempDir("mailcore-faults-"));
const [limiterPort, apiPort, smtpPort] = [await freePort(), await freePort(), await freePort()];
const env: Record<string, string> = {
  DATA_DIR: dataDir,
  ...(cluster
    ? { REDIS_CLUSTER_NODES: cluster.ports.map((p) => `127.0.0.1:${p}`).join(",") }
    : { REDIS_URL: redis!.url }),
  DATABASE_URL: postgres.url,
  LIMITER_PORT: String(limiterPort),
  LIMITER_URL: `http://127.0.0.1:${limiterPort}`,
  API_PORT: String(apiPort),
  API_URL: `http://127.0.0.1:${apiPort}`,
  SMTP_PORT: String(smtpPort),
  SMTP_RELAY_URL: relay.url,
  VISIBILITY_TIMEOUT_MS: String(VISIBILITY_MS),
  RETRY_BASE_MS: "1000",
  LANE_RATE: "200",
};
const ENTRIES: Record<Exclude<Target, Store>, string> = {
  limiterd: "cmd/limiterd/index.ts",
  api: "cmd/api/index.ts",
  smtp: "cmd/smtp/index.ts",
  worker: "cmd/worker/index.ts",
};
const procs: Partial<Record<Target, Proc>> = {};
const start = (name: Exclude<Target, Store>) => (procs[name] = trackProc(name, runBun(ENTRIES[name], [], env)));
const ready: Record<Target, () => Promise<boolean>> = {
  limiterd: async () => (await fetch(`${env.API_URL}/readyz`)).ok,
  api: async () => (await fetch(`${env.API_URL}/readyz`)).ok,
  smtp: async () => procs.smtp!.stderr().includes('"msg":"listening"'),
  worker: async () => procs.worker!.stderr().includes('"msg":"started"'),
  redis: async () =>
    (cluster ? await cluster.healthy(SERVICE_SLOT_KEY) : true) && (await fetch(`${env.API_URL}/readyz`)).ok,
  // Sends do not wait for the records (the history is written behind them): back when it answers.
  postgres: async () => {
    const sql = new SQL(postgres.url);
    try {
      return (await sql`SELECT 1 AS up`)[0]?.up === 1;
    } finally {
      await sql.close();
    }
  },
};

start("limiterd");
start("api");
await waitFor("the API", ready.api, 20_000);
start("smtp");
start("worker");
await waitFor("smtp", ready.smtp, 20_000);
const admin = async (...args: string[]) => {
  const r = await runToEnd("cmd/admin/index.ts", args, env);
  if (r.code !== 0) throw new Error(`admin ${args.join(" ")}: ${r.stderr}`);
  return r.stdout.trim();
};
await admin("org", "create", "acme", "--plan", "enterprise");
await admin("domain", "add", "acme", "acme.example", "--verified");
const token = await admin("token", "create", "acme");

// The load: 4 HTTP clients at about 5 sends a second each and 2 SMTP clients at about 3 (26/s,
// under the enterprise quota of 2000 a minute), each to a recipient of its own.
const attempts: Attempt[] = [];
let n = 0;
let loading = true;
/** Which 503: refused before admission, refused by limiterd past its deadline, or not confirmed. */
const why503 = (message: string) =>
  message.includes("nothing was queued")
    ? "send refused, nothing queued"
    : message.includes("may or may not")
      ? "send not confirmed"
      : "not admitted";
const httpLoop = async () => {
  while (loading) {
    const to = `h${n++}@dest.example`;
    const at = performance.now();
    try {
      const a = await sendEmail(env.API_URL!, token, {
        from: "no-reply@acme.example",
        to,
        subject: "Fault table",
        text: "x",
      });
      attempts.push({
        via: "http",
        at,
        saw:
          a.status === 202
            ? "202"
            : `${a.status} ${a.body.code ?? ""}${a.status === 503 ? ` (${why503(String(a.body.message))})` : ""}`.trim(),
        id: a.status === 202 ? (a.body.id as string) : undefined,
      });
    } catch (err) {
      attempts.push({ via: "http", at, saw: (err as Error & { code?: string }).code ?? (err as Error).message });
    }
    await Bun.sleep(200);
  }
};
const smtpLoop = async (loop: number) => {
  while (loading) {
    const to = `s${n++}@dest.example`;
    const at = performance.now();
    const transport = createTransport({
      host: "127.0.0.1",
      port: smtpPort,
      secure: false,
      requireTLS: true,
      tls: { rejectUnauthorized: false },
      auth: { user: "acme", pass: token },
      localAddress: `127.0.2.${loop + 1}`,
      connectionTimeout: 5_000,
      greetingTimeout: 5_000,
      socketTimeout: 15_000,
    });
    try {
      const info = await transport.sendMail({
        envelope: { from: "b@acme.example", to: [to] },
        from: "no-reply@acme.example",
        to,
        subject: "Fault table",
        text: "x",
      });
      attempts.push({ via: "smtp", at, saw: "250", id: /\b(msg_[0-9a-f]{24})\b/.exec(info.response)?.[1] });
    } catch (err) {
      const e = err as Error & { responseCode?: number; response?: string; code?: string };
      attempts.push({
        via: "smtp",
        at,
        saw: e.responseCode
          ? `${e.responseCode} ${/^\d{3} (\d\.\d+\.\d+)/.exec(e.response ?? "")?.[1] ?? ""}`.trim()
          : (e.code ?? e.message),
      });
    } finally {
      transport.close();
    }
    await Bun.sleep(300);
  }
};
const load = [httpLoop(), httpLoop(), httpLoop(), httpLoop(), smtpLoop(0), smtpLoop(1)];

interface Phase {
  target: Target;
  killedAt: number;
  endedAt: number;
}
const phases: Phase[] = [];
await Bun.sleep(3_000);
for (const target of targets) {
  const killedAt = performance.now();
  if (target === "redis" && cluster) {
    // The primary of the service's slot stays down until its replica is promoted (after the
    // node timeout); started again, it rejoins as a replica of the new primary.
    const primary = await cluster.primaryOf(SERVICE_SLOT_KEY);
    await cluster.kill(primary);
    await waitFor(
      "the replica to take over",
      async () => (await cluster.primaryOf(SERVICE_SLOT_KEY)) !== primary,
      30_000,
    );
    console.log(
      `faults: the slot of ${SERVICE_SLOT_KEY} moved from ${primary} to ${await cluster.primaryOf(SERVICE_SLOT_KEY)} ${Math.round(performance.now() - killedAt)} ms after the kill`,
    );
    await cluster.restart(primary);
  } else if (target === "redis") {
    await redis!.restart(); // kill -9, then the same port and append-only file
  } else if (target === "postgres") {
    await postgres.crash();
    await Bun.sleep(RESTART_AFTER_MS);
    await postgres.start(); // crash recovery from its own WAL
  } else {
    await procs[target]!.stop("SIGKILL");
    await Bun.sleep(RESTART_AFTER_MS);
    start(target);
  }
  await waitFor(`${target} to be back`, ready[target], 30_000);
  await Bun.sleep(AFTER_RESTART_MS);
  phases.push({ target, killedAt, endedAt: performance.now() });
  // A fault must stay with its process: any other that died is reported (and started again).
  for (const [name, p] of Object.entries(procs) as [Exclude<Target, Store>, Proc][]) {
    if (p.proc.exitCode === null && p.proc.signalCode === null) continue;
    console.log(
      `faults: ${name} died during kill -9 ${target} (exit ${p.proc.exitCode ?? p.proc.signalCode}):\n${p.stderr().split("\n").slice(-8).join("\n")}`,
    );
    start(name);
    await waitFor(`${name} to be back`, ready[name], 30_000);
  }
  console.log(`faults: kill -9 ${target} done`);
}
loading = false;
await Promise.all(load);

// Every accepted message, delivered: wait past the visibility timeout and the retries.
const accepted = attempts.filter((a) => a.id !== undefined);
const deliveries = () => {
  const count = new Map<string, number>();
  for (const r of relay.received) {
    const id = /^Message-ID: <(msg_[0-9a-f]{24})@/im.exec(r.raw)?.[1];
    if (id) count.set(id, (count.get(id) ?? 0) + 1);
  }
  return count;
};
await waitFor(
  "every accepted message to be delivered",
  async () => accepted.every((a) => deliveries().has(a.id!)),
  VISIBILITY_MS * 3,
).catch(() => {});
await Bun.sleep(VISIBILITY_MS + 2_000); // a lease lost with a worker is released again after this
const delivered = deliveries();

const rows = phases.map((p) => {
  const during = attempts.filter((a) => a.at >= p.killedAt && a.at < p.endedAt);
  const failed = during.filter((a) => a.saw !== "202" && a.saw !== "250");
  const kinds = new Map<string, number>();
  for (const f of failed) kinds.set(`${f.via} ${f.saw}`, (kinds.get(`${f.via} ${f.saw}`) ?? 0) + 1);
  const acceptedHere = during.filter((a) => a.id !== undefined);
  return {
    fault: `kill -9 ${p.target === "redis" && cluster ? "Redis Cluster primary (failover)" : p.target}`,
    attempts: during.length,
    failed: failed.length,
    clientsSaw: [...kinds].map(([k, c]) => `${k} x${c}`).join(", ") || "nothing",
    failingForMs:
      failed.length > 0 ? Math.round(Math.max(...failed.map((f) => f.at)) - Math.min(...failed.map((f) => f.at))) : 0,
    firstFailureAfterKillMs: failed.length > 0 ? Math.round(Math.min(...failed.map((f) => f.at)) - p.killedAt) : null,
    accepted: acceptedHere.length,
    lost: acceptedHere.filter((a) => !delivered.has(a.id!)).length,
    deliveredTwice: acceptedHere.filter((a) => (delivered.get(a.id!) ?? 0) > 1).length,
  };
});
const total = {
  attempts: attempts.length,
  accepted: accepted.length,
  lost: accepted.filter((a) => !delivered.has(a.id!)).length,
  deliveredTwice: [...delivered.values()].filter((c) => c > 1).length,
};
const outDir = join(REPO_ROOT, "loadtest", "results");
mkdirSync(outDir, { recursive: true });
const file = join(outDir, `faults-${new Date().toISOString().replace(/[:.]/g, "-")}.json`);
writeFileSync(
  file,
  JSON.stringify({ rows, total, restartAfterMs: RESTART_AFTER_MS, visibilityMs: VISIBILITY_MS }, null, 2),
);
console.log("| fault | attempts | failed | what the clients saw | failing for | accepted | lost | delivered twice |");
console.log("|---|---|---|---|---|---|---|---|");
for (const r of rows)
  console.log(
    `| ${r.fault} | ${r.attempts} | ${r.failed} | ${r.clientsSaw} | ${(r.failingForMs / 1000).toFixed(1)} s | ${r.accepted} | ${r.lost} | ${r.deliveredTwice} |`,
  );
console.log(`total: ${JSON.stringify(total)}; ${file}`);
await cleanupAll();
process.exit(total.lost > 0 ? 1 : 0);
