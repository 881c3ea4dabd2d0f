import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { openApiDocument } from "../api/openapi/document";
import { OPENAPI_PATH } from "../api/openapi/service";
import { getOnly } from "../api/respond";
import { CONTENT_SECURITY_POLICY, pageHeaders } from "../web/headers";
import { type Html, html } from "../web/html";
import { sitePage } from "../web/page";

// The API reference at /docs: the OpenAPI document rendered in the browser by Swagger UI, from
// this process's own files (the renderer's script and stylesheet out of node_modules, read once
// at start; nothing is fetched from another host), and the document itself at
// /api/v1/openapi.json.

export const REFERENCE_PATH = "/docs";
/** The renderer's files and the page's own script and style. */
export const REFERENCE_ASSETS = "/docs/assets/";

/**
 * The site's policy, with the one addition the renderer needs: its stylesheet draws its icons as
 * data: images. Scripts and styles stay this origin's files only.
 */
export const REFERENCE_POLICY = CONTENT_SECURITY_POLICY.replace("img-src 'self'", "img-src 'self' data:");

const SWAGGER_UI = dirname(Bun.resolveSync("swagger-ui-dist/package.json", import.meta.dir));
const FILES: Record<string, { path: string; type: string }> = {
  "swagger-ui-bundle.js": { path: join(SWAGGER_UI, "swagger-ui-bundle.js"), type: "text/javascript; charset=utf-8" },
  "swagger-ui.css": { path: join(SWAGGER_UI, "swagger-ui.css"), type: "text/css; charset=utf-8" },
  "reference.js": { path: join(import.meta.dir, "assets", "reference.js"), type: "text/javascript; charset=utf-8" },
  "reference.css": { path: join(import.meta.dir, "assets", "reference.css"), type: "text/css; charset=utf-8" },
};

/** A page of the reference (/docs and the pages beside it): the site's header and page around `main`. */
export function referencePage(
  title: string,
  main: Html,
  files: { scripts?: string[]; styles?: string[] } = {},
): string {
  return sitePage(
    title,
    html`<a class="skip" href="#content">Skip to the content</a>
<header class="top"><div class="bar">
<a class="brand" href="${REFERENCE_PATH}">mailcore API reference</a>
<nav aria-label="Reference"><a href="/docs/rate-limits">Rate limits</a> · <a href="${OPENAPI_PATH}">OpenAPI document</a> · <a href="/console">Console</a></nav>
</div></header>
<main id="content">
${main}
</main>`,
    files.scripts,
    files.styles,
  );
}

function page(): string {
  return referencePage(
    "API reference",
    html`<noscript><p>The reference is drawn by a script. Without it, read the OpenAPI document itself: <a href="${OPENAPI_PATH}">${OPENAPI_PATH}</a>.</p></noscript>
<div id="swagger-ui" data-url="${OPENAPI_PATH}"></div>`,
    {
      scripts: [`${REFERENCE_ASSETS}swagger-ui-bundle.js`, `${REFERENCE_ASSETS}reference.js`],
      styles: [`${REFERENCE_ASSETS}swagger-ui.css`, `${REFERENCE_ASSETS}reference.css`],
    },
  );
}

/** Serves /docs, its assets and /api/v1/openapi.json; undefined for every other path. */
export function referenceHandler(): (req: Request, url: URL) => Response | undefined {
  const json = JSON.stringify(openApiDocument(), null, 2);
  const htmlPage = page();
  const assets = new Map(
    Object.entries(FILES).map(([name, f]) => [name, { body: readFileSync(f.path), type: f.type }]),
  );
  const headers = { "Cache-Control": "public, max-age=300", "Content-Security-Policy": REFERENCE_POLICY };
  return (req, url) => {
    const path = url.pathname;
    if (path === OPENAPI_PATH)
      return getOnly(
        req,
        path,
        () =>
          new Response(json, {
            headers: {
              "Content-Type": "application/json",
              "Access-Control-Allow-Origin": "*",
              "X-Content-Type-Options": "nosniff",
            },
          }),
      );
    if (path === REFERENCE_PATH)
      return getOnly(req, path, () => new Response(htmlPage, { headers: pageHeaders(headers) }));
    if (path.startsWith(REFERENCE_ASSETS)) {
      const asset = assets.get(path.slice(REFERENCE_ASSETS.length));
      if (!asset) return undefined;
      return getOnly(
        req,
        path,
        () =>
          new Response(asset.body, {
            headers: { ...headers, "Content-Type": asset.type, "X-Content-Type-Options": "nosniff" },
          }),
      );
    }
    return undefined;
  };
}
