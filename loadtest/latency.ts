// Runs loadtest/k6/latency.js (GETs) or loadtest/k6/sends.js (sends), k6 at a constant arrival
// rate, and reads its exported summary: the rate achieved, p50/p99/max of http_req_duration,
// the share of answers not 2xx, dropped iterations.
import { readFileSync } from "node:fs";
import { spawnK6 } from "./k6tool";
import { type CpuReport, cpuWindow, exitedCpuSeconds, onExit } from "./procs";

export interface LatencyOptions {
  url: string;
  /** Requests per second asked for. */
  rate: number;
  seconds: number;
  /** One token a line (latency.js), or "<token> <domain>" a line (sends.js). */
  tokensFile: string;
  ips: number;
  /** latency.js (the default) or sends.js. */
  script?: "latency.js" | "sends.js";
  /** Where k6 writes its summary. */
  summary: string;
  /** Processes whose CPU is read over the run (k6 is added). */
  pids: Record<string, number>;
  cores: number;
}

export interface LatencyResult {
  rate: number;
  seconds: number;
  requests: number;
  achievedPerSecond: number;
  /** Share of answers that were not 2xx (k6's http_req_failed: any status outside 200-399). */
  notOkShare: number;
  droppedIterations: number;
  latencyMs: { p50: number; p99: number; max: number };
  cpu: CpuReport;
}

let runs = 0;

type Summary = { metrics: Record<string, Record<string, number> | undefined> };

export async function runLatency(o: LatencyOptions, k6: string): Promise<LatencyResult> {
  const vars = {
    API: o.url,
    RATE: String(o.rate),
    SECONDS: String(o.seconds),
    TOKENS_FILE: o.tokensFile,
    IPS: String(o.ips),
    // Recipients of their own in every run (sends.js).
    RUN: String(++runs),
  };
  const close = cpuWindow(o.pids, o.cores);
  // Only the status tag on samples: k6 shares the machine with the target, so it should
  // spend as little as it can on metrics.
  const flags = ["--quiet", "--system-tags", "status", "--summary-trend-stats", "p(50),p(99),max"];
  const p = spawnK6(k6, o.script ?? "latency.js", vars, o.summary, flags);
  onExit("k6", () => p.kill("SIGKILL"));
  const timer = setTimeout(() => p.kill("SIGKILL"), (o.seconds + 60) * 1000);
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  clearTimeout(timer);
  const cpu = close({ k6: exitedCpuSeconds(p) });
  if (code !== 0) throw new Error(`k6 ${o.script ?? "latency.js"} at ${o.rate}/s exited ${code}:\n${out}\n${err}`);
  const m = (JSON.parse(readFileSync(o.summary, "utf8")) as Summary).metrics;
  const duration = m.http_req_duration ?? {};
  const round2 = (x: number | undefined) => Math.round((x ?? Number.NaN) * 100) / 100;
  return {
    rate: o.rate,
    seconds: o.seconds,
    requests: m.http_reqs?.count ?? 0,
    achievedPerSecond: m.http_reqs?.rate ?? 0,
    notOkShare: m.http_req_failed?.value ?? 0,
    // k6 leaves the metric out when nothing was dropped.
    droppedIterations: m.dropped_iterations?.count ?? 0,
    latencyMs: { p50: round2(duration["p(50)"]), p99: round2(duration["p(99)"]), max: round2(duration.max) },
    cpu,
  };
}
