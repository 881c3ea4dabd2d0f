// Plain-text tables for the benchmark's stdout.
import type { CpuReport } from "./procs";

/** The p-th percentile (0 to 100) of ascending values; undefined when there are none. */
export function percentile(sorted: number[], p: number): number | undefined {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

export function table(title: string, header: string[], rows: (string | number)[][]): string {
  const cells = [header, ...rows.map((r) => r.map(String))];
  const widths = header.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? "").length)));
  const line = (r: string[]) => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join("  ");
  const rule = widths.map((w) => "-".repeat(w)).join("  ");
  return [`\n${title}`, line(header), rule, ...cells.slice(1).map(line)].join("\n");
}

/** The share of the machine (%) that processes not in the report took: the machine's other work. */
export function othersPct(r: CpuReport): number {
  return Math.max(0, r.machineBusyPct - Object.values(r.processes).reduce((a, p) => a + p.pctOfMachine, 0));
}

export function cpuTable(title: string, r: CpuReport): string {
  const rows = Object.entries(r.processes)
    .sort((a, b) => b[1].cpuSeconds - a[1].cpuSeconds)
    .map(([name, s]) => [name, s.cpuSeconds.toFixed(2), `${s.pctOfCore.toFixed(1)}%`, `${s.pctOfMachine.toFixed(1)}%`]);
  const listed = Object.values(r.processes).reduce((a, s) => a + s.pctOfMachine, 0);
  rows.push(
    ["(all listed)", "", "", `${listed.toFixed(1)}%`],
    ["(anything else on the machine)", "", "", `${othersPct(r).toFixed(1)}%`],
    ["(machine busy, every process)", "", "", `${r.machineBusyPct.toFixed(1)}%`],
  );
  return table(
    `${title} — ${r.wallSeconds.toFixed(1)} s wall, ${r.cores} cores`,
    ["process", "cpu s", "% of a core", "% of machine"],
    rows,
  );
}

/** CPU of several runs side by side: a row per process, a column per run, in % of the machine. */
export function cpuColumns(title: string, runs: Record<string, CpuReport>): string {
  const cols = Object.keys(runs);
  const names = [...new Set(Object.values(runs).flatMap((r) => Object.keys(r.processes)))];
  const pct = (x: number | undefined) => (x === undefined ? "" : `${x.toFixed(1)}%`);
  const rows = names.map((n) => [n, ...cols.map((c) => pct(runs[c]!.processes[n]?.pctOfMachine))]);
  rows.push(
    ["(anything else on the machine)", ...cols.map((c) => pct(othersPct(runs[c]!)))],
    ["(machine busy, every process)", ...cols.map((c) => pct(runs[c]!.machineBusyPct))],
  );
  return table(`${title} — % of the machine`, ["process", ...cols], rows);
}

export const fmt = (x: number, digits = 0) =>
  x.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits });
