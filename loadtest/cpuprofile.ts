// Reads the CPU profiles Bun writes with --cpu-prof (the Chrome DevTools format: a call tree,
// and a sample of it every interval while JavaScript, or a native function called from it, is
// running on the main thread) and summarizes the samples of a time window: where the main
// thread's time went, per request.
import { readFileSync } from "node:fs";
import { REPO_ROOT } from "../internal/testkit/testkit";

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

export interface CpuProfile {
  nodes: ProfileNode[];
  /** Epoch microseconds of the first sample. */
  startTime: number;
  samples: number[];
  /** Microseconds from the previous sample (the first: from startTime). */
  timeDeltas: number[];
}

export function readProfile(path: string): CpuProfile {
  return JSON.parse(readFileSync(path, "utf8")) as CpuProfile;
}

/** A frame as a reader finds it: the function and where it is, the checkout's paths relative. */
function where(f: CallFrame, root: string): string {
  const url = f.url.replace(`file://${root}/`, "").replace(/^file:\/\//, "");
  return url === "" ? "native" : `${url}:${f.lineNumber + 1}`;
}

/**
 * The part of the code a frame belongs to: internal/<package>, cmd/<process>, an npm package, or
 * the runtime's own module (node:http2, internal:streams, bun:sqlite); undefined for a native
 * function, which is counted with the nearest caller that has one.
 */
function areaOf(f: CallFrame, root: string): string | undefined {
  const url = f.url.replace(`file://${root}/`, "");
  if (url === "") return undefined;
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (pkg) return pkg[1];
  const own = /^(internal|cmd|loadtest)\/([^/]+)/.exec(url);
  if (own) return `${own[1]}/${own[2]}`;
  const builtin = /^(node|internal|bun):([^/:]+)/.exec(url);
  return builtin ? `${builtin[1]}:${builtin[2]}` : url;
}

export interface FunctionShare {
  /** The function, and for a native one the JavaScript function that called it. */
  name: string;
  where: string;
  /** Samples with it on top of the stack, and with it anywhere on the stack. */
  self: number;
  total: number;
}

export interface WindowSummary {
  /** Samples in the window, and the profiler's interval (µs). */
  samples: number;
  intervalUs: number;
  /** Self samples by area (a native function's counted with its caller's area). */
  areas: Record<string, number>;
  functions: FunctionShare[];
}

/** The samples taken between fromUs and toUs (epoch microseconds), summarized; root is the checkout profiled. */
export function summarizeWindow(
  p: CpuProfile,
  fromUs: number,
  toUs: number,
  intervalUs: number,
  root = REPO_ROOT,
): WindowSummary {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const stackOf = (leaf: number) => {
    const out: ProfileNode[] = [];
    for (let id: number | undefined = leaf; id !== undefined; id = parent.get(id)) out.push(byId.get(id)!);
    return out.filter((n) => n.callFrame.functionName !== "(root)");
  };
  const label = (stack: ProfileNode[], i: number) => {
    const f = stack[i]!.callFrame;
    const name = f.functionName || "(anonymous)";
    if (f.url !== "") return { name, where: where(f, root) };
    const caller = stack.slice(i + 1).find((n) => n.callFrame.url !== "");
    return {
      name: `${name} (native)`,
      where: caller
        ? `from ${caller.callFrame.functionName || "(anonymous)"} ${where(caller.callFrame, root)}`
        : "native",
    };
  };
  const areas: Record<string, number> = {};
  const fns = new Map<string, FunctionShare>();
  let t = p.startTime;
  let samples = 0;
  for (let i = 0; i < p.samples.length; i++) {
    t += p.timeDeltas[i] ?? 0;
    if (t < fromUs || t > toUs) continue;
    samples++;
    const stack = stackOf(p.samples[i]!);
    if (stack.length === 0) continue;
    const area = stack.map((n) => areaOf(n.callFrame, root)).find((a) => a !== undefined) ?? "native";
    areas[area] = (areas[area] ?? 0) + 1;
    const seen = new Set<string>();
    for (let j = 0; j < stack.length; j++) {
      const l = label(stack, j);
      const key = `${l.name} ${l.where}`;
      if (seen.has(key)) continue;
      seen.add(key);
      const f = fns.get(key) ?? { ...l, self: 0, total: 0 };
      f.total++;
      if (j === 0) f.self++;
      fns.set(key, f);
    }
  }
  return { samples, intervalUs, areas, functions: [...fns.values()] };
}
