import { readFileSync } from "node:fs";

/** Busy and total jiffies of the whole machine (all cores), from /proc/stat. */
export function machineTicks(): { busy: number; total: number } {
  const n = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number);
  const total = n.reduce((a, b) => a + b, 0);
  return { busy: total - (n[3] ?? 0) - (n[4] ?? 0), total };
}
