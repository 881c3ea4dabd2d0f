import { readFileSync } from "node:fs";
import { join } from "node:path";
import { renderMarkdown } from "../markdown/markdown";
import { REFERENCE_PATH } from "./reference";

/** The rate-limit reference page (the `docs` link of a 429), rendered once at start, in the style of the API reference. */
export function rateLimitDocsPage(): string {
  const body = renderMarkdown(readFileSync(join(import.meta.dir, "rate-limits.md"), "utf8"));
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Rate limits · mailcore</title>
<link rel="stylesheet" href="/assets/site.css">
<link rel="icon" href="/assets/favicon.svg" type="image/svg+xml">
</head>
<body>
<main id="content">
<p><a href="${REFERENCE_PATH}">← API reference</a></p>
${body}
</main>
</body>
</html>
`;
}
