// Runs wrk with loadtest/rotate.lua (GETs) or loadtest/send.lua (sends), each behind
// loadtest/wrk-common.lua (wrk takes one script), and reads the one JSON line it prints.
import { spawn, spawnSync } from "bun";
import { readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { exitedCpuSeconds, has, onExit } from "./procs";

const SCRIPTS = { rotate: "rotate.lua", send: "send.lua" };

/** The script wrk runs: wrk-common.lua and then the named one, in one file under the temp directory. */
function scriptFile(name: keyof typeof SCRIPTS): string {
  const read = (file: string) => readFileSync(join(import.meta.dir, file), "utf8");
  const path = join(tmpdir(), `mailcore-wrk-${process.pid}-${name}.lua`);
  writeFileSync(path, `${read("wrk-common.lua")}\n${read(SCRIPTS[name])}`);
  return path;
}
export const WRK_INSTALL = "apt-get install -y wrk";

/** Makes sure wrk is there: installs it when root, else stops with the install line. */
export function ensureWrk(): void {
  if (has("wrk")) return;
  if (process.getuid?.() === 0 && has("apt-get")) {
    console.log(`wrk is missing; installing it: ${WRK_INSTALL}`);
    const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
    const install = () =>
      spawnSync(["apt-get", "install", "-y", "-qq", "wrk"], { stdout: "inherit", stderr: "inherit", env }).exitCode;
    if (install() !== 0) {
      spawnSync(["apt-get", "update", "-qq"], { stdout: "inherit", stderr: "inherit", env });
      install();
    }
  }
  if (!has("wrk"))
    throw new Error(`the benchmark needs wrk, which is not installed. Install it with:\n  sudo ${WRK_INSTALL}`);
}

export function wrkVersion(): string {
  // `wrk -v` prints its version line and exits non-zero.
  const out = spawnSync(["wrk", "-v"]).stdout.toString();
  return out.split("\n")[0]?.trim() ?? "unknown";
}

export interface WrkOptions {
  url: string;
  threads: number;
  connections: number;
  seconds: number;
  /** One token a line (rotate.lua), or "<token> <sending domain>" a line (send.lua). */
  tokensFile: string;
  ips: number;
  /** rotate.lua (the default): GET of the URL with each request's token and client IP; send.lua: a send each. */
  script?: keyof typeof SCRIPTS;
  /** Called with wrk's pid right after it started. */
  started?: (pid: number) => void;
}

export interface WrkResult {
  requests: number;
  seconds: number;
  statuses: Record<string, number>;
  errors: { connect: number; read: number; write: number; status: number; timeout: number };
  /** Answers with a 2xx status (200 for GETs, 202 for sends). */
  ok: number;
  notOk: number;
  okPerSecond: number;
  latencyMs: { mean: number; p50: number; p90: number; p99: number; max: number };
  /** CPU seconds wrk itself used. */
  cpuSeconds: number;
  text: string;
}

export async function runWrk(o: WrkOptions): Promise<WrkResult> {
  const cmd = [
    "wrk",
    "-t",
    String(o.threads),
    "-c",
    String(o.connections),
    "-d",
    `${o.seconds}s`,
    "--timeout",
    "5s",
    "--latency",
  ];
  cmd.push("-s", scriptFile(o.script ?? "rotate"), o.url, "--", o.tokensFile, String(o.ips));
  const p = spawn(cmd, { stdout: "pipe", stderr: "pipe", stdin: "ignore" });
  onExit("wrk", () => p.kill("SIGKILL"));
  o.started?.(p.pid);
  const timer = setTimeout(() => p.kill("SIGKILL"), (o.seconds + 30) * 1000);
  const [text, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  clearTimeout(timer);
  const line = text.split("\n").find((l) => l.startsWith("BENCH_JSON "));
  if (code !== 0 || !line) throw new Error(`wrk exited ${code} without its summary:\n${text}\n${err}`);
  const j = JSON.parse(line.slice("BENCH_JSON ".length)) as {
    requests: number;
    duration_us: number;
    errors: WrkResult["errors"];
    statuses: Record<string, number>;
    latency_us: Record<"mean" | "p50" | "p90" | "p99" | "max", number>;
  };
  const seconds = j.duration_us / 1e6;
  const ok = Object.entries(j.statuses).reduce((a, [status, n]) => a + (status.startsWith("2") ? n : 0), 0);
  const ms = (us: number) => Math.round(us / 10) / 100;
  return {
    requests: j.requests,
    seconds,
    statuses: j.statuses,
    errors: j.errors,
    ok,
    notOk: j.requests - ok,
    okPerSecond: ok / seconds,
    latencyMs: {
      mean: ms(j.latency_us.mean),
      p50: ms(j.latency_us.p50),
      p90: ms(j.latency_us.p90),
      p99: ms(j.latency_us.p99),
      max: ms(j.latency_us.max),
    },
    cpuSeconds: exitedCpuSeconds(p),
    text: text.replace(/^BENCH_JSON .*\n?/m, ""),
  };
}
