// Measured windows of several targets alternated in rounds (A B C, then B C A, then C A B...), on
// processes that stay up between them: a drift of the machine's speed, or other work on it,
// falls on every target alike. What counts is each process's CPU per served request (2xx), the
// median of the rounds.
import { type CpuReport, cpuWindow } from "./procs";
import { othersPct } from "./report";
import { runWrk, type WrkOptions, type WrkResult } from "./wrk";

export interface Target {
  name: string;
  /** The URL wrk loads. */
  url: string;
  tokensFile: string;
  /** The processes whose CPU is counted, by name. */
  pids: Record<string, number>;
}

export interface RoundWindow {
  target: string;
  round: number;
  run: WrkResult;
  cpu: CpuReport;
  /** CPU microseconds per served request of each process of the target, and "all" of them. */
  usPerOk: Record<string, number>;
  /** Share (%) of the machine that other work took in the window. */
  othersPct: number;
}

export interface TargetMedians {
  okPerSecond: number;
  usPerOk: Record<string, number>;
  p50Ms: number;
  p99Ms: number;
}

export const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  if (s.length === 0) return Number.NaN;
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

/** The window's CPU per served request of each of the target's processes. */
function perOk(t: Target, cpu: CpuReport, ok: number): Record<string, number> {
  const out: Record<string, number> = {};
  let all = 0;
  for (const name of Object.keys(t.pids)) {
    const us = ((cpu.processes[name]?.cpuSeconds ?? Number.NaN) * 1e6) / Math.max(1, ok);
    out[name] = us;
    all += us;
  }
  out.all = all;
  return out;
}

/**
 * `rounds` rounds of one measured wrk window per target, the order rotated each round; `wrk` is
 * what every window shares (connections, script, length). `before(t)` runs ahead of each window.
 */
export async function alternatedRounds(
  targets: Target[],
  rounds: number,
  wrk: Omit<WrkOptions, "url" | "tokensFile" | "started">,
  cores: number,
  log: (line: string) => void,
  before?: (t: Target) => Promise<void>,
): Promise<{ windows: RoundWindow[]; medians: Record<string, TargetMedians> }> {
  const windows: RoundWindow[] = [];
  for (let round = 0; round < rounds; round++) {
    const order = targets.map((_, i) => targets[(i + round) % targets.length]!);
    for (const t of order) {
      await before?.(t);
      log(`round ${round + 1} of ${rounds}: ${t.name}, wrk ${wrk.seconds} s`);
      let close: ((m?: Record<string, number>) => CpuReport) | undefined;
      const run = await runWrk({
        ...wrk,
        url: t.url,
        tokensFile: t.tokensFile,
        started: () => {
          close = cpuWindow(t.pids, cores);
        },
      });
      const cpu = close!({ wrk: run.cpuSeconds });
      windows.push({ target: t.name, round, run, cpu, usPerOk: perOk(t, cpu, run.ok), othersPct: othersPct(cpu) });
    }
  }
  const medians: Record<string, TargetMedians> = {};
  for (const t of targets) {
    const of = windows.filter((w) => w.target === t.name);
    medians[t.name] = {
      okPerSecond: median(of.map((w) => w.run.okPerSecond)),
      usPerOk: Object.fromEntries(
        [...Object.keys(t.pids), "all"].map((n) => [n, median(of.map((w) => w.usPerOk[n]!))]),
      ),
      p50Ms: median(of.map((w) => w.run.latencyMs.p50)),
      p99Ms: median(of.map((w) => w.run.latencyMs.p99)),
    };
  }
  return { windows, medians };
}
