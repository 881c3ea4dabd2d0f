import { type Html, html } from "./html";

/** A page of the site (the console, the API reference): its head, the site's style (and `styles` after it), and `body`. */
export function sitePage(
  title: string,
  body: Html,
  scripts: readonly string[] = [],
  styles: readonly string[] = [],
): string {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${title} · mailcore</title>
<link rel="stylesheet" href="/assets/site.css">
${styles.map((href) => html`<link rel="stylesheet" href="${href}">\n`)}<link rel="icon" href="/assets/favicon.svg" type="image/svg+xml">
${scripts.map((src) => html`<script src="${src}" defer></script>\n`)}</head>
<body>
${body}
</body>
</html>
`.value;
}
