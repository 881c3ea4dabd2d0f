// redis-benchmark running the daemon's own admission script (internal/hotstore/redis/admit.lua
// with its prelude) with EVALSHA, a batch of one admission each, keys and ARGV laid out as RedisHot lays them out.
import { spawn, spawnSync } from "bun";
import { IP_PERIOD_MS, IP_QUOTA, MINIMUM_PLAN, ORG_PERIOD_MS, PLANS, planQuota } from "../internal/plans/plans";
import { keys, script } from "../internal/hotstore/redis/layout";
import { cpuSeconds } from "../internal/testkit/machine";
import { exitedCpuSeconds, onExit, sh } from "./procs";

export async function redisCli(port: number, ...args: string[]): Promise<string> {
  const r = await sh(["redis-cli", "-h", "127.0.0.1", "-p", String(port), ...args], 15_000);
  if (r.code !== 0) throw new Error(`redis-cli ${args[0]}: ${r.stderr || r.stdout}`);
  return r.stdout.trim();
}

export async function redisPid(port: number): Promise<number> {
  const info = await redisCli(port, "INFO", "server");
  const m = /process_id:(\d+)/.exec(info);
  if (!m) throw new Error("INFO server has no process_id");
  return Number(m[1]);
}

export function redisBenchmarkVersion(): string {
  return spawnSync(["redis-benchmark", "--version"]).stdout.toString().trim();
}

/** SCRIPT LOAD of the admission script as the daemon runs it; checks that the server's sha is its sha1. */
export async function loadAdmitScript(port: number): Promise<string> {
  const lua = script("admit");
  const sha = await redisCli(port, "SCRIPT", "LOAD", lua);
  const expected = new Bun.CryptoHasher("sha1").update(lua).digest("hex");
  if (sha !== expected) throw new Error(`SCRIPT LOAD answered ${sha}, the file's sha1 is ${expected}`);
  return sha;
}

export interface AdmitArgs {
  ip: string;
  tokenHash: string;
  orgId: string;
  nowMs: number;
  /** Overrides of the IP quota and of every plan's quota (to keep the bucket from emptying). */
  ipQuota?: number;
  planQuota?: number;
}

/** numkeys, KEYS and ARGV of a batch of one admission with a valid token, as RedisHot builds them. */
export function admitArgs(a: AdmitArgs): string[] {
  const quotas = PLANS.map((p) => a.planQuota ?? planQuota(p));
  return [
    "4",
    keys.ipBucket(a.ip),
    keys.token(a.tokenHash),
    keys.org(a.orgId),
    keys.orgBucket(a.orgId),
    String(a.nowMs),
    String(a.ipQuota ?? IP_QUOTA),
    String(IP_PERIOD_MS),
    String(ORG_PERIOD_MS),
    ...quotas.map(String),
    String(planQuota(MINIMUM_PLAN)),
    a.orgId,
  ];
}

export interface RedisBenchResult {
  n: number;
  requestsPerSecond: number;
  latencyMs: { avg: number; p50: number; p95: number; p99: number; max: number };
  seconds: number;
  cpuSeconds: { redisBenchmark: number; redisServer: number };
  command: string;
}

export async function runRedisBenchmark(
  port: number,
  command: string[],
  o: { n: number; pipeline: number; clients: number; serverPid: number },
): Promise<RedisBenchResult> {
  const cmd = [
    "redis-benchmark",
    "-h",
    "127.0.0.1",
    "-p",
    String(port),
    "-P",
    String(o.pipeline),
    "-c",
    String(o.clients),
    "-n",
    String(o.n),
    "--csv",
    ...command,
  ];
  const server0 = cpuSeconds(o.serverPid) ?? 0;
  const t0 = performance.now();
  const p = spawn(cmd, { stdout: "pipe", stderr: "pipe", stdin: "ignore" });
  onExit("redis-benchmark", () => p.kill("SIGKILL"));
  const timer = setTimeout(() => p.kill("SIGKILL"), 120_000);
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  clearTimeout(timer);
  const seconds = (performance.now() - t0) / 1000;
  const serverCpu = (cpuSeconds(o.serverPid) ?? server0) - server0;
  const row = out.trim().split("\n").pop() ?? "";
  const cells = row.replace(/^"|"$/g, "").split('","');
  if (code !== 0 || cells.length < 8 || !Number.isFinite(Number(cells[1])))
    throw new Error(`redis-benchmark exited ${code}: ${out}\n${err}`);
  const [, rps, avg, , p50, p95, p99, max] = cells.map(Number);
  return {
    n: o.n,
    requestsPerSecond: rps!,
    latencyMs: { avg: avg!, p50: p50!, p95: p95!, p99: p99!, max: max! },
    seconds,
    cpuSeconds: { redisBenchmark: exitedCpuSeconds(p), redisServer: serverCpu },
    command: cmd.map((c) => (/[\s{}"]/.test(c) ? `'${c}'` : c)).join(" "),
  };
}
