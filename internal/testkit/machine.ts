import { spawnSync } from "bun";
import { readFileSync } from "node:fs";

/** Busy and total jiffies of the whole machine (all cores), from /proc/stat. */
export function machineTicks(): { busy: number; total: number } {
  const n = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number);
  const total = n.reduce((a, b) => a + b, 0);
  return { busy: total - (n[3] ?? 0) - (n[4] ?? 0), total };
}

const CLK_TCK = Number(spawnSync(["getconf", "CLK_TCK"]).stdout.toString().trim()) || 100;

/** utime+stime from a /proc stat file (a process's, all its threads, or one thread's), in seconds; undefined once it is gone. */
export function statSeconds(path: string): number | undefined {
  try {
    const stat = readFileSync(path, "utf8");
    const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(f[11]) + Number(f[12])) / CLK_TCK;
  } catch {
    return undefined;
  }
}

/** utime+stime of a process (all its threads), in seconds; undefined once it is gone. */
export function cpuSeconds(pid: number): number | undefined {
  return statSeconds(`/proc/${pid}/stat`);
}
