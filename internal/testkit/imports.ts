import { existsSync, readFileSync } from "node:fs";
import { dirname, relative, resolve } from "node:path";
import { REPO_ROOT } from "./testkit";

const transpiler = new Bun.Transpiler({ loader: "ts" });

/** The repo's .ts file a relative import of `file` names (absolute paths both). */
function resolveImport(file: string, path: string): string {
  const target = resolve(dirname(file), path);
  const found = [target, `${target}.ts`, `${target}/index.ts`].find((f) => f.endsWith(".ts") && existsSync(f));
  if (!found) throw new Error(`${relative(REPO_ROOT, file)} imports ${path}, which is not a .ts file`);
  return found;
}

/** The relative imports of a source, as the scanner reads them: type-only ones are left out. */
function relativeImports(source: string): string[] {
  return transpiler
    .scanImports(source)
    .map(({ path }) => path)
    .filter((path) => path.startsWith("."));
}

/**
 * The repo's modules a process loads at run time from `entry` (relative to the repo root):
 * the relative imports, followed transitively; type-only imports load nothing and are left out.
 */
export function runtimeImports(entry: string): string[] {
  const seen = new Set<string>();
  const stack = [resolve(REPO_ROOT, entry)];
  while (stack.length > 0) {
    const file = stack.pop()!;
    if (seen.has(file)) continue;
    seen.add(file);
    for (const path of relativeImports(readFileSync(file, "utf8"))) stack.push(resolveImport(file, path));
  }
  return [...seen].map((f) => relative(REPO_ROOT, f)).sort();
}

/** `import type`, `export type {`, and `type` before a name inside the braces of an import or export. */
const TYPE_MARKER =
  /^(import|export)\s+type\s+(?=[{*]|\w+\s+from\b)|(?<=^(?:import|export)\s[^;]*[{,]\s*)type\s+(?=\w)/gm;

/**
 * The production tree's files (cmd/ and internal/, less the tests and internal/testkit), each
 * with the files it imports directly, type-only imports included: a type is a dependency too.
 * Paths relative to the repo root.
 */
export function productionImportGraph(): Map<string, string[]> {
  const files = [...new Bun.Glob("{cmd,internal}/**/*.ts").scanSync({ cwd: REPO_ROOT })]
    .filter((f) => !f.endsWith(".test.ts") && !f.startsWith("internal/testkit/"))
    .sort();
  const graph = new Map<string, string[]>();
  for (const file of files) {
    const path = resolve(REPO_ROOT, file);
    const source = readFileSync(path, "utf8").replace(TYPE_MARKER, (_, keyword) => (keyword ? `${keyword} ` : ""));
    const imports = relativeImports(source).map((p) => relative(REPO_ROOT, resolveImport(path, p)));
    graph.set(file, [...new Set(imports)].sort());
  }
  return graph;
}

/** The import cycles of a graph: each a sorted list of the files that import each other around a loop. */
export function importCycles(graph: Map<string, string[]>): string[][] {
  // Tarjan's strongly connected components; a component of two or more files, or a file that
  // imports itself, is a cycle.
  let counter = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const cycles: string[][] = [];
  const visit = (file: string) => {
    index.set(file, counter);
    low.set(file, counter);
    counter++;
    stack.push(file);
    onStack.add(file);
    for (const next of graph.get(file) ?? []) {
      if (!index.has(next)) {
        visit(next);
        low.set(file, Math.min(low.get(file)!, low.get(next)!));
      } else if (onStack.has(next)) {
        low.set(file, Math.min(low.get(file)!, index.get(next)!));
      }
    }
    if (low.get(file) !== index.get(file)) return;
    const component: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      component.push(member);
    } while (member !== file);
    if (component.length > 1 || graph.get(file)?.includes(file)) cycles.push(component.sort());
  };
  for (const file of graph.keys()) if (!index.has(file)) visit(file);
  return cycles.sort((a, b) => a[0]!.localeCompare(b[0]!));
}
