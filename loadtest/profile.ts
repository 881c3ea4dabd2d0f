// Where the CPU of the two hot paths goes, per request (npm run profile):
//
//   admission: GET /api/v1/tags through api, limiterd and Redis (wrk -t2 -c64, rotate.lua, as
//              the benchmark's full path), on a Redis without persistence;
//   sends:     POST /api/v1/emails (wrk -t2 -c32, send.lua: 32 clients, a send of 200 bytes of
//              text each to a recipient of its own), on Redis with appendfsync always and the
//              records in SQLite.
//
// Each path on a stack of its own (redis-server, limiterd, api), started fresh with Bun's CPU
// profiler on (--cpu-prof) in limiterd and the API; a warm-up, then a measured window in which
// this reads each process's CPU from /proc (by thread), and Redis's INFO commandstats. At the
// end limiterd and the API stop on SIGTERM and write their profiles, which are cut to the
// measured windows. The profiler costs CPU of its own: the per-process figures here are for
// reading the shares; the benchmark (npm run bench) measures without it.
//
//   bun run loadtest/profile.ts [--only admission|sends] [--root DIR] [--seconds N] [--warmup N] [--interval US] [--top N]
//
// --root DIR profiles another checkout's limiterd and API (an older commit's worktree): the
// same load, for a before and after.
//
// Writes loadtest/results/profile-<time>/ (the profiles, summary.md, summary.json) and prints
// summary.md.
import { spawnSync } from "bun";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { join, resolve } from "node:path";
import { REPO_ROOT, startRedis } from "../internal/testkit/testkit";
import { enterpriseSenders, startFullPath } from "./fullpath";
import { readProfile, summarizeWindow, type WindowSummary } from "./cpuprofile";
import {
  cleanupAll,
  type CpuReport,
  cpuWindow,
  installSignalHandlers,
  onExit,
  procDiagnostics,
  threadSeconds,
} from "./procs";
import { type CodeKind, perfWindow } from "./perfsplit";
import { redisCli, redisPid } from "./redisbench";
import { fmt } from "./report";
import { ensureWrk, runWrk, type WrkResult } from "./wrk";

const PATHS = ["admission", "sends"] as const;
type PathName = (typeof PATHS)[number];

const DEFAULTS = { seconds: 10, warmup: 15, interval: 1000, top: 25, orgs: 600 };
type Settings = typeof DEFAULTS & { only: PathName[]; root: string };

function parseFlags(argv: string[]): Settings {
  const s: Settings = { ...DEFAULTS, only: [...PATHS], root: REPO_ROOT };
  for (let i = 0; i < argv.length; i += 2) {
    const flag = argv[i]!.replace(/^--/, "");
    const arg = argv[i + 1] ?? "";
    if (flag === "only") {
      const parts = arg.split(",");
      if (!parts.every((p) => (PATHS as readonly string[]).includes(p)))
        throw new Error(`--only takes ${PATHS.join(", ")} (comma-separated)`);
      s.only = parts as PathName[];
    } else if (flag === "root") {
      if (!existsSync(join(arg, "cmd/api/index.ts")))
        throw new Error(`--root: ${arg} is not a checkout of this project`);
      s.root = resolve(arg);
    } else if (flag in DEFAULTS && Number(arg) > 0) s[flag as keyof typeof DEFAULTS] = Number(arg);
    else
      throw new Error(
        `usage: bun run loadtest/profile.ts [--only ${PATHS.join("|")}] [--root DIR] ${Object.keys(DEFAULTS)
          .map((k) => `[--${k} N]`)
          .join(" ")}`,
      );
  }
  return s;
}

const log = (msg: string) => console.log(`[${new Date().toISOString().slice(11, 19)}] ${msg}`);

/** One path's load: wrk's script, connections, and the answer that counts as served. */
const LOADS: Record<
  PathName,
  { title: string; path: string; script: "rotate" | "send"; connections: number; aof: boolean }
> = {
  admission: {
    title: "admission: GET /api/v1/tags",
    path: "/api/v1/tags",
    script: "rotate",
    connections: 64,
    aof: false,
  },
  sends: {
    title: "sends: POST /api/v1/emails",
    path: "/api/v1/emails",
    script: "send",
    connections: 32,
    aof: true,
  },
};

/** redis-server, limiterd and the API, the two Bun processes with the CPU profiler on, writing into dir. */
async function profiledStack(name: PathName, dir: string, s: Settings) {
  const redis = await startRedis({ aof: LOADS[name].aof });
  onExit(`redis-server (${name})`, () => redis.stop());
  const profiler = (process: string) => ({
    BUN_OPTIONS: `--cpu-prof --cpu-prof-dir=${dir} --cpu-prof-name=${process}-${name}.cpuprofile --cpu-prof-interval=${s.interval}`,
  });
  const {
    url: apiUrl,
    dataDir,
    clients,
    api,
    limiterd,
  } = await startFullPath({
    name,
    root: s.root,
    redisUrl: redis.url,
    env: profiler,
  });
  const made = (await enterpriseSenders(clients, name, s.orgs)).map((o) => `${o.token} ${o.domain}`);
  const tokensFile = join(dataDir, "tokens.txt");
  writeFileSync(
    tokensFile,
    `${made.map((line) => (LOADS[name].script === "send" ? line : line.split(" ")[0])).join("\n")}\n`,
  );
  return {
    apiUrl,
    tokensFile,
    redisPort: redis.port,
    pids: { api: api.proc.pid, limiterd: limiterd.proc.pid, "redis-server": await redisPid(redis.port) },
    stop: async () => {
      // SIGTERM: each exits through its graceful stop, and Bun writes the profile at exit.
      await Promise.all([api.stop("SIGTERM"), limiterd.stop("SIGTERM")]);
    },
  };
}

interface CommandStat {
  calls: number;
  usec: number;
}

/** INFO commandstats: calls and microseconds by command. */
async function commandStats(port: number): Promise<Record<string, CommandStat>> {
  const out: Record<string, CommandStat> = {};
  for (const m of (await redisCli(port, "INFO", "commandstats")).matchAll(/^cmdstat_(\S+):calls=(\d+),usec=(\d+)/gm))
    out[m[1]!] = { calls: Number(m[2]), usec: Number(m[3]) };
  return out;
}

interface Measured {
  name: PathName;
  run: WrkResult;
  cpu: CpuReport;
  /** Seconds by thread name, api and limiterd. */
  threads: Record<"api" | "limiterd", Record<string, number>>;
  redis: Record<string, CommandStat>;
  /** The window, epoch microseconds. */
  fromUs: number;
  toUs: number;
  profiles: Partial<Record<"api" | "limiterd", WindowSummary>>;
  /** CPU seconds of each process by kind of code, from perf (when it is installed). */
  code?: Record<string, Partial<Record<CodeKind, number>>>;
}

async function measurePath(name: PathName, dir: string, s: Settings, cores: number): Promise<Measured> {
  const load = LOADS[name];
  log(`${name}: starting redis-server${load.aof ? " (appendfsync always)" : ""}, limiterd and the API, profiled`);
  const st = await profiledStack(name, dir, s);
  const wrk = (seconds: number) => ({
    url: `${st.apiUrl}${load.path}`,
    threads: 2,
    connections: load.connections,
    seconds,
    tokensFile: st.tokensFile,
    ips: 4096,
    script: load.script,
  });
  log(`${name}: wrk -c${load.connections}, ${s.warmup} s warm-up`);
  await runWrk(wrk(s.warmup));
  await redisCli(st.redisPort, "CONFIG", "RESETSTAT");
  log(`${name}: measured window, ${s.seconds} s`);
  let close: ((m?: Record<string, number>) => CpuReport) | undefined;
  let closePerf: ReturnType<typeof perfWindow>;
  let fromUs = 0;
  const threads0 = { api: {}, limiterd: {} } as Measured["threads"];
  const run = await runWrk({
    ...wrk(s.seconds),
    started: () => {
      fromUs = Date.now() * 1000;
      close = cpuWindow(st.pids, cores);
      closePerf = perfWindow(st.pids, join(dir, `${name}.perf.data`));
      threads0.api = threadSeconds(st.pids.api);
      threads0.limiterd = threadSeconds(st.pids.limiterd);
    },
  });
  const toUs = Date.now() * 1000;
  const cpu = close!({ wrk: run.cpuSeconds });
  const code = await closePerf?.();
  const diff = (a: Record<string, number>, b: Record<string, number>) =>
    Object.fromEntries(Object.entries(b).map(([k, v]) => [k, v - (a[k] ?? 0)]));
  const threads = {
    api: diff(threads0.api, threadSeconds(st.pids.api)),
    limiterd: diff(threads0.limiterd, threadSeconds(st.pids.limiterd)),
  };
  const redis = await commandStats(st.redisPort);
  log(`${name}: ${fmt(run.okPerSecond)} served/s; stopping limiterd and the API (they write their profiles)`);
  await st.stop();
  const profiles: Measured["profiles"] = {};
  for (const proc of ["api", "limiterd"] as const) {
    try {
      profiles[proc] = summarizeWindow(
        readProfile(join(dir, `${proc}-${name}.cpuprofile`)),
        fromUs,
        toUs,
        s.interval,
        s.root,
      );
    } catch (err) {
      log(`${name}: no profile of ${proc}: ${(err as Error).message}`);
    }
  }
  return { name, run, cpu, threads, redis, fromUs, toUs, profiles, code };
}

const us = (seconds: number, requests: number) => (seconds * 1e6) / Math.max(1, requests);

function report(m: Measured, s: Settings): string[] {
  const n = m.run.ok;
  const load = LOADS[m.name];
  const out: string[] = [
    `## ${load.title}`,
    "",
    `wrk -t2 -c${load.connections}, ${s.seconds} s after ${s.warmup} s of the same load: ${fmt(m.run.okPerSecond)} served a second (${fmt(n)}; statuses ${JSON.stringify(m.run.statuses)}), p50 ${m.run.latencyMs.p50} ms, p99 ${m.run.latencyMs.p99} ms; the machine ${m.cpu.machineBusyPct}% busy. CPU microseconds per served request (the profiler on):`,
    "",
  ];
  const names = ["api", "limiterd", "redis-server", "wrk"];
  out.push(
    "| process | µs per request | of which |",
    "|---|---|---|",
    ...names.map((p) => {
      const total = us(m.cpu.processes[p]?.cpuSeconds ?? 0, n);
      const threads = m.threads[p as "api" | "limiterd"];
      const parts = threads
        ? Object.entries(threads)
            .filter(([, v]) => us(v, n) >= 0.1)
            .sort((a, b) => b[1] - a[1])
            .map(([t, v]) => `${t} ${us(v, n).toFixed(1)}`)
            .join(", ")
        : "";
      return `| ${p} | ${total.toFixed(1)} | ${parts} |`;
    }),
    "",
  );
  if (m.code) {
    const kinds: CodeKind[] = ["JIT-compiled JavaScript", "runtime (native)", "libc and allocator", "kernel"];
    out.push(
      "By kind of code (Linux perf, cpu-clock: only while a thread runs), µs per request:",
      "",
      `| process | ${kinds.join(" | ")} |`,
      `|---|${kinds.map(() => "---|").join("")}`,
      ...Object.entries(m.code).map(
        ([p, k]) => `| ${p} | ${kinds.map((kind) => us(k[kind] ?? 0, n).toFixed(1)).join(" | ")} |`,
      ),
      "",
    );
  }
  for (const proc of ["api", "limiterd"] as const) {
    const p = m.profiles[proc];
    if (!p) continue;
    const perReq = (samples: number) => (samples * p.intervalUs) / Math.max(1, n);
    out.push(
      `### ${proc}: the main thread's JavaScript (${fmt(p.samples)} samples of ${p.intervalUs} µs, ${perReq(p.samples).toFixed(1)} µs per request)`,
      "",
      "| area | µs per request | share |",
      "|---|---|---|",
      ...Object.entries(p.areas)
        .sort((a, b) => b[1] - a[1])
        .slice(0, 15)
        .map(([a, c]) => `| ${a} | ${perReq(c).toFixed(1)} | ${((100 * c) / p.samples).toFixed(1)}% |`),
      "",
      "| function (self) | where | self µs/req | total µs/req |",
      "|---|---|---|---|",
      ...[...p.functions]
        .sort((a, b) => b.self - a.self)
        .slice(0, s.top)
        .map((f) => `| ${f.name} | ${f.where} | ${perReq(f.self).toFixed(1)} | ${perReq(f.total).toFixed(1)} |`),
      "",
      "| function (total, ours) | where | total µs/req | self µs/req |",
      "|---|---|---|---|",
      ...[...p.functions]
        .filter((f) => /^(internal|cmd)\//.test(f.where))
        .sort((a, b) => b.total - a.total)
        .slice(0, s.top)
        .map((f) => `| ${f.name} | ${f.where} | ${perReq(f.total).toFixed(1)} | ${perReq(f.self).toFixed(1)} |`),
      "",
    );
  }
  const cmds = Object.entries(m.redis).sort((a, b) => b[1].usec - a[1].usec);
  out.push(
    `### Redis: commands (INFO commandstats over the window; the process: ${us(m.cpu.processes["redis-server"]?.cpuSeconds ?? 0, n).toFixed(1)} µs per request)`,
    "",
    "| command | calls per request | µs per call | µs per request |",
    "|---|---|---|---|",
    ...cmds.map(
      ([c, v]) =>
        `| ${c} | ${(v.calls / Math.max(1, n)).toFixed(3)} | ${(v.usec / Math.max(1, v.calls)).toFixed(1)} | ${(v.usec / Math.max(1, n)).toFixed(2)} |`,
    ),
    "",
  );
  return out;
}

async function main() {
  const s = parseFlags(process.argv.slice(2));
  installSignalHandlers();
  ensureWrk();
  const cores = cpus().length;
  const dir = join(REPO_ROOT, "loadtest", "results", `profile-${new Date().toISOString().replace(/[:.]/g, "-")}`);
  mkdirSync(dir, { recursive: true });
  const measured: Measured[] = [];
  for (const name of s.only) {
    measured.push(await measurePath(name, dir, s, cores));
    await cleanupAll();
  }
  const md = [
    `# Profile of the hot paths (${new Date().toISOString().slice(0, 16)}Z)`,
    "",
    `${cores} cores; Bun's sampling profiler every ${s.interval} µs on the main thread of api and limiterd; \`npm run profile\` (loadtest/profile.ts), the limiterd and API of ${s.root} at ${spawnSync(["git", "-C", s.root, "rev-parse", "--short", "HEAD"]).stdout.toString().trim()}.`,
    "",
    ...measured.flatMap((m) => report(m, s)),
  ].join("\n");
  writeFileSync(join(dir, "summary.md"), md);
  writeFileSync(
    join(dir, "summary.json"),
    `${JSON.stringify(
      measured.map((m) => ({ ...m, run: { ...m.run, text: undefined } })),
      null,
      2,
    )}\n`,
  );
  console.log(md);
  console.log(`\nprofiles and summary: ${dir}`);
}

let code = 0;
try {
  await main();
} catch (err) {
  code = 1;
  console.error(`profile: ${(err as Error).stack ?? err}\n${procDiagnostics()}`);
} finally {
  await cleanupAll();
}
process.exit(code);
