import { readFileSync } from "node:fs";
import { join } from "node:path";
import { renderMarkdown } from "../markdown/markdown";

/** The rate-limit reference page (the `docs` link of a 429), rendered once at start. */
export function rateLimitDocsPage(): string {
  const body = renderMarkdown(readFileSync(join(import.meta.dir, "rate-limits.md"), "utf8"));
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Rate limits</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:46rem;margin:2rem auto;padding:0 1rem}
code,pre{background:#f4f4f4}pre{padding:.75rem;overflow:auto}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:.25rem .5rem}</style></head><body>${body}</body></html>`;
}
