// Bookkeeping for the benchmark: everything it starts is registered here and stopped on
// exit (normal, error or signal); CPU time of processes is read from /proc.
import { spawn, spawnSync } from "bun";
import { readdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { withAllocatorEnv } from "../internal/config/allocator";
import { limiterCredential } from "../internal/config/config";
import { startPostgres } from "../internal/testkit/postgres";
import { cpuSeconds, machineTicks, statFields, statSeconds } from "../internal/testkit/machine";
import { freePort, type Proc, startRedis, tempDir, waitFor } from "../internal/testkit/testkit";

type Cleanup = () => unknown;
const cleanups: { what: string; run: Cleanup }[] = [];
let cleaning: Promise<void> | undefined;

/** Registers something to undo on exit; undone in reverse order. */
export function onExit(what: string, run: Cleanup): void {
  cleanups.push({ what, run });
}

const tracked: { what: string; p: Proc }[] = [];

export function trackProc(what: string, p: Proc): Proc {
  tracked.push({ what, p });
  onExit(what, () => p.stop("SIGKILL"));
  return p;
}

/** The state and last stderr lines of every process started, for an error report. */
export function procDiagnostics(lines = 15): string {
  return tracked
    .map(({ what, p }) => {
      const state =
        p.proc.exitCode !== null || p.proc.signalCode !== null
          ? `exited ${p.proc.exitCode ?? p.proc.signalCode}`
          : "running";
      const tail = p.stderr().trimEnd().split("\n").slice(-lines).join("\n  ");
      return `--- ${what} (pid ${p.proc.pid}, ${state}) stderr:\n  ${tail}`;
    })
    .join("\n");
}

export function trackDir(dir: string): string {
  onExit(`rm ${dir}`, () => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

/** Direct children of this process still alive, by pid (a safety net for leaked ones). */
function children(): number[] {
  const out: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    const fields = statFields(`/proc/${name}/stat`); // undefined: gone meanwhile
    if (fields && Number(fields[1]) === process.pid && fields[0] !== "Z") out.push(Number(name));
  }
  return out;
}

/** Undoes everything registered so far (may be called again for what is registered later). */
export function cleanupAll(): Promise<void> {
  cleaning ??= (async () => {
    for (const c of cleanups.splice(0).reverse()) {
      try {
        await Promise.race([Promise.resolve(c.run()), Bun.sleep(5_000)]);
      } catch (err) {
        console.error(`bench: cleanup "${c.what}" failed: ${(err as Error).message}`);
      }
    }
    for (const pid of children()) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // already gone
      }
    }
  })().finally(() => {
    cleaning = undefined;
  });
  return cleaning;
}

export function installSignalHandlers(): void {
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
    process.on(signal, async () => {
      console.error(`bench: ${signal}; stopping everything it started`);
      await cleanupAll();
      process.exit(130);
    });
  }
}

/** Waits for a load generator to exit and returns its one "BENCH_JSON {...}" line, parsed. */
export async function benchJson<T>(what: string, p: Proc): Promise<T> {
  const code = await p.proc.exited;
  await p.drained;
  const line = p
    .stdout()
    .split("\n")
    .find((l) => l.startsWith("BENCH_JSON "));
  if (code !== 0 || !line) throw new Error(`${what} exited ${code}: ${p.stderr()}`);
  return JSON.parse(line.slice("BENCH_JSON ".length)) as T;
}

/** Runs a command to completion, bounded in time; returns its output. */
export async function sh(cmd: string[], timeoutMs = 60_000): Promise<{ code: number; stdout: string; stderr: string }> {
  const p = spawn(cmd, { stdout: "pipe", stderr: "pipe", stdin: "ignore" });
  const timer = setTimeout(() => p.kill("SIGKILL"), timeoutMs);
  const [stdout, stderr, code] = await Promise.all([
    new Response(p.stdout).text(),
    new Response(p.stderr).text(),
    p.exited,
  ]);
  clearTimeout(timer);
  return { code, stdout, stderr };
}

export function has(cmd: string): boolean {
  return spawnSync(["sh", "-c", `command -v ${cmd}`]).exitCode === 0;
}

// ---- CPU accounting ---------------------------------------------------------------

/**
 * utime+stime of a Bun process's JIT compiler threads (JavaScriptCore's "JITWorker"), in
 * seconds: what is still being compiled shows whether a run measured a warmed-up process.
 */
function jitSeconds(pid: number): number {
  let sum = 0;
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      const task = `/proc/${pid}/task/${tid}`;
      try {
        if (readFileSync(`${task}/comm`, "utf8").startsWith("JITWorker")) sum += statSeconds(`${task}/stat`) ?? 0;
      } catch {
        // the thread ended
      }
    }
  } catch {
    // the process ended
  }
  return sum;
}

/**
 * utime+stime of each thread of a process, in seconds, summed by the thread's name (its comm,
 * without a trailing number): the thread that runs JavaScript (its tid is the pid) as "main";
 * empty once the process is gone.
 */
export function threadSeconds(pid: number): Record<string, number> {
  const out: Record<string, number> = {};
  let tids: string[] = [];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out; // the process ended
  }
  for (const tid of tids) {
    const task = `/proc/${pid}/task/${tid}`;
    try {
      const name =
        tid === String(pid)
          ? "main"
          : readFileSync(`${task}/comm`, "utf8")
              .trim()
              .replace(/[\s\d]+$/, "");
      out[name] = (out[name] ?? 0) + (statSeconds(`${task}/stat`) ?? 0);
    } catch {
      // the thread ended
    }
  }
  return out;
}

export interface CpuShare {
  /** CPU seconds used in the window. */
  cpuSeconds: number;
  /** Percent of one core. */
  pctOfCore: number;
  /** Percent of the whole machine (all cores). */
  pctOfMachine: number;
  /** Of cpuSeconds, what its JIT compiler threads used (processes watched by pid). */
  jitSeconds?: number;
}

export interface CpuReport {
  wallSeconds: number;
  cores: number;
  processes: Record<string, CpuShare>;
  /** Machine-wide busy share, every process included. */
  machineBusyPct: number;
}

/**
 * Starts a CPU window over named pids; the returned function closes it. `measured` adds
 * CPU seconds taken elsewhere (a process that ran exactly the window and has exited).
 */
export function cpuWindow(
  pids: Record<string, number>,
  cores: number,
): (measured?: Record<string, number>) => CpuReport {
  const t0 = performance.now();
  const m0 = machineTicks();
  const start = Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, cpuSeconds(pid) ?? 0]));
  const jitStart = Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, jitSeconds(pid)]));
  return (measured = {}) => {
    const wall = (performance.now() - t0) / 1000;
    const m1 = machineTicks();
    const used: Record<string, number> = {};
    for (const [k, pid] of Object.entries(pids)) used[k] = (cpuSeconds(pid) ?? start[k]!) - start[k]!;
    const jit = Object.fromEntries(
      Object.entries(pids).map(([k, pid]) => [k, Math.max(0, jitSeconds(pid) - jitStart[k]!)]),
    );
    Object.assign(used, measured);
    const processes: Record<string, CpuShare> = {};
    for (const [k, s] of Object.entries(used)) {
      processes[k] = {
        cpuSeconds: round(s, 2),
        pctOfCore: round((100 * s) / wall, 1),
        pctOfMachine: round((100 * s) / wall / cores, 1),
      };
      if (k in jit && !(k in measured)) processes[k].jitSeconds = round(jit[k]!, 2);
    }
    const busyPct = m1.total > m0.total ? (100 * (m1.busy - m0.busy)) / (m1.total - m0.total) : 0;
    return { wallSeconds: round(wall, 2), cores, processes, machineBusyPct: round(busyPct, 1) };
  };
}

/** Adds a process measured on its own (e.g. one that reports its CPU itself) to a report. */
export function addShare(r: CpuReport, name: string, seconds: number): void {
  r.processes[name] = {
    cpuSeconds: round(seconds, 2),
    pctOfCore: round((100 * seconds) / r.wallSeconds, 1),
    pctOfMachine: round((100 * seconds) / r.wallSeconds / r.cores, 1),
  };
}

/** CPU seconds of an exited Bun subprocess. */
export function exitedCpuSeconds(p: { resourceUsage(): { cpuTime: { total: bigint } } | undefined }): number {
  const usage = p.resourceUsage();
  return usage ? Number(usage.cpuTime.total) / 1e6 : 0;
}

// ---- memory -----------------------------------------------------------------------

export interface Memory {
  /** Resident now (VmRSS), MiB. */
  rssMiB: number;
  /** Resident at its peak so far (VmHWM), MiB. */
  peakMiB: number;
}

/** Resident memory of named processes, read from /proc/<pid>/status; a gone process is left out. */
export function memory(pids: Record<string, number>): Record<string, Memory> {
  const out: Record<string, Memory> = {};
  for (const [name, pid] of Object.entries(pids)) {
    try {
      const status = readFileSync(`/proc/${pid}/status`, "utf8");
      const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? Number.NaN);
      out[name] = { rssMiB: round(kib("VmRSS") / 1024, 1), peakMiB: round(kib("VmHWM") / 1024, 1) };
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

export function round(x: number, digits = 0): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

/** `bun run <entry>` from root, its log lines to a file under logs; killed on exit. */
export function startLogged(root: string, logs: string, name: string, entry: string, env: Record<string, string>) {
  const p = spawn([process.execPath, "run", entry], {
    cwd: root,
    env: withAllocatorEnv({ ...process.env, ...env }),
    stdout: "ignore",
    stderr: Bun.file(join(logs, `${name}-${Date.now()}.log`)),
  });
  onExit(name, () => p.kill("SIGKILL"));
  return p;
}

/** limiterd and one API process on free ports, on the store that storeEnv names; returns once the API is ready. */
export async function startLimiterAndApi(
  root: string,
  logs: string,
  storeEnv: Record<string, string>,
  apiEnv: Record<string, string>,
) {
  const limiterPort = await freePort();
  const apiPort = await freePort();
  const limiterUrl = `http://127.0.0.1:${limiterPort}`;
  const api = `http://127.0.0.1:${apiPort}`;
  const limiterd = startLogged(root, logs, "limiterd", "cmd/limiterd/index.ts", {
    ...storeEnv,
    LIMITER_PORT: String(limiterPort),
    LIMITER_URL: limiterUrl,
  });
  const apiProc = startLogged(root, logs, "api", "cmd/api/index.ts", {
    ...storeEnv,
    ...apiEnv,
    API_PORT: String(apiPort),
    LIMITER_URL: limiterUrl,
  });
  await waitFor("the API", async () => (await fetch(`${api}/readyz`)).ok, 30_000);
  // The plane secret limiterd made in the store's DATA_DIR, for the caller's own clients.
  const credential = limiterCredential({ ...storeEnv, LIMITER_URL: limiterUrl });
  return { limiterUrl, api, limiterd, apiProc, credential };
}

/** A redis-server and a PostgreSQL database of their own (stopped on exit), and the environment that puts limiterd on them. */
export async function startRedisAndPostgres(dataDirPrefix: string) {
  const [redis, pg] = await Promise.all([startRedis(), startPostgres()]);
  onExit("redis-server", () => redis.stop());
  onExit("postgres", () => pg.stop());
  const url = await pg.newDatabase();
  return { url, env: { DATA_DIR: tempDir(dataDirPrefix), REDIS_URL: redis.url, DATABASE_URL: url } };
}
