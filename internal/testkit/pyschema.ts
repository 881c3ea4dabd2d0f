// The OpenAPI document read by a second engine, not JavaScript's: Python's re for its patterns
// and the jsonschema package (Debian's python3-jsonschema) for its schemas, so that a pattern or
// a schema that only JavaScript reads as meant is found (pyschema.py beside this does the work).
import { spawn } from "bun";
import { join } from "node:path";

/** Debian's Python, where python3-jsonschema installs (another python3 on the PATH may lack it). */
export const PYTHON = "/usr/bin/python3";
const SCRIPT = join(import.meta.dir, "pyschema.py");

async function runScript(request: unknown): Promise<Record<string, unknown>> {
  const proc = spawn([PYTHON, SCRIPT], { stdin: "pipe", stdout: "pipe", stderr: "pipe" });
  proc.stdin.write(JSON.stringify(request));
  await proc.stdin.end();
  const [out, err, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  if (code !== 0) throw new Error(`${PYTHON} ${SCRIPT} exited with ${code}: ${err}`);
  return JSON.parse(out) as Record<string, unknown>;
}

export type PatternResult = { error: string } | { matches: boolean[] };

/** Each pattern compiled by Python's re, and whether it matches each probe (as jsonschema matches: re.search). */
export async function pythonPatterns(probes: Map<string, string[]>): Promise<Map<string, PatternResult>> {
  const answer = await runScript({ patterns: Object.fromEntries(probes) });
  return new Map(Object.entries(answer.patterns as Record<string, PatternResult>));
}

/** A value and where in the document its schema is (the keys from the root). */
export interface Instance {
  at: string[];
  value: unknown;
}

const pointer = (at: string[]) => `#/${at.map((p) => p.replaceAll("~", "~0").replaceAll("/", "~1")).join("/")}`;

/** What jsonschema (draft 2020-12, formats checked) finds wrong with each value: one list per value, empty when valid. */
export async function pythonValidate(doc: unknown, instances: Instance[]): Promise<string[][]> {
  const answer = await runScript({
    document: doc,
    instances: instances.map((i) => ({ at: pointer(i.at), value: i.value })),
  });
  return answer.errors as string[][];
}
