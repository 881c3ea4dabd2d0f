import { spawnSync } from "bun";
import { readFileSync } from "node:fs";

/** Busy and total jiffies of the whole machine (all cores), from /proc/stat. */
export function machineTicks(): { busy: number; total: number } {
  const n = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number);
  const total = n.reduce((a, b) => a + b, 0);
  return { busy: total - (n[3] ?? 0) - (n[4] ?? 0), total };
}

const CLK_TCK = Number(spawnSync(["getconf", "CLK_TCK"]).stdout.toString().trim()) || 100;

/**
 * The fields of a /proc stat file after the command's name (which may hold spaces and
 * parentheses): [0] the state, [1] the parent's pid, [11] utime, [12] stime; undefined once the
 * process is gone.
 */
export function statFields(path: string): string[] | undefined {
  try {
    const stat = readFileSync(path, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  } catch {
    return undefined;
  }
}

/** utime+stime from a /proc stat file (a process's, all its threads, or one thread's), in seconds; undefined once it is gone. */
export function statSeconds(path: string): number | undefined {
  const f = statFields(path);
  return f && (Number(f[11]) + Number(f[12])) / CLK_TCK;
}

/** utime+stime of a process (all its threads), in seconds; undefined once it is gone. */
export function cpuSeconds(pid: number): number | undefined {
  return statSeconds(`/proc/${pid}/stat`);
}
