// The benchmark (npm run bench, or: bun run loadtest/bench.ts [--flag value ...]).
// Everything runs on this machine and talks to 127.0.0.1 only; every process it starts is
// its own, started fresh here and stopped on exit.
//
// 1. HTTP: the full path (wrk -> api -> limiterd -> redis-server, GET /api/v1/tags with
//    many enterprise organizations and client IPs) against a bare Bun.serve answering the
//    same body and headers (the ceiling) and against the peer, what a user would otherwise
//    build (peer-server.ts: a token map and two rate-limiter-flexible limiters on the same
//    Redis); same wrk, same duration and concurrency.
// 2. Latency at load: k6 at a constant arrival rate of 50% and 90% of the full path's wrk
//    maximum, against the full path and, at the same rates, the bare server.
// 3. Daemon: AdmitBatch admissions per second straight into limiterd (the API's client),
//    against redis-benchmark running the very same admit.lua with EVALSHA on that Redis.
// 4. SMTP: messages per second through the SMTP front (smtp-bench.ts) against direct POSTs.
// 5. Memory: VmRSS and VmHWM of each process, read at the end of its load run.
// 6. The internal plane: the full path twice, limiterd on cleartext HTTP/2 (h2c) and on mutual
//    TLS (certificates from the admin CLI's `certs init` code), measured windows of the two
//    alternated in pairs; CPU per request of each process in each mode and the TLS hop's cost.
// 7. With --against DIR (another checkout of the project, e.g. a worktree of an older commit):
//    that checkout's full path and this one's, on h2c, measured windows alternated in pairs; what
//    this build changes in each process's CPU per request.
// 8. Admission per request (admission-bench.ts): the full path, the peer (on a Redis of its own)
//    and the bare server, all up, measured windows alternated in rounds; each process's CPU per
//    request against its budget (with --against DIR, that checkout's full path in the rounds too).
// 9. Accepted sends (sends-bench.ts): POST /api/v1/emails through the accept path (Redis with
//    appendfsync always, SQLite records) and through the send peer (send-peer.ts), alternated
//    rounds of 32 clients; CPU per accepted send of each process, and p50 and p99 at the same
//    offered rate (k6). With --against DIR, that checkout's accept path in the rounds too.
// Last, the performance goals (docs/performance.md, "Goals"), each met or missed by this run's figures.
// --quick shortens every run (about half the time in all). --only PART[,PART] runs some parts
// alone (http: 1, 2 and 5; daemon: 3; smtp: 4; plane: 6; against: 7; admission: 8; sends: 9);
// the goals of the others are "not measured here".
//
// Prints tables and writes loadtest/results/bench-<timestamp>.json.
import { spawnSync } from "bun";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { cpus, release, totalmem } from "node:os";
import { join, resolve } from "node:path";
import { HealthCheckResponse_ServingStatus } from "../internal/gen/grpc/health/v1/health_pb";
import { Plan } from "../internal/gen/mailcore/limiter/v1/limiter_pb";
import { limiterCredential } from "../internal/config/config";
import { ensurePlaneSecret } from "../internal/plane/secret";
import { limiterClients } from "../internal/limiterclient/client";
import { initCerts } from "../internal/plane/certs";
import type { Role } from "../internal/plane/tls";
import {
  clientTlsEnv,
  daemonTlsEnv,
  freePort,
  pool,
  REPO_ROOT,
  runBun,
  runToEnd,
  startRedis,
  tempDir,
  waitFor,
} from "../internal/testkit/testkit";
import { hashToken } from "../internal/token/token";
import { ensureK6, k6Version } from "./k6tool";
import { type LatencyResult, runLatency } from "./latency";
import {
  addShare,
  benchJson,
  cleanupAll,
  type CpuReport,
  cpuWindow,
  installSignalHandlers,
  type Memory,
  memory,
  onExit,
  procDiagnostics,
  round,
  trackDir,
  trackProc,
} from "./procs";
import {
  admitArgs,
  loadAdmitScript,
  type RedisBenchResult,
  redisBenchmarkVersion,
  redisCli,
  redisPid,
  runRedisBenchmark,
} from "./redisbench";
import { cpuColumns, cpuTable, fmt, othersPct, table } from "./report";
import { admissionBench } from "./admission-bench";
import { median, type RoundWindow, type TargetMedians } from "./rounds";
import { sendsBench } from "./sends-bench";
import { type SmtpBenchResult, type SmtpRun, smtpBench } from "./smtp-bench";
import { ensureWrk, runWrk, type WrkResult, wrkVersion } from "./wrk";

const DEFAULTS = {
  duration: 10, // seconds measured, each target
  // Seconds before each measured run. The JIT is still compiling after 2 s: in limiterd's
  // AdmitBatch run its compiler threads took 0.85 s of a 6 s window after a 2 s warm-up, and
  // 0.17 s after 20 s. A service runs for days; the benchmark measures it warm.
  warmup: 15,
  "latency-seconds": 10, // each k6 constant-arrival-rate run
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
  "smtp-seconds": 8, // each SMTP throughput run (warm-up: --warmup)
  "smtp-clients": 32,
  "smtp-samples": 100, // messages one at a time, for SMTP's added latency
  "smtp-orgs": 12,
  pairs: 3, // alternated pairs of measured windows in parts 6 and 7, rounds in parts 8 and 9
  "admission-orgs": 1500, // part 8: the peer's organization limiter is a fixed window of 2,000 a minute
  "send-clients": 32, // part 9: wrk connections, each a client waiting for its answer
  "send-orgs": 400, // part 9
};
type Settings = typeof DEFAULTS & { only: Part[]; against?: string };
const PARTS = ["http", "daemon", "smtp", "plane", "against", "admission", "sends"] as const;
type Part = (typeof PARTS)[number];
// --quick: shorter runs and fewer organizations to create first (more are added if needed).
const QUICK: Partial<Settings> = {
  duration: 5,
  warmup: 5,
  orgs: 100,
  "latency-seconds": 5,
  "rb-seconds": 3,
  "smtp-seconds": 4,
  "smtp-samples": 50,
  pairs: 2,
};
/** Load levels of the latency runs, as shares of the full path's wrk maximum. */
const LOADS = [0.5, 0.9];
const ENTERPRISE_QUOTA = 2000; // per minute, burst as large
const MAX_NOT_OK = 0.01;

function parseFlags(argv: string[]): Settings {
  const s: Settings = { ...DEFAULTS, ...(argv.includes("--quick") ? QUICK : {}), only: [] };
  argv = argv.filter((a) => a !== "--quick");
  const usage = () =>
    new Error(
      `usage: bun run loadtest/bench.ts [--quick] [--only ${PARTS.join("|")}[,...]] [--against DIR] [${Object.keys(
        DEFAULTS,
      )
        .map((k) => `--${k} N`)
        .join("] [")}]`,
    );
  for (let i = 0; i < argv.length; i += 2) {
    const flag = argv[i]!;
    const arg = argv[i + 1];
    if (flag === "--only") {
      const parts = (arg ?? "").split(",");
      const unknown = parts.filter((p) => !(PARTS as readonly string[]).includes(p));
      if (!arg || unknown.length)
        throw new Error(`--only: unknown part ${JSON.stringify(unknown[0] ?? "")}\n${usage().message}`);
      s.only = parts as Part[];
      continue;
    }
    if (flag === "--against") {
      if (!arg || !existsSync(join(arg, "cmd/api/index.ts")))
        throw new Error(
          `--against: ${JSON.stringify(arg ?? "")} is not a checkout of this project (no cmd/api/index.ts)`,
        );
      s.against = resolve(arg);
      continue;
    }
    const name = flag.replace(/^--/, "") as keyof typeof DEFAULTS;
    const value = Number(arg);
    if (!(name in DEFAULTS) || !flag.startsWith("--") || !Number.isFinite(value) || value <= 0) throw usage();
    s[name] = value;
  }
  if (!s.only.length) s.only = PARTS.filter((p) => p !== "against" || s.against);
  if (s.only.includes("against") && !s.against) throw new Error("--only against needs --against DIR");
  return s;
}

const log = (msg: string) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${msg}`);

function machineInfo() {
  const nproc = spawnSync(["nproc"]).stdout.toString().trim();
  const model =
    /model name\s*:\s*(.*)/.exec(readFileSync("/proc/cpuinfo", "utf8"))?.[1] ?? cpus()[0]?.model ?? "unknown";
  return { nproc: Number(nproc), cpuModel: model.trim(), kernel: release(), memoryGiB: round(totalmem() / 2 ** 30, 1) };
}

function versions() {
  const first = (cmd: string[]) => spawnSync(cmd).stdout.toString().split("\n")[0]!.trim();
  return {
    bun: first([process.execPath, "--version"]),
    redisServer: first(["redis-server", "--version"]),
    redisBenchmark: redisBenchmarkVersion(),
    wrk: wrkVersion(),
    k6: k6Version(),
    rateLimiterFlexible: (
      JSON.parse(readFileSync(join(REPO_ROOT, "node_modules/rate-limiter-flexible/package.json"), "utf8")) as {
        version: string;
      }
    ).version,
  };
}

/**
 * redis-server + limiterd (of the checkout `root`) on it, fresh, with a data dir of their own;
 * with `certs` (an initCerts directory), limiterd on mutual TLS and each client with its role's
 * certificate.
 */
async function startDaemon(label: string, certs?: string, root = REPO_ROOT) {
  const redis = await startRedis();
  onExit(`redis-server (${label})`, () => redis.stop());
  const dataDir = trackDir(tempDir(`mailcore-bench-${label}-`));
  const limiterPort = await freePort();
  const limiterUrl = `${certs ? "https" : "http"}://127.0.0.1:${limiterPort}`;
  const env = { DATA_DIR: dataDir, LIMITER_URL: limiterUrl, REDIS_URL: redis.url };
  // The plane secret before limiterd starts (as the dev stack makes it): the bench's own clients
  // send it from their first call, whichever checkout's limiterd runs.
  if (!certs) ensurePlaneSecret(dataDir);
  /** A client process's variables: env and, on mutual TLS, the certificate of its role. */
  const roleEnv = (role: Role): Record<string, string> => ({ ...env, ...(certs ? clientTlsEnv(certs, role) : {}) });
  const limiterd = trackProc(
    `limiterd (${label})`,
    runBun(join(root, "cmd/limiterd/index.ts"), [], {
      ...env,
      LIMITER_PORT: String(limiterPort),
      ...(certs ? daemonTlsEnv(certs) : {}),
    }),
  );
  // The bench's own clients read their certificates from the variables, as the processes do:
  // the operator's for the Directory, the front's for the health check (a front's RPC).
  const clientsOf = (role: Role) => limiterClients(limiterUrl, limiterCredential(roleEnv(role)));
  const clients = clientsOf("admin");
  const { health } = clientsOf("front");
  await waitFor(
    "limiterd",
    async () => (await health.check({}, { timeoutMs: 1_000 })).status === HealthCheckResponse_ServingStatus.SERVING,
    20_000,
  ).catch((err) => {
    throw new Error(`${(err as Error).message}\nlimiterd stderr:\n${limiterd.stderr()}`);
  });
  return { redis, redisPid: await redisPid(redis.port), limiterd, limiterUrl, clients, env, roleEnv, dataDir };
}

/** `count` enterprise organizations <prefix>-<from + i> created over the Directory RPC; their tokens. */
async function createOrgs(
  directory: Awaited<ReturnType<typeof startDaemon>>["clients"]["directory"],
  prefix: string,
  from: number,
  count: number,
) {
  return pool(count, 16, async (i) => {
    await directory.createOrganization({ slug: `${prefix}-${from + i}`, plan: Plan.ENTERPRISE });
    return (await directory.createToken({ slug: `${prefix}-${from + i}` })).token;
  });
}

// ---- 1. HTTP ------------------------------------------------------------------------------

/** The body and the names of the rate-limit headers of one answer, to compare targets. */
async function shape(url: string, token: string) {
  const res = await fetch(`${url}/api/v1/tags`, {
    headers: { Authorization: `Bearer ${token}`, "X-Forwarded-For": "198.18.0.1" },
  });
  const body = await res.text();
  const headers = [...res.headers.keys()].filter((h) => /ratelimit|content-type/i.test(h)).sort();
  return { status: res.status, body, headers, key: `${body} ${headers}`, all: Object.fromEntries(res.headers) };
}

async function httpPart(s: Settings, cores: number, k6: string) {
  log("HTTP: starting redis-server, limiterd and the API");
  const d = await startDaemon("http");
  const apiPort = await freePort();
  const apiUrl = `http://127.0.0.1:${apiPort}`;
  const api = trackProc(
    "api",
    runBun("cmd/api/index.ts", [], { ...d.env, API_PORT: String(apiPort), TRUST_PROXY: "127.0.0.1" }),
  );
  await waitFor("api /readyz", async () => (await fetch(`${apiUrl}/readyz`)).ok, 20_000);

  const tokens: string[] = [];
  const orgOf: Record<string, string> = {}; // token -> organization, for the peer
  const cliFailures: string[] = [];
  const tokensFile = join(d.dataDir, "tokens.txt");
  const peerTokensFile = join(d.dataDir, "peer-tokens.json");
  const addOrgs = async (count: number) => {
    const t0 = performance.now();
    const first = tokens.length;
    const made = await pool(count, 6, async (i) => {
      // A failed create may have left the slug half made (claimed, no plan): retry under another.
      for (let attempt = 0; ; attempt++) {
        const slug = `bench-${first + i}${attempt ? `-r${attempt}` : ""}`;
        const created = await runToEnd("cmd/admin/index.ts", ["org", "create", slug, "--plan", "enterprise"], d.env);
        const token =
          created.code === 0 ? await runToEnd("cmd/admin/index.ts", ["token", "create", slug], d.env) : created;
        if (token.code === 0) return { slug, token: token.stdout.trim() };
        cliFailures.push(`${slug}: ${token.stderr.trim()}`);
        if (attempt >= 2) throw new Error(`admin CLI, organization ${slug}: ${token.stderr}`);
      }
    });
    for (const m of made) {
      tokens.push(m.token);
      orgOf[m.token] = m.slug;
    }
    writeFileSync(tokensFile, `${tokens.join("\n")}\n`);
    writeFileSync(peerTokensFile, JSON.stringify(orgOf));
    const secs = (performance.now() - t0) / 1000;
    log(
      `HTTP: ${count} enterprise organizations created with the admin CLI in ${secs.toFixed(1)} s (${tokens.length} in all)`,
    );
    return secs;
  };
  const orgSeconds = await addOrgs(s.orgs);
  let topUpSeconds = 0;
  /** Adds organizations up to `needed` (reckoned from a warm-up) so that quota cannot bind the measured run. */
  const topUp = async (needed: number, warm: WrkResult) => {
    if (needed <= tokens.length) return false;
    log(`HTTP: the warm-up ran at ${fmt(warm.requests / warm.seconds)} req/s; adding organizations to ${needed}`);
    topUpSeconds += await addOrgs(needed - tokens.length);
    return true;
  };

  // One request by hand: the full path answers 200 with the body and headers expected; the
  // other targets must answer the same way.
  const probe = await shape(apiUrl, tokens[0]!);
  if (probe.status !== 200) throw new Error(`the API answered ${probe.status} to a valid request: ${probe.body}`);
  const sameShape: Record<string, boolean> = {};
  const startTarget = async (name: string, entry: string, portVar: string, env: Record<string, string> = {}) => {
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const p = trackProc(name, runBun(entry, [], { ...env, [portVar]: String(port) }));
    await waitFor(name, async () => (await fetch(`${url}/healthz`)).ok, 15_000).catch((err) => {
      throw new Error(`${(err as Error).message}\n${name} stderr:\n${p.stderr()}`);
    });
    const got = await shape(url, tokens[0]!);
    sameShape[name] = got.status === 200 && got.key === probe.key;
    if (!sameShape[name])
      log(`HTTP: warning: the ${name} answer differs from the API's (${got.status} ${got.key} vs ${probe.key})`);
    return { p, url };
  };

  const wrkOpts = { threads: s.threads, connections: s.connections, tokensFile, ips: s.ips };
  /** wrk warm-up, then the measured run; CPU of `busy` and `idle` over the run, memory of `busy` at its end. */
  const measure = async (
    url: string,
    busy: Record<string, number>,
    idle: Record<string, number>,
    afterWarmup?: (warm: WrkResult) => Promise<void>,
  ) => {
    const warm = await runWrk({ ...wrkOpts, url: `${url}/api/v1/tags`, seconds: s.warmup });
    await afterWarmup?.(warm);
    let close: ((m?: Record<string, number>) => CpuReport) | undefined;
    const run = await runWrk({
      ...wrkOpts,
      url: `${url}/api/v1/tags`,
      seconds: s.duration,
      started: () => {
        close = cpuWindow({ ...busy, ...idle, "bench.ts (harness)": process.pid }, cores);
      },
    });
    return { warm, run, cpu: close!({ wrk: run.cpuSeconds }), memory: memory(busy) };
  };

  log("HTTP: bare Bun.serve");
  const bare = await startTarget("bare-server", "loadtest/bare-server.ts", "BARE_PORT");
  log(`HTTP: bare — wrk ${s.warmup} s warm-up, then ${s.duration} s`);
  // The full path's processes stay up, idle, during the other runs: their idle cost shows too.
  const bareRes = await measure(
    bare.url,
    { "bare-server": bare.p.proc.pid },
    { "api (idle)": api.proc.pid, "limiterd (idle)": d.limiterd.proc.pid, "redis-server (idle)": d.redisPid },
  );

  log("HTTP: peer (Bun.serve + rate-limiter-flexible on the same redis-server)");
  const peer = await startTarget("peer-server", "loadtest/peer-server.ts", "PEER_PORT", {
    REDIS_URL: d.redis.url,
    PEER_TOKENS: peerTokensFile,
  });
  log(`HTTP: peer — wrk ${s.warmup} s warm-up, then ${s.duration} s`);
  const peerRes = await measure(
    peer.url,
    { "peer-server": peer.p.proc.pid, "redis-server": d.redisPid },
    { "api (idle)": api.proc.pid, "limiterd (idle)": d.limiterd.proc.pid },
    async (warm) => {
      // The peer's organization limiter is a fixed window of 2000 per 60 s, and one window
      // spans the whole run: no refill to count on (50% margin).
      const needed = Math.ceil((1.5 * (warm.requests / warm.seconds) * (s.warmup + s.duration + 2)) / ENTERPRISE_QUOTA);
      if (await topUp(needed, warm)) {
        peer.p.proc.kill("SIGHUP");
        await waitFor(
          "the peer to read the new tokens",
          async () => (await shape(peer.url, tokens.at(-1)!)).status === 200,
        );
      }
    },
  );
  await peer.p.stop("SIGKILL");

  log(`HTTP: full path — wrk ${s.warmup} s warm-up, then ${s.duration} s`);
  const fullPids = { api: api.proc.pid, limiterd: d.limiterd.proc.pid, "redis-server": d.redisPid };
  const fullRes = await measure(apiUrl, fullPids, { "bare-server (idle)": bare.p.proc.pid }, async (warm) => {
    // Enough organizations that quota cannot limit the measured runs (wrk, then k6 at each
    // load): each has its burst plus what refills; top up (with 50% margin) from the rate
    // seen in the warm-up.
    const window = s.warmup + s.duration + LOADS.length * (s["latency-seconds"] + 3);
    const requests =
      (warm.requests / warm.seconds) *
      (s.warmup + s.duration + LOADS.reduce((a, l) => a + l, 0) * s["latency-seconds"]);
    const perOrg = ENTERPRISE_QUOTA + (ENTERPRISE_QUOTA * window) / 60;
    await topUp(Math.ceil((1.5 * requests) / perOrg), warm);
  });

  // Latency at fixed rates of the full path's maximum, then the bare server at the same rates.
  const latency: { target: string; load: number; result: LatencyResult }[] = [];
  for (const [target, url, pids] of [
    ["full path", apiUrl, fullPids],
    ["bare Bun.serve", bare.url, { "bare-server": bare.p.proc.pid }],
  ] as const) {
    for (const load of LOADS) {
      const rate = Math.max(1, Math.round(load * fullRes.run.okPerSecond));
      log(
        `HTTP: latency, ${target} — k6 at ${fmt(rate)} req/s (${load * 100}% of the full path's maximum) for ${s["latency-seconds"]} s`,
      );
      const summary = join(d.dataDir, `k6-${latency.length}.json`);
      const opts = {
        url,
        rate,
        seconds: s["latency-seconds"],
        tokensFile,
        ips: s.ips,
        summary,
        pids: { ...pids, "bench.ts (harness)": process.pid },
        cores,
      };
      latency.push({ target, load, result: await runLatency(opts, k6) });
    }
  }
  await bare.p.stop("SIGKILL");
  const apiWarnings = api
    .stderr()
    .split("\n")
    .filter((l) => /"level":"(warn|error)"/.test(l));
  const limiterdWarnings = d.limiterd
    .stderr()
    .split("\n")
    .filter((l) => /"level":"(warn|error)"/.test(l));

  return {
    orgs: tokens.length,
    orgCreationSeconds: round(orgSeconds + topUpSeconds, 1),
    adminCliFailures: cliFailures,
    pids: { ...fullPids, "bare-server": bare.p.proc.pid, "peer-server": peer.p.proc.pid },
    sameShape,
    probe: { status: probe.status, body: probe.body, headers: probe.all },
    bare: bareRes,
    peer: peerRes,
    full: fullRes,
    latency,
    apiWarnings: { count: apiWarnings.length, first: apiWarnings.slice(0, 5) },
    limiterdWarnings: { count: limiterdWarnings.length, first: limiterdWarnings.slice(0, 5) },
  };
}

// ---- 3. Daemon vs redis-benchmark -----------------------------------------------------------

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
  const tokens = await createOrgs(directory, "adm", 0, s["admit-orgs"]);
  const tokensFile = join(d.dataDir, "tokens.txt");
  writeFileSync(tokensFile, `${tokens.join("\n")}\n`);
  log(
    `daemon: ${tokens.length} enterprise organizations created over the Directory RPC in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
  );

  log(`daemon: AdmitBatch x${s.batch}, ${s.inflight} in flight — ${s.warmup} s warm-up, then ${s.duration} s`);
  const gen = trackProc(
    "admit-load",
    runBun("loadtest/admit-load.ts", [d.limiterUrl, tokensFile], {
      DATA_DIR: d.dataDir,
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
  const close = cpuWindow(
    { limiterd: d.limiterd.proc.pid, "redis-server": d.redisPid, "bench.ts (harness)": process.pid },
    cores,
  );
  await marker("MEASURE_END", (s.duration + 30) * 1000);
  const cpu = close();
  const load = await benchJson<AdmitLoad>("admit-load", gen);
  addShare(cpu, "admit-load (the API's client)", load.cpuSeconds);

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
  const n = Math.min(
    5_000_000,
    Math.max(50_000, Math.round((calib.requestsPerSecond * s["rb-seconds"]) / 10_000) * 10_000),
  );
  log(`redis-benchmark: allowed branch, -n ${n}`);
  await reset();
  const allowed = await runRedisBenchmark(d.redis.port, ["EVALSHA", sha, ...allowedArgs], { ...rbOpts, n });
  const allowedAfter = await evalOnce(allowedArgs);
  log(`redis-benchmark: production ARGV (limited branch after the burst), -n ${n}`);
  await reset();
  const prod = await runRedisBenchmark(d.redis.port, ["EVALSHA", sha, ...prodArgs], { ...rbOpts, n });
  const prodAfter = await evalOnce(prodArgs);

  const limiterdWarnings = d.limiterd
    .stderr()
    .split("\n")
    .filter((l) => /"level":"(warn|error)"/.test(l));
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

// ---- 6 and 7. Two full paths, windows alternated -------------------------------------------

/** One of two full paths compared: a checkout's api and limiterd, limiterd on mutual TLS with `certs`. */
interface Variant {
  name: string;
  /** The checkout whose cmd/ is run. */
  root: string;
  certs?: string;
}
/** The processes of the full path whose CPU per request is compared. */
const HOT_PATH = ["api", "limiterd", "redis-server"] as const;
type UsPerRequest = Record<(typeof HOT_PATH)[number] | "hot path", number>;

interface PairedWindow {
  variant: string;
  pair: number;
  run: WrkResult;
  cpu: CpuReport;
  /** CPU microseconds per request of each process of HOT_PATH, and of all three. */
  usPerRequest: UsPerRequest;
}

/** redis-server, limiterd and the API of one variant, with `orgs` enterprise organizations. */
async function variantStack(v: Variant, label: string, orgs: number) {
  const d = await startDaemon(label, v.certs, v.root);
  const apiPort = await freePort();
  const url = `http://127.0.0.1:${apiPort}`;
  const api = trackProc(
    `api (${label})`,
    runBun(join(v.root, "cmd/api/index.ts"), [], {
      ...d.roleEnv("front"),
      API_PORT: String(apiPort),
      TRUST_PROXY: "127.0.0.1",
    }),
  );
  await waitFor(`api (${label}) /readyz`, async () => (await fetch(`${url}/readyz`)).ok, 20_000).catch((err) => {
    throw new Error(`${(err as Error).message}\napi stderr:\n${api.stderr()}`);
  });
  const tokens: string[] = [];
  const tokensFile = join(d.dataDir, "tokens.txt");
  const addOrgs = async (count: number) => {
    tokens.push(...(await createOrgs(d.clients.directory, label, tokens.length, count)));
    writeFileSync(tokensFile, `${tokens.join("\n")}\n`);
  };
  await addOrgs(orgs);
  const probe = await shape(url, tokens[0]!);
  if (probe.status !== 200)
    throw new Error(`the API (${v.name}) answered ${probe.status} to a valid request: ${probe.body}`);
  const pids = { api: api.proc.pid, limiterd: d.limiterd.proc.pid, "redis-server": d.redisPid };
  return { v, url, tokensFile, pids, addOrgs, orgs: () => tokens.length, api, limiterd: d.limiterd };
}

/**
 * The full path of two variants side by side: both warmed up, then --pairs pairs of measured
 * wrk windows, one of each, back to back; B less A in each pair is what B changes.
 */
async function pairedFullPaths(s: Settings, cores: number, part: string, variants: [Variant, Variant]) {
  const { pairs } = s;
  const stacks: Awaited<ReturnType<typeof variantStack>>[] = [];
  for (const [i, v] of variants.entries()) stacks.push(await variantStack(v, `${part}-${"ab"[i]}`, s.orgs));
  const wrkOpts = (st: (typeof stacks)[number], seconds: number) => ({
    url: `${st.url}/api/v1/tags`,
    threads: s.threads,
    connections: s.connections,
    tokensFile: st.tokensFile,
    ips: s.ips,
    seconds,
  });

  let fastest = 0;
  for (const st of stacks) {
    log(`${part}: ${st.v.name} — wrk ${s.warmup} s warm-up`);
    const warm = await runWrk(wrkOpts(st, s.warmup));
    fastest = Math.max(fastest, warm.requests / warm.seconds);
  }
  // Quota must not bind: each organization has its burst plus what refills over the part, which
  // lasts about both variants' runs back to back. The warm-up's rate is that of a process still
  // compiling (a 6-pair run at 1.5 times it had 429s in its last window): 3 times it.
  const window = 2 * (s.warmup + pairs * (s.duration + 2));
  const needed = Math.ceil(
    (3 * fastest * (s.warmup + pairs * s.duration)) / (ENTERPRISE_QUOTA + (ENTERPRISE_QUOTA * window) / 60),
  );
  for (const st of stacks) if (needed > st.orgs()) await st.addOrgs(needed - st.orgs());
  log(`${part}: ${stacks[0]!.orgs()} organizations each; ${pairs} pairs of ${s.duration} s windows`);

  const windows: PairedWindow[] = [];
  for (let pair = 0; pair < pairs; pair++) {
    // Which variant goes first alternates, so that a drift in the machine's speed falls on both.
    for (const st of pair % 2 === 0 ? stacks : [...stacks].reverse()) {
      log(`${part}: pair ${pair + 1}, ${st.v.name} — wrk ${s.duration} s`);
      let close: ((m?: Record<string, number>) => CpuReport) | undefined;
      const run = await runWrk({
        ...wrkOpts(st, s.duration),
        started: () => {
          close = cpuWindow({ ...st.pids, "bench.ts (harness)": process.pid }, cores);
        },
      });
      const cpu = close!({ wrk: run.cpuSeconds });
      const us = (n: string) => ((cpu.processes[n]?.cpuSeconds ?? Number.NaN) * 1e6) / Math.max(1, run.requests);
      const usPerRequest = {
        api: us("api"),
        limiterd: us("limiterd"),
        "redis-server": us("redis-server"),
        "hot path": HOT_PATH.reduce((a, n) => a + us(n), 0),
      };
      windows.push({ variant: st.v.name, pair, run, cpu, usPerRequest });
    }
  }

  const names = variants.map((v) => v.name) as [string, string];
  const medians = names.map((name) => {
    const of = windows.filter((w) => w.variant === name);
    return {
      variant: name,
      okPerSecond: median(of.map((w) => w.run.okPerSecond)),
      usPerRequest: Object.fromEntries(
        ([...HOT_PATH, "hot path"] as const).map((n) => [n, median(of.map((w) => w.usPerRequest[n]))]),
      ) as UsPerRequest,
    };
  });
  const byPair = Array.from({ length: pairs }, (_, pair) => {
    const [a, b] = names.map((n) => windows.find((w) => w.pair === pair && w.variant === n)!) as [
      PairedWindow,
      PairedWindow,
    ];
    return {
      /** B less A, microseconds per request. */
      diffUs: Object.fromEntries(
        ([...HOT_PATH, "hot path"] as const).map((n) => [n, b.usPerRequest[n] - a.usPerRequest[n]]),
      ) as UsPerRequest,
      hotPathShare: b.usPerRequest["hot path"] / a.usPerRequest["hot path"] - 1,
      throughputRatio: b.run.okPerSecond / a.run.okPerSecond,
    };
  });
  const warnings = (p: { stderr(): string }) =>
    p
      .stderr()
      .split("\n")
      .filter((l) => /"level":"(warn|error)"/.test(l) && !l.includes("records in the SQLite file")).length;
  return {
    variants: names,
    orgs: stacks[0]!.orgs(),
    windows: windows.map((w) => ({ ...w, run: { ...w.run, text: w.run.text.trim().split("\n") } })),
    medians,
    pairs: byPair,
    median: {
      diffUs: Object.fromEntries(
        ([...HOT_PATH, "hot path"] as const).map((n) => [n, median(byPair.map((p) => p.diffUs[n]))]),
      ) as UsPerRequest,
      hotPathShare: median(byPair.map((p) => p.hotPathShare)),
      throughputRatio: median(byPair.map((p) => p.throughputRatio)),
    },
    notOkShare: Math.max(...windows.map((w) => notOkShare(w.run))),
    logWarnings: Object.fromEntries(
      stacks.flatMap((st) => [
        [`api (${st.v.name})`, warnings(st.api)],
        [`limiterd (${st.v.name})`, warnings(st.limiterd)],
      ]),
    ),
  };
}

/** 6. The internal plane: the full path with limiterd on h2c, then on mutual TLS (certs init's certificates). */
async function planePart(s: Settings, cores: number) {
  const certs = trackDir(tempDir("mailcore-bench-certs-"));
  await initCerts(certs, []);
  log("plane: two full paths (redis-server, limiterd, api), one on h2c, one on mutual TLS");
  const variants: [Variant, Variant] = [
    { name: "h2c", root: REPO_ROOT },
    { name: "mutual TLS", root: REPO_ROOT, certs },
  ];
  return pairedFullPaths(s, cores, "plane", variants);
}

/** 7. This checkout's full path against another's (--against DIR), both on h2c. */
async function againstPart(s: Settings, cores: number, dir: string) {
  const rev = (root: string) => spawnSync(["git", "-C", root, "rev-parse", "--short", "HEAD"]).stdout.toString().trim();
  const variants: [Variant, Variant] = [
    { name: `other: ${rev(dir)}`, root: dir },
    { name: `this: ${rev(REPO_ROOT)}`, root: REPO_ROOT },
  ];
  log(`against: the full path of ${dir} (${variants[0].name}) and of this checkout (${variants[1].name})`);
  return pairedFullPaths(s, cores, "against", variants);
}

// ---- main ---------------------------------------------------------------------------------

function rbCpu(r: RedisBenchResult, cores: number) {
  const pct = (x: number) => `${((100 * x) / r.seconds / cores).toFixed(1)}%`;
  return `redis-server ${pct(r.cpuSeconds.redisServer)}, redis-benchmark ${pct(r.cpuSeconds.redisBenchmark)} of the machine`;
}

function wrkRow(name: string, r: WrkResult, bare: WrkResult): (string | number)[] {
  const other = Object.entries(r.statuses)
    .filter(([k]) => k !== "200" && k !== "429")
    .reduce((a, [, v]) => a + v, 0);
  const sock = r.errors.connect + r.errors.read + r.errors.write + r.errors.timeout;
  return [
    name,
    fmt(r.okPerSecond),
    (r.okPerSecond / bare.okPerSecond).toFixed(3),
    fmt(r.ok),
    fmt(r.statuses["429"] ?? 0),
    fmt(other),
    fmt(sock),
    r.latencyMs.p50.toFixed(2),
    r.latencyMs.p99.toFixed(2),
  ];
}

function notOkShare(r: WrkResult): number {
  const sock = r.errors.connect + r.errors.read + r.errors.write + r.errors.timeout;
  return (r.notOk + sock) / Math.max(1, r.requests + sock);
}

/** A process's CPU microseconds per request (or admission) over a run. */
function usPer(cpu: CpuReport, name: string, requests: number): string {
  return (((cpu.processes[name]?.cpuSeconds ?? Number.NaN) * 1e6) / Math.max(1, requests)).toFixed(1);
}

/** CPU microseconds per request of each named process over a run. */
function perRequest(cpu: CpuReport, requests: number, names: string[]): string {
  return names.map((n) => `${n} ${usPer(cpu, n, requests)} us`).join(", ");
}

/** Of each named Bun process's CPU in a run, the share its JIT compiler threads took: near 0 when it was warm. */
function jitShares(cpu: CpuReport, names: string[]): string {
  return names
    .map(
      (n) =>
        `${n} ${((100 * (cpu.processes[n]?.jitSeconds ?? Number.NaN)) / (cpu.processes[n]?.cpuSeconds || Number.NaN)).toFixed(1)}%`,
    )
    .join(", ");
}

interface Goal {
  goal: string;
  target: string;
  stretch?: string;
  measured: string;
  verdict: "met" | "met, stretch too" | "missed" | "not measured here";
}

/** The performance goals (docs/performance.md), from one run's figures; a part not run leaves its goals unmeasured. */
function goals(m: {
  fullToBare?: number;
  fullToPeer?: number;
  daemonToRedisBenchmark?: number;
  p99AtHalf?: { full: number; bare: number };
  planeCost?: number;
  /** Part 8's medians. */
  admission?: { full: TargetMedians; peer: TargetMedians; bare: TargetMedians };
  /** Part 9's medians, and p99 at the same offered rate. */
  sends?: { ours: TargetMedians; peer: TargetMedians; p99: { ours: number; peer: number } };
}): Goal[] {
  const judge = (x: number, target: number, stretch?: number): Goal["verdict"] =>
    stretch !== undefined && x >= stretch ? "met, stretch too" : x >= target ? "met" : "missed";
  const unmeasured = { measured: "-", verdict: "not measured here" } as const;
  const p99Ratio = m.p99AtHalf && m.p99AtHalf.full / m.p99AtHalf.bare;
  return [
    {
      goal: "full path / bare Bun.serve (req/s)",
      target: ">= 0.45",
      stretch: ">= 0.6",
      ...(m.fullToBare === undefined
        ? unmeasured
        : { measured: m.fullToBare.toFixed(3), verdict: judge(m.fullToBare, 0.45, 0.6) }),
    },
    {
      goal: "full path / peer (req/s)",
      target: ">= 1.2",
      stretch: ">= 1.5",
      ...(m.fullToPeer === undefined
        ? unmeasured
        : { measured: m.fullToPeer.toFixed(3), verdict: judge(m.fullToPeer, 1.2, 1.5) }),
    },
    {
      goal: "limiterd admissions / redis-benchmark admit.lua, allowed branch",
      target: ">= 1.0",
      ...(m.daemonToRedisBenchmark === undefined
        ? unmeasured
        : { measured: m.daemonToRedisBenchmark.toFixed(3), verdict: judge(m.daemonToRedisBenchmark, 1.0) }),
    },
    {
      goal: "p99 at 50% load: full path / bare at the same rate",
      target: "<= 3",
      ...(p99Ratio === undefined || !m.p99AtHalf
        ? unmeasured
        : {
            measured: `${p99Ratio.toFixed(2)} (${m.p99AtHalf.full.toFixed(1)} / ${m.p99AtHalf.bare.toFixed(1)} ms)`,
            verdict: p99Ratio <= 3 ? "met" : "missed",
          }),
    },
    {
      goal: "the plane: mutual TLS's added CPU per request, share of the full path's on h2c",
      target: "<= 10%",
      ...(m.planeCost === undefined
        ? unmeasured
        : { measured: `${(100 * m.planeCost).toFixed(1)}%`, verdict: m.planeCost <= 0.1 ? "met" : "missed" }),
    },
    ...budgetGoals(m.admission, m.sends),
    {
      goal: "exactness: no over-admission, headers' r and t exact",
      target: "k6 thresholds",
      measured: "npm run loadtest",
      verdict: "not measured here",
    },
  ];
}

/** The budgets of parts 8 and 9: CPU per request (medians of alternated rounds) and p99 at the same rate, each at most its bound. */
function budgetGoals(
  a?: { full: TargetMedians; peer: TargetMedians; bare: TargetMedians },
  sends?: { ours: TargetMedians; peer: TargetMedians; p99: { ours: number; peer: number } },
): Goal[] {
  const atMost = (goal: string, x: number | undefined, bound: number, detail: string): Goal => ({
    goal,
    target: `<= ${bound}`,
    ...(x === undefined
      ? { measured: "-", verdict: "not measured here" }
      : { measured: `${x.toFixed(2)} (${detail})`, verdict: x <= bound ? "met" : "missed" }),
  });
  const us = (x: number) => `${x.toFixed(1)}`;
  const bare = a?.bare.usPerOk["bare-server"] ?? Number.NaN;
  return [
    atMost(
      "admission, CPU per request: full path (api+limiterd+Redis) / peer (process+Redis)",
      a && a.full.usPerOk.all! / a.peer.usPerOk.all!,
      1,
      a ? `${us(a.full.usPerOk.all!)} / ${us(a.peer.usPerOk.all!)} us` : "",
    ),
    atMost(
      "admission, CPU per request: api / bare Bun.serve",
      a && a.full.usPerOk.api! / bare,
      1.6,
      a ? `${us(a.full.usPerOk.api!)} / ${us(bare)} us` : "",
    ),
    atMost(
      "admission, CPU per request: limiterd / bare Bun.serve",
      a && a.full.usPerOk.limiterd! / bare,
      0.5,
      a ? `${us(a.full.usPerOk.limiterd!)} / ${us(bare)} us` : "",
    ),
    atMost(
      "admission, CPU per request: Redis / the peer's Redis",
      a && a.full.usPerOk["redis-server"]! / a.peer.usPerOk["redis-server"]!,
      1,
      a ? `${us(a.full.usPerOk["redis-server"]!)} / ${us(a.peer.usPerOk["redis-server"]!)} us` : "",
    ),
    {
      goal: "admission, throughput: full path / peer (req/s, medians of the rounds)",
      target: ">= 1",
      ...(a === undefined
        ? { measured: "-", verdict: "not measured here" }
        : {
            measured: (a.full.okPerSecond / a.peer.okPerSecond).toFixed(3),
            verdict: a.full.okPerSecond >= a.peer.okPerSecond ? "met" : "missed",
          }),
    },
    atMost(
      "sends, CPU per accepted send: accept path (api+limiterd+Redis) / send peer (process+Redis)",
      sends && sends.ours.usPerOk.all! / sends.peer.usPerOk.all!,
      1,
      sends ? `${us(sends.ours.usPerOk.all!)} / ${us(sends.peer.usPerOk.all!)} us` : "",
    ),
    atMost(
      "sends, p99 at the same offered rate: accept path / send peer",
      sends && sends.p99.ours / sends.p99.peer,
      2,
      sends ? `${sends.p99.ours.toFixed(1)} / ${sends.p99.peer.toFixed(1)} ms` : "",
    ),
  ];
}

/** Windows of alternated rounds (parts 8 and 9): each process's CPU per served request, and the medians. */
function roundsTable(title: string, windows: RoundWindow[], medians: Record<string, TargetMedians>): string[] {
  const procs = [...new Set(windows.flatMap((w) => Object.keys(w.usPerOk)))];
  const cell = (x: number | undefined) => (x === undefined ? "" : x.toFixed(1));
  return [
    table(
      `${title}; CPU us per served request`,
      ["round", "target", "2xx/s", ...procs, "p50 ms", "p99 ms", "others' CPU"],
      windows.map((w) => [
        w.round + 1,
        w.target,
        fmt(w.run.okPerSecond),
        ...procs.map((p) => cell(w.usPerOk[p])),
        w.run.latencyMs.p50.toFixed(2),
        w.run.latencyMs.p99.toFixed(2),
        `${w.othersPct.toFixed(0)}%`,
      ]),
    ),
    table(
      "   medians of the rounds",
      ["target", "2xx/s", ...procs, "p50 ms", "p99 ms"],
      Object.entries(medians).map(([name, m]) => [
        name,
        fmt(m.okPerSecond),
        ...procs.map((p) => cell(m.usPerOk[p])),
        m.p50Ms.toFixed(2),
        m.p99Ms.toFixed(2),
      ]),
    ),
  ];
}

function admissionReport(s: Settings, a: Awaited<ReturnType<typeof admissionBench>>): string[] {
  return roundsTable(
    `8. Admission per request — GET /api/v1/tags, wrk -t${s.threads} -c${s.connections}, ${s.pairs} rounds of ${s.duration} s windows after ${s.warmup} s warm-up each; ${s["admission-orgs"]} orgs`,
    a.closed.windows,
    a.closed.medians,
  );
}

function sendsReport(s: Settings, r: Awaited<ReturnType<typeof sendsBench>>): string[] {
  return [
    ...roundsTable(
      `9. Accepted sends — POST /api/v1/emails (200 bytes of text, a recipient each), wrk -t2 -c${s["send-clients"]}, ${s.pairs} rounds of ${s.duration} s windows after ${s.warmup} s warm-up each; Redis with appendfsync always`,
      r.closed.windows,
      r.closed.medians,
    ),
    table(
      `   latency at the same offered rate — k6 constant-arrival-rate at ${fmt(r.rate)}/s (half the slowest target's median), ${s["latency-seconds"]} s, two alternated rounds`,
      ["target", "round", "achieved/s", "not 2xx", "dropped", "p50 ms", "p99 ms", "max ms"],
      r.latency.map(({ target, round, result: x }) => [
        target,
        round + 1,
        fmt(x.achievedPerSecond),
        pct(x.notOkShare),
        fmt(x.droppedIterations),
        x.latencyMs.p50.toFixed(2),
        x.latencyMs.p99.toFixed(2),
        x.latencyMs.max.toFixed(2),
      ]),
    ),
  ];
}

const ratio = (a: number, b: number) => (a / b).toFixed(3);
const pct = (x: number) => `${(100 * x).toFixed(2)}%`;

function httpReport(s: Settings, http: Awaited<ReturnType<typeof httpPart>>, valid: boolean): string[] {
  const {
    bare: { run: bare },
    peer: { run: peer },
    full: { run: full },
  } = http;
  const shares = { full: notOkShare(full), bare: notOkShare(bare), peer: notOkShare(peer) };
  return [
    table(
      `1. HTTP GET /api/v1/tags — wrk -t${s.threads} -c${s.connections}, ${s.duration} s each after ${s.warmup} s warm-up; ${http.orgs} orgs, ${s.ips} client IPs`,
      ["target", "200/s", "vs bare", "200s", "429s", "other", "sock err", "p50 ms", "p99 ms"],
      [
        wrkRow("bare Bun.serve (ceiling)", bare, bare),
        wrkRow("peer: Bun.serve + rate-limiter-flexible", peer, bare),
        wrkRow("full path (api+limiterd+redis)", full, bare),
      ],
    ),
    `   ratio full/bare: ${ratio(full.okPerSecond, bare.okPerSecond)}   full/peer: ${ratio(full.okPerSecond, peer.okPerSecond)}   peer/bare: ${ratio(peer.okPerSecond, bare.okPerSecond)}` +
      `   not-200 share: full ${pct(shares.full)}, peer ${pct(shares.peer)}, bare ${pct(shares.bare)}${valid ? "" : "   ** INVALID: over 1% refused somewhere — rerun with more --orgs **"}`,
    `   same body and rate-limit header names as the API: ${Object.entries(http.sameShape)
      .map(([k, v]) => `${k} ${v ? "yes" : "NO"}`)
      .join(", ")}`,
    cpuTable("   CPU during the bare run", http.bare.cpu),
    cpuTable("   CPU during the peer run", http.peer.cpu),
    cpuTable("   CPU during the full-path run", http.full.cpu),
    `   CPU per request, full path: ${perRequest(http.full.cpu, full.requests, ["api", "limiterd", "redis-server", "wrk"])}` +
      `; bare: ${perRequest(http.bare.cpu, bare.requests, ["bare-server", "wrk"])}; peer: ${perRequest(http.peer.cpu, peer.requests, ["peer-server", "redis-server", "wrk"])}`,
    `   JIT compiler threads' share of each process's CPU in its run (warm: near 0): ${jitShares(http.full.cpu, ["api", "limiterd"])}, ${jitShares(http.bare.cpu, ["bare-server"])}, ${jitShares(http.peer.cpu, ["peer-server"])}`,
    table(
      `2. Latency at fixed load — k6 constant-arrival-rate, ${s["latency-seconds"]} s each, at ${LOADS.map((l) => `${l * 100}%`).join(" and ")} of the full path's wrk maximum (${fmt(full.okPerSecond)}/s)`,
      ["target", "load", "asked/s", "achieved/s", "not 200", "dropped", "p50 ms", "p99 ms", "max ms"],
      http.latency.map(({ target, load, result: r }) => [
        target,
        `${load * 100}%`,
        fmt(r.rate),
        fmt(r.achievedPerSecond),
        pct(r.notOkShare),
        fmt(r.droppedIterations),
        r.latencyMs.p50.toFixed(2),
        r.latencyMs.p99.toFixed(2),
        r.latencyMs.max.toFixed(2),
      ]),
    ),
    cpuColumns(
      "   CPU during the k6 runs",
      Object.fromEntries(http.latency.map((l) => [`${l.target} ${l.load * 100}%`, l.result.cpu])),
    ),
  ];
}

function daemonReport(s: Settings, daemon: Awaited<ReturnType<typeof daemonPart>>, cores: number): string[] {
  const rbA = daemon.redisBenchmark.allowed;
  const rbP = daemon.redisBenchmark.production;
  return [
    table(
      `3. Admissions: limiterd AdmitBatch (x${s.batch}, ${s.inflight} in flight, ${daemon.orgs} orgs) vs redis-benchmark EVALSHA admit.lua (-P ${s["rb-pipeline"]} -c ${s["rb-clients"]})`,
      ["measure", "per second", "count", "p50 ms", "p99 ms"],
      [
        [
          "limiterd admissions (all verdicts)",
          fmt(daemon.load.admissionsPerSecond),
          fmt(daemon.load.admissions),
          daemon.load.callLatencyMs.p50.toFixed(2),
          daemon.load.callLatencyMs.p99.toFixed(2),
        ],
        [
          "limiterd admissions ALLOWED",
          fmt(daemon.load.allowedPerSecond),
          fmt(daemon.load.verdicts.ALLOWED ?? 0),
          "(per call)",
          "",
        ],
        [
          "redis-benchmark, allowed branch",
          fmt(rbA.requestsPerSecond),
          fmt(rbA.n),
          rbA.latencyMs.p50.toFixed(2),
          rbA.latencyMs.p99.toFixed(2),
        ],
        [
          "redis-benchmark, production ARGV",
          fmt(rbP.requestsPerSecond),
          fmt(rbP.n),
          rbP.latencyMs.p50.toFixed(2),
          rbP.latencyMs.p99.toFixed(2),
        ],
      ],
    ),
    `   ratio limiterd / redis-benchmark (allowed branch): ${ratio(daemon.load.admissionsPerSecond, rbA.requestsPerSecond)}` +
      `   (vs production ARGV: ${ratio(daemon.load.admissionsPerSecond, rbP.requestsPerSecond)})`,
    `   verdicts: ${JSON.stringify(daemon.load.verdicts)}; RPC errors ${daemon.load.errors}` +
      `; verdict after the redis-benchmark runs: allowed branch ${rbA.verdictAfter}, production ARGV ${rbP.verdictAfter} (1 allowed, 3 org limited, 4 IP limited)`,
    cpuTable("   CPU during the AdmitBatch run", daemon.cpu),
    `   CPU during redis-benchmark: allowed branch — ${rbCpu(rbA, cores)}; production ARGV — ${rbCpu(rbP, cores)}`,
    // The goal's own words: the daemon must cost Redis less per admission than the naive client does.
    `   Redis CPU per admission: through limiterd ${usPer(daemon.cpu, "redis-server", daemon.load.admissions)} us` +
      `, redis-benchmark allowed branch ${((rbA.cpuSeconds.redisServer * 1e6) / rbA.n).toFixed(1)} us; limiterd itself ${usPer(daemon.cpu, "limiterd", daemon.load.admissions)} us (its JIT compiler threads: ${jitShares(daemon.cpu, ["limiterd"])} of it)`,
  ];
}

function smtpReport(s: Settings, smtp: SmtpBenchResult): string[] {
  const smtpRuns = smtpRunsOf(smtp);
  return [
    table(
      `4. SMTP — ${s["smtp-clients"]} concurrent nodemailer clients (STARTTLS + AUTH), ${s["smtp-seconds"]} s each after ${s.warmup} s warm-up; ${s["smtp-orgs"]} orgs; limiterd on the embedded store`,
      ["run", "msgs/s", "vs POST", "accepted", "refused", "p50 ms", "p99 ms"],
      Object.entries(smtpRuns).map(([name, r]) => [
        name,
        fmt(r.perSecond, 1),
        ratio(r.perSecond, smtp.runs.post.perSecond),
        fmt(r.ok),
        fmt(Object.values(r.refused).reduce((a, n) => a + n, 0)),
        r.latencyMs.p50.toFixed(1),
        r.latencyMs.p99.toFixed(1),
      ]),
    ),
    table(
      `   latency, ${s["smtp-samples"]} messages one at a time (SMTP: a new session each, connect to 250)`,
      ["", "p50 ms", "p99 ms"],
      Object.entries({
        "SMTP session": smtp.latency.smtp,
        "direct POST": smtp.latency.post,
        "of which: connect to 220 greeting": smtp.latency.greeting,
        "added by SMTP (session - POST)": smtp.latency.added,
      }).map(([name, l]) => [name, l.p50.toFixed(1), l.p99.toFixed(1)]),
    ),
    cpuColumns("   CPU during the SMTP runs", {
      "per session": smtp.runs.session.cpu,
      pooled: smtp.runs.pooled.cpu,
      "direct POST": smtp.runs.post.cpu,
    }),
  ];
}

function smtpRunsOf(smtp: SmtpBenchResult): Record<string, SmtpRun> {
  return {
    "SMTP, one message per session": smtp.runs.session,
    "SMTP, pooled sessions": smtp.runs.pooled,
    "ceiling: direct POST /api/v1/emails": smtp.runs.post,
  };
}

/** Parts 6 and 7: each window, the medians, and B less A in each pair. */
function pairedReport(title: string, p: Awaited<ReturnType<typeof pairedFullPaths>>): string[] {
  const us = (x: number) => x.toFixed(1);
  const cols = (u: UsPerRequest) => [us(u.api), us(u.limiterd), us(u["redis-server"]), us(u["hot path"])];
  const [a, b] = p.medians as [(typeof p.medians)[number], (typeof p.medians)[number]];
  const perPair = (f: (x: (typeof p.pairs)[number]) => string) => p.pairs.map(f).join(", ");
  return [
    table(
      `${title}; ${p.orgs} orgs each; CPU us per request`,
      ["pair", "build", "200/s", "api", "limiterd", "redis-server", "hot path", "p99 ms", "others' CPU"],
      p.windows.map((w) => [
        w.pair + 1,
        w.variant,
        fmt(w.run.okPerSecond),
        ...cols(w.usPerRequest),
        w.run.latencyMs.p99.toFixed(2),
        // What the machine's other work took in the window: a pair where it differs much is noise.
        `${othersPct(w.cpu).toFixed(0)}%`,
      ]),
    ),
    table(
      "   medians of the windows",
      ["build", "200/s", "api", "limiterd", "redis-server", "hot path"],
      [
        [a.variant, fmt(a.okPerSecond), ...cols(a.usPerRequest)],
        [b.variant, fmt(b.okPerSecond), ...cols(b.usPerRequest)],
        [
          `${b.variant} / ${a.variant}`,
          ratio(b.okPerSecond, a.okPerSecond),
          ...([...HOT_PATH, "hot path"] as const).map((n) => ratio(b.usPerRequest[n], a.usPerRequest[n])),
        ],
      ],
    ),
    `   ${b.variant} less ${a.variant}, in each pair (us per request): ${([...HOT_PATH, "hot path"] as const)
      .map((n) => `${n} ${perPair((x) => us(x.diffUs[n]))} (median ${us(p.median.diffUs[n])})`)
      .join("; ")}`,
    `   the hot path's CPU per request, ${b.variant} over ${a.variant}: ${perPair((x) => `${(100 * x.hotPathShare).toFixed(1)}%`)} (median ${(100 * p.median.hotPathShare).toFixed(1)}%);` +
      ` throughput ${b.variant} / ${a.variant}: ${perPair((x) => x.throughputRatio.toFixed(3))} (median ${p.median.throughputRatio.toFixed(3)}); not-200 share at most ${pct(p.notOkShare)}`,
  ];
}

async function main(): Promise<number> {
  const s = parseFlags(process.argv.slice(2));
  const runs = (part: Part) => s.only.includes(part);
  installSignalHandlers();
  if (runs("http") || runs("plane") || runs("against")) ensureWrk();
  const k6 = runs("http") || runs("sends") ? ensureK6(log) : ""; // built before anything is measured, when missing
  const started = new Date();
  const machine = machineInfo();
  const vers = versions();
  const cores = machine.nproc || cpus().length;
  log(
    `mailcore bench — ${machine.nproc} cores, ${machine.cpuModel}; ${vers.bun ? `bun ${vers.bun}` : ""}, ${vers.redisServer}; parts: ${s.only.join(", ")}`,
  );

  // Each part's processes are stopped before the next starts: they would load the machine.
  const http = runs("http") ? await httpPart(s, cores, k6) : undefined;
  await cleanupAll();
  const daemon = runs("daemon") ? await daemonPart(s, cores) : undefined;
  await cleanupAll();
  const smtp = runs("smtp")
    ? await smtpBench(
        {
          duration: s["smtp-seconds"],
          concurrency: s["smtp-clients"],
          samples: s["smtp-samples"],
          orgs: s["smtp-orgs"],
          warmup: s.warmup,
        },
        log,
        (stop) => onExit("smtp-bench stack", stop),
      )
    : undefined;
  await cleanupAll();
  const plane = runs("plane") ? await planePart(s, cores) : undefined;
  await cleanupAll();
  const against = runs("against") && s.against ? await againstPart(s, cores, s.against) : undefined;
  await cleanupAll();
  const admission = runs("admission")
    ? await admissionBench(
        {
          warmup: s.warmup,
          duration: s.duration,
          rounds: s.pairs,
          connections: s.connections,
          threads: s.threads,
          ips: s.ips,
          orgs: s["admission-orgs"],
          against: s.against,
        },
        cores,
        log,
      )
    : undefined;
  await cleanupAll();
  const sends = runs("sends")
    ? await sendsBench(
        {
          warmup: s.warmup,
          duration: s.duration,
          rounds: s.pairs,
          clients: s["send-clients"],
          orgs: s["send-orgs"],
          latencySeconds: s["latency-seconds"],
          against: s.against,
        },
        cores,
        k6,
        log,
      )
    : undefined;
  await cleanupAll();

  const refusedShare = (r: SmtpRun) => Object.values(r.refused).reduce((a, n) => a + n, 0) / Math.max(1, r.ok);
  // Over 1% refused anywhere means quota (not capacity) bound a run: the figures do not hold.
  const valid = [
    ...(http ? [http.bare.run, http.peer.run, http.full.run].map(notOkShare) : []),
    ...(http?.latency.map((l) => l.result.notOkShare) ?? []),
    ...(smtp ? Object.values(smtpRunsOf(smtp)).map(refusedShare) : []),
    ...(plane ? [plane.notOkShare] : []),
    ...(against ? [against.notOkShare] : []),
    ...(admission ? [admission.notOkShare] : []),
    ...(sends ? [sends.notOkShare, ...Object.values(sends.latencyMedians).map((l) => l.notOkShare)] : []),
  ].every((x) => x <= MAX_NOT_OK);
  const mem: { process: string; during: string; m: Memory }[] = [
    ...Object.entries(http?.bare.memory ?? {}).map(([p, m]) => ({ process: p, during: "bare wrk run", m })),
    ...Object.entries(http?.peer.memory ?? {}).map(([p, m]) => ({ process: p, during: "peer wrk run", m })),
    ...Object.entries(http?.full.memory ?? {}).map(([p, m]) => ({ process: p, during: "full-path wrk run", m })),
    ...Object.entries(smtp?.memory ?? {}).map(([p, m]) => ({
      process: p === "smtp" ? p : `${p} (SMTP stack, embedded store)`,
      during: "pooled SMTP run",
      m,
    })),
  ];

  const p99AtHalf = (target: string) =>
    http?.latency.find((l) => l.target === target && l.load === 0.5)?.result.latencyMs.p99 ?? Number.NaN;
  const goalRows = goals({
    fullToBare: http && http.full.run.okPerSecond / http.bare.run.okPerSecond,
    fullToPeer: http && http.full.run.okPerSecond / http.peer.run.okPerSecond,
    daemonToRedisBenchmark: daemon && daemon.load.admissionsPerSecond / daemon.redisBenchmark.allowed.requestsPerSecond,
    p99AtHalf: http && { full: p99AtHalf("full path"), bare: p99AtHalf("bare Bun.serve") },
    planeCost: plane?.median.hotPathShare,
    admission: admission && {
      full: admission.closed.medians[admission.ours]!,
      peer: admission.closed.medians.peer!,
      bare: admission.closed.medians["bare Bun.serve"]!,
    },
    sends: sends && {
      ours: sends.closed.medians[sends.ours]!,
      peer: sends.closed.medians[sends.peer]!,
      p99: { ours: sends.latencyMedians[sends.ours]!.p99Ms, peer: sends.latencyMedians[sends.peer]!.p99Ms },
    },
  });
  const out: string[] = [
    ...(http ? httpReport(s, http, valid) : []),
    ...(daemon ? daemonReport(s, daemon, cores) : []),
    ...(smtp ? smtpReport(s, smtp) : []),
    ...(mem.length
      ? [
          table(
            "5. Memory — each process at the end of its load run",
            ["process", "sampled after", "RSS MiB", "peak (VmHWM) MiB"],
            mem.map(({ process, during, m }) => [process, during, m.rssMiB.toFixed(1), m.peakMiB.toFixed(1)]),
          ),
        ]
      : []),
    ...(plane
      ? pairedReport(
          `6. The internal plane — the full path with limiterd on h2c and on mutual TLS (certs init's certificates, EC P-256; the API with the front's), ${s.pairs} alternated pairs of ${s.duration} s windows after ${s.warmup} s warm-up each (wrk -t${s.threads} -c${s.connections})`,
          plane,
        )
      : []),
    ...(against
      ? pairedReport(
          `7. This checkout against ${s.against} — the full path of each on h2c, ${s.pairs} alternated pairs of ${s.duration} s windows after ${s.warmup} s warm-up each (wrk -t${s.threads} -c${s.connections})`,
          against,
        )
      : []),
    ...(admission ? admissionReport(s, admission) : []),
    ...(sends ? sendsReport(s, sends) : []),
    table(
      "Performance goals (this run)",
      ["goal", "target", "stretch", "measured", ""],
      goalRows.map((g) => [g.goal, g.target, g.stretch ?? "", g.measured, g.verdict]),
    ),
    `\nmachine: ${machine.nproc} cores, ${machine.cpuModel}, ${machine.memoryGiB} GiB, Linux ${machine.kernel}`,
    `versions: bun ${vers.bun}; ${vers.redisServer}; ${vers.redisBenchmark}; ${vers.wrk}; ${vers.k6}; rate-limiter-flexible ${vers.rateLimiterFlexible}`,
  ];
  if (http?.adminCliFailures.length)
    out.push(
      `admin CLI failures while creating organizations (retried): ${http.adminCliFailures.length}, e.g. ${http.adminCliFailures[0]}`,
    );
  const warnings = {
    api: http?.apiWarnings.count ?? 0,
    "limiterd (http)": http?.limiterdWarnings.count ?? 0,
    "limiterd (daemon)": daemon?.limiterdWarnings.count ?? 0,
    ...plane?.logWarnings,
    ...against?.logWarnings,
  };
  const warned = Object.entries(warnings).filter(([, n]) => n > 0);
  if (warned.length) out.push(`log warnings: ${warned.map(([k, n]) => `${k} ${n}`).join(", ")}`);

  const dir = join(REPO_ROOT, "loadtest", "results");
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `bench-${started.toISOString().replace(/[:.]/g, "-")}.json`);
  const strip = (r: { warm: WrkResult; run: WrkResult; cpu: CpuReport; memory: Record<string, Memory> }) => ({
    ...r,
    warm: { ...r.warm, text: r.warm.text.trim().split("\n") },
    run: { ...r.run, text: r.run.text.trim().split("\n") },
  });
  const json = {
    startedAt: started.toISOString(),
    finishedAt: new Date().toISOString(),
    command: `bun run loadtest/bench.ts ${process.argv.slice(2).join(" ")}`.trim(),
    settings: s,
    machine,
    versions: vers,
    valid,
    http: http && {
      ...http,
      bare: strip(http.bare),
      peer: strip(http.peer),
      full: strip(http.full),
      ratioFullToBare: http.full.run.okPerSecond / http.bare.run.okPerSecond,
      ratioFullToPeer: http.full.run.okPerSecond / http.peer.run.okPerSecond,
      ratioPeerToBare: http.peer.run.okPerSecond / http.bare.run.okPerSecond,
      notOkShare: { full: notOkShare(http.full.run), bare: notOkShare(http.bare.run), peer: notOkShare(http.peer.run) },
    },
    daemon: daemon && {
      ...daemon,
      ratioDaemonToRedisBenchmark: daemon.load.admissionsPerSecond / daemon.redisBenchmark.allowed.requestsPerSecond,
      ratioDaemonToRedisBenchmarkProductionArgv:
        daemon.load.admissionsPerSecond / daemon.redisBenchmark.production.requestsPerSecond,
    },
    smtp: smtp && {
      ...smtp,
      ratioSessionToPost: smtp.runs.session.perSecond / smtp.runs.post.perSecond,
      ratioPooledToPost: smtp.runs.pooled.perSecond / smtp.runs.post.perSecond,
    },
    plane,
    against,
    admission,
    sends,
    memory: mem,
    goals: goalRows,
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
