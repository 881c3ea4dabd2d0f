import { readFileSync } from "node:fs";
import { join } from "node:path";
import { renderMarkdown } from "../markdown/markdown";
import { html, trusted } from "../web/html";
import { REFERENCE_PATH, referencePage } from "./reference";

/** The rate-limit reference page (the `docs` link of a 429), rendered once at start, in the style of the API reference. */
export function rateLimitDocsPage(): string {
  const body = renderMarkdown(readFileSync(join(import.meta.dir, "rate-limits.md"), "utf8"));
  return referencePage(
    "Rate limits",
    html`<p><a href="${REFERENCE_PATH}">← API reference</a></p>
${trusted(body)}`,
  );
}
