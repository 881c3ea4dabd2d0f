import { OPENAPI_PATH } from "../api/openapi/service";
import { DOCS_PATH, HEALTH_PATH, READY_PATH } from "../api/server";
import { CONSOLE } from "../console/pages";
import { html } from "../web/html";
import { sitePage } from "../web/page";
import { REFERENCE_PATH } from "./reference";

// What a browser gets outside the API: a landing page at / that says where everything is, and
// an HTML "not found" for a path that is nothing (an API client keeps the API's JSON).

const links = html`<ul>
<li><a href="${CONSOLE}">Console</a>: the organization's tokens, domains, usage, subscribers, campaigns and workflows (sign in)</li>
<li><a href="${REFERENCE_PATH}">API reference</a> (<a href="${OPENAPI_PATH}">OpenAPI document</a>) and the <a href="${DOCS_PATH}">rate limits</a></li>
<li>Health: <a href="${HEALTH_PATH}">${HEALTH_PATH}</a> (the process is up), <a href="${READY_PATH}">${READY_PATH}</a> (it can reach the rate limiter)</li>
</ul>`;

export function landingPage(): string {
  return sitePage(
    "mailcore",
    html`<main id="content">
<h1>mailcore</h1>
<p class="lead">A transactional mail platform: the HTTP API is under <code>/api/v1</code>, called with <code>Authorization: Bearer &lt;token&gt;</code>.</p>
${links}
</main>`,
  );
}

export function notFoundPage(path: string): string {
  return sitePage(
    "Not found",
    html`<main id="content">
<h1>Not found</h1>
<div class="notice error" role="alert">There is no page ${path}.</div>
<p>What there is:</p>
${links}
</main>`,
  );
}

/** Whether the client reads HTML (a browser's navigation), not JSON. */
export function wantsHtml(req: Request): boolean {
  return /(^|,)\s*text\/html\s*(;|,|$)/i.test(req.headers.get("accept") ?? "");
}
