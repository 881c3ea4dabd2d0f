// What the internal plane's TLS costs the hot path: AdmitBatch through the API's client
// (admit-load.ts) to limiterd in cleartext and on mutual TLS, each daemon with a Redis of its
// own, measured in alternated pairs so that the machine's other load falls on both alike.
// Prints admissions/s and the CPU per admission of limiterd and of the client, and the TLS
// hop's cost per admission. Far lighter than npm run bench (one client, short windows).
// Usage: bun run loadtest/tls-cost.ts   env: PAIRS (3), WARMUP_MS (2000), DURATION_MS (5000),
//        BATCH (100), INFLIGHT (8), ORGS (50)
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { HealthCheckResponse_ServingStatus } from "../internal/gen/grpc/health/v1/health_pb";
import { Plan } from "../internal/gen/mailcore/limiter/v1/limiter_pb";
import { limiterClients } from "../internal/limiterclient/client";
import { initCerts } from "../internal/plane/certs";
import type { Role } from "../internal/plane/tls";
import { limiterTls } from "../internal/config/config";
import {
  clientTlsEnv,
  daemonTlsEnv,
  freePort,
  pool,
  runBun,
  startRedis,
  tempDir,
  waitFor,
} from "../internal/testkit/testkit";
import { benchJson, cleanupAll, cpuSeconds, installSignalHandlers, onExit, trackDir, trackProc } from "./procs";
import { table } from "./report";

const num = (name: string, def: number) => Number(process.env[name] ?? def);
const PAIRS = num("PAIRS", 3);
const LOAD = {
  WARMUP_MS: String(num("WARMUP_MS", 2_000)),
  DURATION_MS: String(num("DURATION_MS", 5_000)),
  BATCH: String(num("BATCH", 100)),
  INFLIGHT: String(num("INFLIGHT", 8)),
};
const ORGS = num("ORGS", 50);

type Mode = "cleartext" | "mutual TLS";

interface Daemon {
  mode: Mode;
  url: string;
  pid: number;
  tokensFile: string;
  /** The front's TLS variables for admit-load (none in cleartext). */
  clientEnv: Record<string, string>;
}

async function startDaemon(mode: Mode, certs: string): Promise<Daemon> {
  const redis = await startRedis();
  onExit(`redis-server (${mode})`, () => redis.stop());
  const dataDir = trackDir(tempDir("mailcore-tls-cost-"));
  const port = await freePort();
  const tls = mode === "mutual TLS";
  const url = `${tls ? "https" : "http"}://127.0.0.1:${port}`;
  const daemonTls = tls ? daemonTlsEnv(certs) : {};
  const limiterd = trackProc(
    `limiterd (${mode})`,
    runBun("cmd/limiterd/index.ts", [], {
      DATA_DIR: dataDir,
      REDIS_URL: redis.url,
      LIMITER_PORT: String(port),
      ...daemonTls,
    }),
  );
  // The clients read their certificates as the processes do, from the variables.
  const as = (role: Role) => limiterTls(tls ? clientTlsEnv(certs, role) : {}, url);
  const admin = limiterClients(url, as("admin"));
  const front = limiterClients(url, as("front"));
  await waitFor(
    `limiterd (${mode})`,
    async () =>
      (await front.health.check({}, { timeoutMs: 1_000 })).status === HealthCheckResponse_ServingStatus.SERVING,
    30_000,
  );
  const tokens = await pool(ORGS, 8, async (i) => {
    await admin.directory.createOrganization({ slug: `tls-${i}`, plan: Plan.ENTERPRISE });
    return (await admin.directory.createToken({ slug: `tls-${i}` })).token;
  });
  const tokensFile = join(dataDir, "tokens.txt");
  writeFileSync(tokensFile, `${tokens.join("\n")}\n`);
  return { mode, url, pid: limiterd.proc.pid, tokensFile, clientEnv: tls ? clientTlsEnv(certs, "front") : {} };
}

interface Window {
  mode: Mode;
  admissionsPerSecond: number;
  daemonUsPerAdmission: number;
  clientUsPerAdmission: number;
  errors: number;
}

/** One measured window of admit-load against d: its throughput and each side's CPU per admission. */
async function measure(d: Daemon): Promise<Window> {
  const gen = trackProc(
    `admit-load (${d.mode})`,
    runBun("loadtest/admit-load.ts", [d.url, d.tokensFile], { ...LOAD, ...d.clientEnv }),
  );
  const marker = (m: string) =>
    waitFor(`admit-load ${m}`, async () => gen.stdout().includes(m) || gen.proc.exitCode !== null, 60_000);
  await marker("MEASURE_START");
  const cpu0 = cpuSeconds(d.pid) ?? 0;
  await marker("MEASURE_END");
  const daemonCpu = (cpuSeconds(d.pid) ?? cpu0) - cpu0;
  const load = await benchJson<{ admissionsPerSecond: number; admissions: number; cpuSeconds: number; errors: number }>(
    "admit-load",
    gen,
  );
  return {
    mode: d.mode,
    admissionsPerSecond: load.admissionsPerSecond,
    daemonUsPerAdmission: (daemonCpu * 1e6) / load.admissions,
    clientUsPerAdmission: (load.cpuSeconds * 1e6) / load.admissions,
    errors: load.errors,
  };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

installSignalHandlers();
try {
  const certs = trackDir(tempDir("mailcore-tls-cost-certs-"));
  await initCerts(certs, []);
  const daemons = [await startDaemon("cleartext", certs), await startDaemon("mutual TLS", certs)];
  const windows: Window[] = [];
  for (let pair = 0; pair < PAIRS; pair++) {
    // Alternate which goes first, so that a drift in the machine's load falls on both.
    for (const d of pair % 2 === 0 ? daemons : [...daemons].reverse()) windows.push(await measure(d));
  }
  const rows = windows.map((w) => [
    w.mode,
    Math.round(w.admissionsPerSecond),
    w.daemonUsPerAdmission.toFixed(2),
    w.clientUsPerAdmission.toFixed(2),
    w.errors,
  ]);
  console.log(
    table("windows, in the order run", ["mode", "admissions/s", "limiterd µs/adm", "client µs/adm", "errors"], rows),
  );
  const of = (mode: Mode, f: (w: Window) => number) => median(windows.filter((w) => w.mode === mode).map(f));
  const summary = (["cleartext", "mutual TLS"] as const).map((mode) => {
    const daemon = of(mode, (w) => w.daemonUsPerAdmission);
    const client = of(mode, (w) => w.clientUsPerAdmission);
    return { mode, rate: of(mode, (w) => w.admissionsPerSecond), daemon, client, both: daemon + client };
  });
  console.log(
    table(
      "medians",
      ["mode", "admissions/s", "limiterd µs/adm", "client µs/adm", "both µs/adm"],
      summary.map((s) => [s.mode, Math.round(s.rate), s.daemon.toFixed(2), s.client.toFixed(2), s.both.toFixed(2)]),
    ),
  );
  // Each pair's difference, TLS less cleartext: the two windows of a pair ran back to back.
  const both = (w: Window) => w.daemonUsPerAdmission + w.clientUsPerAdmission;
  const diffs = Array.from({ length: PAIRS }, (_, pair) => {
    const [a, b] = windows.slice(2 * pair, 2 * pair + 2) as [Window, Window];
    const [clear, tls] = a.mode === "cleartext" ? [a, b] : [b, a];
    return { us: both(tls) - both(clear), pct: (100 * (both(tls) - both(clear))) / both(clear) };
  });
  console.log(
    `TLS hop, per pair: ${diffs.map((d) => `${d.us.toFixed(2)} µs (${d.pct.toFixed(1)}%)`).join(", ")}; median ${median(diffs.map((d) => d.us)).toFixed(2)} µs of CPU per admission, ${median(diffs.map((d) => d.pct)).toFixed(1)}% of the admission hop's CPU (limiterd and client)`,
  );
} finally {
  await cleanupAll();
}
process.exit(0);
