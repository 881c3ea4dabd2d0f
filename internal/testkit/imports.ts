import { existsSync, readFileSync } from "node:fs";
import { dirname, relative, resolve } from "node:path";
import { REPO_ROOT } from "./testkit";

const transpiler = new Bun.Transpiler({ loader: "ts" });

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
    for (const { path } of transpiler.scanImports(readFileSync(file, "utf8"))) {
      if (!path.startsWith(".")) continue;
      const target = resolve(dirname(file), path);
      const found = [target, `${target}.ts`, `${target}/index.ts`].find((f) => f.endsWith(".ts") && existsSync(f));
      if (!found) throw new Error(`${relative(REPO_ROOT, file)} imports ${path}, which is not a .ts file`);
      stack.push(found);
    }
  }
  return [...seen].map((f) => relative(REPO_ROOT, f)).sort();
}
