// The benchmark (npm run bench, or: bun run loadtest/bench.ts [--flag value ...]).
// Everything runs on this machine and talks to 127.0.0.1 only; every process it starts is
// its own, started fresh here and stopped on exit.
//
// 1. HTTP: the full path (wrk -> api -> limiterd -> redis-server, GET /api/v1/tags with
//    many enterprise organizations and client IPs) against a bare Bun.serve answering the
//    same body and headers, same wrk, same duration and concurrency.
// 2. Daemon: AdmitBatch admissions per second straight into limiterd (Connect client),
//    against redis-benchmark running the very same admit.lua with EVALSHA on that Redis.
//
// Prints tables and writes loadtest/results/bench-<timestamp>.json.
import { spawnSync } from "bun";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { cpus, release, totalmem } from "node:os";
import { join } from "node:path";
import { HealthCheckResponse_ServingStatus } from "../internal/gen/grpc/health/v1/health_pb";
import { Plan } from "../internal/gen/mailcore/limiter/v1/limiter_pb";
import { limiterClients } from "../internal/limiterclient/client";
import { freePort, REPO_ROOT, runBun, runToEnd, startRedis, tempDir, waitFor } from "../internal/testkit/testkit";
import { hashToken } from "../internal/token/token";
import { addShare, cleanupAll, type CpuReport, cpuWindow, installSignalHandlers, onExit, procDiagnostics, round, trackDir, trackProc } from "./procs";
import { admitArgs, loadAdmitScript, type RedisBenchResult, redisBenchmarkVersion, redisCli, redisPid, runRedisBenchmark } from "./redisbench";
import { cpuTable, fmt, table } from "./report";
import { ensureWrk, runWrk, type WrkResult, wrkVersion } from "./wrk";

const DEFAULTS = {
  duration: 10, // seconds measured, each target
  warmup: 2, // seconds before each measured run
  orgs: 300, // enterprise organizations for the HTTP run (admin CLI)
  ips: 4096, // client IPs (X-Forwarded-For / client_ip)
  connections: 64, // wrk connections
  threads: 2, // wrk threads
  "admit-orgs": 1000, // organizations for the daemon run (Directory RPC)
  batch: 100, // requests per AdmitBatch call
  inflight: 8, // AdmitBatch calls in flight
  "rb-seconds": 6, // target length of each redis-benchmark run
  "rb-pipeline": 16,
  "rb-clients": 50,
};
type Settings = typeof DEFAULTS;
const ENTERPRISE_QUOTA = 2000; // per minute, burst as large
const MAX_NOT_OK = 0.01;

function parseFlags(argv: string[]): Settings {
  const s = { ...DEFAULTS };
  for (let i = 0; i < argv.length; i++) {
    const name = argv[i]!.replace(/^--/, "") as keyof Settings;
    const value = Number(argv[i + 1]);
    if (!(name in s) || !argv[i]!.startsWith("--") || !Number.isFinite(value) || value <= 0) {
      throw new Error(`usage: bun run loadtest/bench.ts [${Object.keys(DEFAULTS).map((k) => `--${k} N`).join("] [")}]`);
    }
    s[name] = value;
    i++;
  }
  return s;
}

const log = (msg: string) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${msg}`);

async function pool<T>(n: number, width: number, job: (i: number) => Promise<T>): Promise<T[]> {
  const out: T[] = new Array(n);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(width, n) }, async () => {
      while (next < n) {
        const i = next++;
        out[i] = await job(i);
      }
    }),
  );
  return out;
}

function machineInfo() {
  const nproc = spawnSync(["nproc"]).stdout.toString().trim();
  const model = /model name\s*:\s*(.*)/.exec(readFileSync("/proc/cpuinfo", "utf8"))?.[1] ?? cpus()[0]?.model ?? "unknown";
  return { nproc: Number(nproc), cpuModel: model.trim(), kernel: release(), memoryGiB: round(totalmem() / 2 ** 30, 1) };
}

function versions() {
  const first = (cmd: string[]) => spawnSync(cmd).stdout.toString().split("\n")[0]!.trim();
  return {
    bun: first([process.execPath, "--version"]),
    redisServer: first(["redis-server", "--version"]),
    redisBenchmark: redisBenchmarkVersion(),
    wrk: wrkVersion(),
  };
}

/** redis-server + limiterd on it, fresh, with a data dir of their own. */
async function startDaemon(label: string) {
  const redis = await startRedis();
  onExit(`redis-server (${label})`, () => redis.stop());
  const dataDir = trackDir(tempDir(`mailcore-bench-${label}-`));
  const limiterPort = await freePort();
  const limiterUrl = `http://127.0.0.1:${limiterPort}`;
  const env = { DATA_DIR: dataDir, LIMITER_URL: limiterUrl, REDIS_URL: redis.url };
  const limiterd = trackProc(`limiterd (${label})`, runBun("cmd/limiterd/index.ts", [], { ...env, LIMITER_PORT: String(limiterPort) }));
  const clients = limiterClients(limiterUrl);
  await waitFor("limiterd", async () => (await clients.health.check({}, { timeoutMs: 1_000 })).status === HealthCheckResponse_ServingStatus.SERVING, 20_000).catch((err) => {
    throw new Error(`${(err as Error).message}\nlimiterd stderr:\n${limiterd.stderr()}`);
  });
  return { redis, redisPid: await redisPid(redis.port), limiterd, limiterUrl, clients, env, dataDir };
}

// ---- 1. HTTP ------------------------------------------------------------------------------

async function httpPart(s: Settings, cores: number) {
  log("HTTP: starting redis-server, limiterd and the API");
  const d = await startDaemon("http");
  const apiPort = await freePort();
  const apiUrl = `http://127.0.0.1:${apiPort}`;
  const api = trackProc("api", runBun("cmd/api/index.ts", [], { ...d.env, API_PORT: String(apiPort), TRUST_PROXY: "127.0.0.1" }));
  await waitFor("api /readyz", async () => (await fetch(`${apiUrl}/readyz`)).ok, 20_000);

  const tokens: string[] = [];
  const cliFailures: string[] = [];
  const tokensFile = join(d.dataDir, "tokens.txt");
  const addOrgs = async (count: number) => {
    const t0 = performance.now();
    const first = tokens.length;
    const made = await pool(count, 6, async (i) => {
      // A failed create may have left the slug half made (claimed, no plan): retry under another.
      for (let attempt = 0; ; attempt++) {
        const slug = `bench-${first + i}${attempt ? `-r${attempt}` : ""}`;
        const created = await runToEnd("cmd/admin/index.ts", ["org", "create", slug, "--plan", "enterprise"], d.env);
        const token = created.code === 0 ? await runToEnd("cmd/admin/index.ts", ["token", "create", slug], d.env) : created;
        if (token.code === 0) return token.stdout.trim();
        cliFailures.push(`${slug}: ${token.stderr.trim()}`);
        if (attempt >= 2) throw new Error(`admin CLI, organization ${slug}: ${token.stderr}`);
      }
    });
    tokens.push(...made);
    writeFileSync(tokensFile, `${tokens.join("\n")}\n`);
    const secs = (performance.now() - t0) / 1000;
    log(`HTTP: ${count} enterprise organizations created with the admin CLI in ${secs.toFixed(1)} s (${tokens.length} in all)`);
    return secs;
  };
  const orgSeconds = await addOrgs(s.orgs);

  // One request by hand: the full path answers 200 with the body and headers expected.
  const probe = await fetch(`${apiUrl}/api/v1/tags`, { headers: { Authorization: `Bearer ${tokens[0]}`, "X-Forwarded-For": "198.18.0.1" } });
  const probeBody = await probe.text();
  if (probe.status !== 200) throw new Error(`the API answered ${probe.status} to a valid request: ${probeBody}`);
  const apiHeaders = [...probe.headers.keys()].filter((h) => /ratelimit|content-type/i.test(h)).sort();

  log("HTTP: bare Bun.serve");
  const barePort = await freePort();
  const bareUrl = `http://127.0.0.1:${barePort}`;
  const bare = trackProc("bare-server", runBun("loadtest/bare-server.ts", [], { BARE_PORT: String(barePort) }));
  await waitFor("bare-server", async () => (await fetch(`${bareUrl}/healthz`)).ok);
  const bareProbe = await fetch(`${bareUrl}/api/v1/tags`);
  const bareBody = await bareProbe.text();
  const bareHeaders = [...bareProbe.headers.keys()].filter((h) => /ratelimit|content-type/i.test(h)).sort();
  const sameShape = bareBody === probeBody && JSON.stringify(bareHeaders) === JSON.stringify(apiHeaders);
  if (!sameShape) log(`HTTP: warning: the bare answer differs from the API's (${bareBody} ${bareHeaders} vs ${probeBody} ${apiHeaders})`);

  const wrkOpts = { threads: s.threads, connections: s.connections, tokensFile, ips: s.ips };
  const measure = async (url: string, pids: Record<string, number>, afterWarmup?: (warm: WrkResult) => Promise<void>) => {
    const warm = await runWrk({ ...wrkOpts, url: `${url}/api/v1/tags`, seconds: s.warmup });
    await afterWarmup?.(warm);
    let close: ((m?: Record<string, number>) => CpuReport) | undefined;
    const run = await runWrk({
      ...wrkOpts,
      url: `${url}/api/v1/tags`,
      seconds: s.duration,
      started: () => {
        close = cpuWindow({ ...pids, "bench.ts (harness)": process.pid }, cores);
      },
    });
    return { warm, run, cpu: close!({ wrk: run.cpuSeconds }) };
  };

  log(`HTTP: bare — wrk ${s.warmup} s warm-up, then ${s.duration} s`);
  // The full-path processes stay up, idle, during the bare run: their idle cost shows too.
  const idle = { "api (idle)": api.proc.pid, "limiterd (idle)": d.limiterd.proc.pid, "redis-server (idle)": d.redisPid };
  const bareRes = await measure(bareUrl, { "bare-server": bare.proc.pid, ...idle });
  await bare.stop("SIGKILL");

  log(`HTTP: full path — wrk ${s.warmup} s warm-up, then ${s.duration} s`);
  const fullPids = { api: api.proc.pid, limiterd: d.limiterd.proc.pid, "redis-server": d.redisPid };
  let topUpSeconds = 0;
  const fullRes = await measure(apiUrl, fullPids, async (warm) => {
    // Enough organizations that quota cannot limit the measured run: each has its burst
    // plus what refills; top up (with 50% margin) from the rate seen in the warm-up.
    const window = s.warmup + s.duration + 2;
    const perOrg = ENTERPRISE_QUOTA + (ENTERPRISE_QUOTA * window) / 60;
    const needed = Math.ceil((1.5 * (warm.requests / warm.seconds) * window) / perOrg);
    if (needed > tokens.length) {
      log(`HTTP: the warm-up ran at ${fmt(warm.okPerSecond)} req/s; adding organizations to ${needed}`);
      topUpSeconds = await addOrgs(needed - tokens.length);
    }
  });
  const apiWarnings = api.stderr().split("\n").filter((l) => / (warn|error) /.test(l));
  const limiterdWarnings = d.limiterd.stderr().split("\n").filter((l) => / (warn|error) /.test(l));

  return {
    orgs: tokens.length,
    orgCreationSeconds: round(orgSeconds + topUpSeconds, 1),
    adminCliFailures: cliFailures,
    pids: { ...fullPids, "bare-server": bare.proc.pid },
    sameShape,
    probe: { status: probe.status, body: probeBody, headers: Object.fromEntries(probe.headers) },
    bare: bareRes,
    full: fullRes,
    apiWarnings: { count: apiWarnings.length, first: apiWarnings.slice(0, 5) },
    limiterdWarnings: { count: limiterdWarnings.length, first: limiterdWarnings.slice(0, 5) },
  };
}

// ---- 2. Daemon vs redis-benchmark -----------------------------------------------------------

interface AdmitLoad {
  seconds: number;
  calls: number;
  admissions: number;
  admissionsPerSecond: number;
  allowedPerSecond: number;
  verdicts: Record<string, number>;
  errors: number;
  firstError?: string;
  callLatencyMs: { p50: number; p99: number; max: number };
  cpuSeconds: number;
}

async function daemonPart(s: Settings, cores: number) {
  log("daemon: starting redis-server and limiterd");
  const d = await startDaemon("daemon");
  const { directory } = d.clients;
  const t0 = performance.now();
  const tokens = await pool(s["admit-orgs"], 16, async (i) => {
    await directory.createOrganization({ slug: `adm-${i}`, plan: Plan.ENTERPRISE });
    return (await directory.createToken({ slug: `adm-${i}` })).token;
  });
  const tokensFile = join(d.dataDir, "tokens.txt");
  writeFileSync(tokensFile, `${tokens.join("\n")}\n`);
  log(`daemon: ${tokens.length} enterprise organizations created over the Directory RPC in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

  log(`daemon: AdmitBatch x${s.batch}, ${s.inflight} in flight — ${s.warmup} s warm-up, then ${s.duration} s`);
  const gen = trackProc(
    "admit-load",
    runBun("loadtest/admit-load.ts", [d.limiterUrl, tokensFile], {
      WARMUP_MS: String(s.warmup * 1000),
      DURATION_MS: String(s.duration * 1000),
      BATCH: String(s.batch),
      INFLIGHT: String(s.inflight),
      IPS: String(s.ips),
    }),
  );
  const marker = (m: string, ms: number) =>
    waitFor(`admit-load ${m}`, async () => gen.stdout().includes(m) || gen.proc.exitCode !== null, ms).catch((err) => {
      throw new Error(`${(err as Error).message}\nadmit-load stdout:\n${gen.stdout()}\nstderr:\n${gen.stderr()}`);
    });
  await marker("MEASURE_START", (s.warmup + 30) * 1000);
  const close = cpuWindow({ limiterd: d.limiterd.proc.pid, "redis-server": d.redisPid, "bench.ts (harness)": process.pid }, cores);
  await marker("MEASURE_END", (s.duration + 30) * 1000);
  const cpu = close();
  const code = await gen.proc.exited;
  await gen.drained;
  const line = gen.stdout().split("\n").find((l) => l.startsWith("BENCH_JSON "));
  if (code !== 0 || !line) throw new Error(`admit-load exited ${code}: ${gen.stderr()}`);
  const load = JSON.parse(line.slice("BENCH_JSON ".length)) as AdmitLoad;
  addShare(cpu, "admit-load (Connect client)", load.cpuSeconds);

  // redis-benchmark: the same script, keys and ARGV as RedisStore, for one organization.
  log("redis-benchmark: EVALSHA admit.lua");
  const sha = await loadAdmitScript(d.redis.port);
  const created = await directory.createOrganization({ slug: "rb", plan: Plan.ENTERPRISE });
  const orgId = created.organization!.id;
  const token = (await directory.createToken({ slug: "rb" })).token;
  const base = { ip: "198.18.0.1", tokenHash: hashToken(token), orgId, nowMs: Date.now() };
  const prodArgs = admitArgs(base);
  // Production ARGV with a fixed `now` empties the IP bucket after 500 calls and the org
  // bucket after 2000: from then on every call takes the limited branch (all reads, no
  // writes). To time the allowed branch (reads, and HSET+PEXPIRE of both buckets, as the
  // daemon's run does), the same keys with the quotas in ARGV raised so no bucket empties.
  const allowedArgs = admitArgs({ ...base, ipQuota: 100_000_000, planQuota: 100_000_000 });
  const reset = () => redisCli(d.redis.port, "DEL", prodArgs[1]!, prodArgs[4]!);
  const evalOnce = async (args: string[]) => (await redisCli(d.redis.port, "EVALSHA", sha, ...args)).split("\n");
  const check = await evalOnce(prodArgs);
  if (check[0] !== "1" || check[1] !== String(Plan.ENTERPRISE) || check[2] !== "rb") {
    throw new Error(`EVALSHA with the store's arguments did not admit: ${check.join(" ")}`);
  }
  const rbOpts = { pipeline: s["rb-pipeline"], clients: s["rb-clients"], serverPid: d.redisPid };
  await reset();
  const calib = await runRedisBenchmark(d.redis.port, ["EVALSHA", sha, ...allowedArgs], { ...rbOpts, n: 20_000 });
  const n = Math.min(5_000_000, Math.max(50_000, Math.round((calib.requestsPerSecond * s["rb-seconds"]) / 10_000) * 10_000));
  log(`redis-benchmark: allowed branch, -n ${n}`);
  await reset();
  const allowed = await runRedisBenchmark(d.redis.port, ["EVALSHA", sha, ...allowedArgs], { ...rbOpts, n });
  const allowedAfter = await evalOnce(allowedArgs);
  log(`redis-benchmark: production ARGV (limited branch after the burst), -n ${n}`);
  await reset();
  const prod = await runRedisBenchmark(d.redis.port, ["EVALSHA", sha, ...prodArgs], { ...rbOpts, n });
  const prodAfter = await evalOnce(prodArgs);

  const limiterdWarnings = d.limiterd.stderr().split("\n").filter((l) => / (warn|error) /.test(l));
  return {
    orgs: tokens.length,
    pids: { limiterd: d.limiterd.proc.pid, "redis-server": d.redisPid, "admit-load": gen.proc.pid },
    load,
    cpu,
    redisBenchmark: {
      sha,
      allowed: { ...allowed, verdictAfter: Number(allowedAfter[0]) },
      production: { ...prod, verdictAfter: Number(prodAfter[0]) },
    },
    limiterdWarnings: { count: limiterdWarnings.length, first: limiterdWarnings.slice(0, 5) },
  };
}

// ---- main ---------------------------------------------------------------------------------

function rbCpu(r: RedisBenchResult, cores: number) {
  const pct = (x: number) => `${((100 * x) / r.seconds / cores).toFixed(1)}%`;
  return `redis-server ${pct(r.cpuSeconds.redisServer)}, redis-benchmark ${pct(r.cpuSeconds.redisBenchmark)} of the machine`;
}

function wrkRow(name: string, r: WrkResult): (string | number)[] {
  const other = Object.entries(r.statuses)
    .filter(([k]) => k !== "200" && k !== "429")
    .reduce((a, [, v]) => a + v, 0);
  const sock = r.errors.connect + r.errors.read + r.errors.write + r.errors.timeout;
  return [name, fmt(r.okPerSecond), fmt(r.ok), fmt(r.statuses["429"] ?? 0), fmt(other), fmt(sock), r.latencyMs.p50.toFixed(2), r.latencyMs.p99.toFixed(2)];
}

function notOkShare(r: WrkResult): number {
  const sock = r.errors.connect + r.errors.read + r.errors.write + r.errors.timeout;
  return (r.notOk + sock) / Math.max(1, r.requests + sock);
}

async function main(): Promise<number> {
  const s = parseFlags(process.argv.slice(2));
  installSignalHandlers();
  ensureWrk();
  const started = new Date();
  const machine = machineInfo();
  const vers = versions();
  const cores = machine.nproc || cpus().length;
  log(`mailcore bench — ${machine.nproc} cores, ${machine.cpuModel}; ${vers.bun ? `bun ${vers.bun}` : ""}, ${vers.redisServer}`);

  const http = await httpPart(s, cores);
  await cleanupAll(); // the HTTP stack is done: free the machine for part 2
  const daemon = await daemonPart(s, cores);

  const bare = http.bare.run;
  const full = http.full.run;
  const fullShare = notOkShare(full);
  const bareShare = notOkShare(bare);
  const valid = fullShare <= MAX_NOT_OK && bareShare <= MAX_NOT_OK;
  const rbA = daemon.redisBenchmark.allowed;
  const rbP = daemon.redisBenchmark.production;

  const out: string[] = [];
  out.push(
    table(
      `1. HTTP GET /api/v1/tags — wrk -t${s.threads} -c${s.connections}, ${s.duration} s each after ${s.warmup} s warm-up; ${http.orgs} orgs, ${s.ips} client IPs`,
      ["target", "200/s", "200s", "429s", "other", "sock err", "p50 ms", "p99 ms"],
      [wrkRow("bare Bun.serve", bare), wrkRow("full path (api+limiterd+redis)", full)],
    ),
    `   ratio full/bare (200/s): ${(full.okPerSecond / bare.okPerSecond).toFixed(3)}   not-200 share: full ${(100 * fullShare).toFixed(2)}%, bare ${(100 * bareShare).toFixed(2)}%${valid ? "" : "   ** INVALID: over 1% not 200 — rerun with more --orgs **"}`,
    cpuTable("   CPU during the bare run", http.bare.cpu),
    cpuTable("   CPU during the full-path run", http.full.cpu),
    table(
      `2. Admissions: limiterd AdmitBatch (x${s.batch}, ${s.inflight} in flight, ${daemon.orgs} orgs) vs redis-benchmark EVALSHA admit.lua (-P ${s["rb-pipeline"]} -c ${s["rb-clients"]})`,
      ["measure", "per second", "count", "p50 ms", "p99 ms"],
      [
        ["limiterd admissions (all verdicts)", fmt(daemon.load.admissionsPerSecond), fmt(daemon.load.admissions), daemon.load.callLatencyMs.p50.toFixed(2), daemon.load.callLatencyMs.p99.toFixed(2)],
        ["limiterd admissions ALLOWED", fmt(daemon.load.allowedPerSecond), fmt(daemon.load.verdicts.ALLOWED ?? 0), "(per call)", ""],
        ["redis-benchmark, allowed branch", fmt(rbA.requestsPerSecond), fmt(rbA.n), rbA.latencyMs.p50.toFixed(2), rbA.latencyMs.p99.toFixed(2)],
        ["redis-benchmark, production ARGV", fmt(rbP.requestsPerSecond), fmt(rbP.n), rbP.latencyMs.p50.toFixed(2), rbP.latencyMs.p99.toFixed(2)],
      ],
    ),
    `   ratio limiterd / redis-benchmark (allowed branch): ${(daemon.load.admissionsPerSecond / rbA.requestsPerSecond).toFixed(3)}` +
      `   (vs production ARGV: ${(daemon.load.admissionsPerSecond / rbP.requestsPerSecond).toFixed(3)})`,
    `   verdicts: ${JSON.stringify(daemon.load.verdicts)}; RPC errors ${daemon.load.errors}` +
      `; verdict after the redis-benchmark runs: allowed branch ${rbA.verdictAfter}, production ARGV ${rbP.verdictAfter} (1 allowed, 3 org limited, 4 IP limited)`,
    cpuTable("   CPU during the AdmitBatch run", daemon.cpu),
    `   CPU during redis-benchmark: allowed branch — ${rbCpu(rbA, cores)}; production ARGV — ${rbCpu(rbP, cores)}`,
    `\nmachine: ${machine.nproc} cores, ${machine.cpuModel}, ${machine.memoryGiB} GiB, Linux ${machine.kernel}`,
    `versions: bun ${vers.bun}; ${vers.redisServer}; ${vers.redisBenchmark}; ${vers.wrk}`,
  );
  if (http.adminCliFailures.length) out.push(`admin CLI failures while creating organizations (retried): ${http.adminCliFailures.length}, e.g. ${http.adminCliFailures[0]}`);
  if (http.apiWarnings.count || http.limiterdWarnings.count || daemon.limiterdWarnings.count) {
    out.push(`log warnings: api ${http.apiWarnings.count}, limiterd (http) ${http.limiterdWarnings.count}, limiterd (daemon) ${daemon.limiterdWarnings.count}`);
  }

  const dir = join(REPO_ROOT, "loadtest", "results");
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `bench-${started.toISOString().replace(/[:.]/g, "-")}.json`);
  const strip = (r: WrkResult) => ({ ...r, text: r.text.trim().split("\n") });
  const json = {
    startedAt: started.toISOString(),
    finishedAt: new Date().toISOString(),
    command: `bun run loadtest/bench.ts ${process.argv.slice(2).join(" ")}`.trim(),
    settings: s,
    machine,
    versions: vers,
    valid,
    http: {
      ...http,
      bare: { warm: strip(http.bare.warm), run: strip(bare), cpu: http.bare.cpu },
      full: { warm: strip(http.full.warm), run: strip(full), cpu: http.full.cpu },
      ratioFullToBare: full.okPerSecond / bare.okPerSecond,
      notOkShare: { full: fullShare, bare: bareShare },
    },
    daemon: {
      ...daemon,
      ratioDaemonToRedisBenchmark: daemon.load.admissionsPerSecond / rbA.requestsPerSecond,
      ratioDaemonToRedisBenchmarkProductionArgv: daemon.load.admissionsPerSecond / rbP.requestsPerSecond,
    },
  };
  writeFileSync(file, `${JSON.stringify(json, null, 2)}\n`);
  out.push(`results: ${file}`);
  console.log(out.join("\n"));
  return valid ? 0 : 1;
}

let code = 1;
try {
  code = await main();
} catch (err) {
  console.error(`bench: ${(err as Error).stack ?? err}\n${procDiagnostics()}`);
} finally {
  await cleanupAll();
}
process.exit(code);
