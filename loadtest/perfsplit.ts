// Where processes' CPU goes by kind of code, from Linux perf (cpu-clock samples, only while a
// thread runs): JIT-compiled JavaScript, the runtime's own native code (Bun: JavaScriptCore's
// interpreter and builtins, its HTTP and HTTP/2 code, the GC; Redis: Redis itself), the C
// library and allocator, and the kernel (system calls, the network stack). Bun's sampling
// profiler counts wall time while JavaScript is on the stack, so a thread that waits for a core
// inside a system call looks busy there; perf counts only the time a thread runs.
import { spawn, spawnSync } from "bun";
import { readdirSync } from "node:fs";
import { has } from "./procs";

/** Samples a second while a thread runs. */
const FREQUENCY = 1_000;

export type CodeKind = "JIT-compiled JavaScript" | "runtime (native)" | "libc and allocator" | "kernel";

function kindOf(dso: string): CodeKind {
  if (dso.startsWith("[JIT]")) return "JIT-compiled JavaScript";
  if (dso.startsWith("[kernel")) return "kernel";
  if (/^(libc|libm|libpthread|libjemalloc|libstdc|ld-linux|\[vdso\])/.test(dso)) return "libc and allocator";
  return "runtime (native)";
}

/** Records every thread of the given processes until the returned function is called; then their CPU seconds by kind. */
export function perfWindow(
  pids: Record<string, number>,
  file: string,
): (() => Promise<Record<string, Partial<Record<CodeKind, number>>>>) | undefined {
  if (!has("perf")) return undefined;
  const rec = spawn(
    [
      "perf",
      "record",
      "-q",
      "-e",
      "cpu-clock",
      "-F",
      String(FREQUENCY),
      "-o",
      file,
      "-p",
      Object.values(pids).join(","),
    ],
    { stdout: "ignore", stderr: "pipe" },
  );
  return async () => {
    // perf reports threads: each thread's process, read while they still run.
    const processOf = new Map<string, string>();
    for (const [name, pid] of Object.entries(pids)) for (const tid of threadIds(pid)) processOf.set(tid, name);
    rec.kill("SIGINT");
    await rec.exited;
    const report = spawnSync(
      [
        "perf",
        "report",
        "-i",
        file,
        "--no-children",
        "--sort",
        "pid,dso",
        "-F",
        "sample,pid,dso",
        "--stdio",
        "-g",
        "none",
      ],
      { stdout: "pipe", stderr: "ignore" },
    ).stdout.toString();
    const out: Record<string, Partial<Record<CodeKind, number>>> = {};
    for (const m of report.matchAll(/^\s*(\d+)\s+(\d+):\S*\s+(\S.*?)\s*$/gm)) {
      const name = processOf.get(m[2]!);
      if (name === undefined) continue;
      out[name] ??= {};
      const kinds = out[name];
      const kind = kindOf(m[3]!);
      kinds[kind] = (kinds[kind] ?? 0) + Number(m[1]) / FREQUENCY;
    }
    return out;
  };
}

/** The thread ids of a process (none once it is gone). */
function threadIds(pid: number): string[] {
  try {
    return readdirSync(`/proc/${pid}/task`);
  } catch {
    return [];
  }
}
