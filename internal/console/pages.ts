import { sitePage } from "../web/page";
import type {
  ApiToken,
  GetSessionResponse,
  GetUsageResponse,
  SendingDomain,
} from "../gen/mailcore/limiter/v1/console_pb";
import { laneName } from "../mail/policy";
import { planName } from "../plans/plans";
import { type Html, html, time } from "../web/html";
import { CHART_KINDS, refusalChart } from "./chart";

// The console's pages: plain server-rendered HTML, one form per change, each with the
// session's CSRF token. Every value is escaped by the html template.

export const CONSOLE = "/console";
export const PATHS = {
  signIn: `${CONSOLE}/sign-in`,
  signOut: `${CONSOLE}/sign-out`,
  tokens: `${CONSOLE}/tokens`,
  domains: `${CONSOLE}/domains`,
  usage: `${CONSOLE}/usage`,
  subscribers: `${CONSOLE}/subscribers`,
  campaigns: `${CONSOLE}/campaigns`,
  workflows: `${CONSOLE}/workflows`,
  emails: `${CONSOLE}/emails`,
  webhooks: `${CONSOLE}/webhooks`,
  suppressions: `${CONSOLE}/suppressions`,
} as const;

export type Tab =
  | "tokens"
  | "domains"
  | "usage"
  | "emails"
  | "webhooks"
  | "subscribers"
  | "campaigns"
  | "workflows"
  | "suppressions";

const TABS: [Tab, string, string][] = [
  ["tokens", PATHS.tokens, "API Tokens"],
  ["domains", PATHS.domains, "Sending domains"],
  ["usage", PATHS.usage, "Plan and usage"],
  ["emails", PATHS.emails, "Emails"],
  ["webhooks", PATHS.webhooks, "Webhooks"],
  ["subscribers", PATHS.subscribers, "Subscribers"],
  ["campaigns", PATHS.campaigns, "Campaigns"],
  ["workflows", PATHS.workflows, "Workflows"],
  ["suppressions", PATHS.suppressions, "Suppressions"],
];

/** A notice after a change (the ?done= of a redirect); the text is ours, never the URL's. */
export const NOTICES: Record<string, string> = {
  revoked: "The token was revoked. The API refuses it from the next request on.",
  added: "The domain was added. Publish its TXT record, then press Verify.",
  verified: "The domain is verified: messages from it are accepted.",
  tested: "A webhook.test event is on its way to the endpoint; its attempt shows below in a moment.",
  replayed: "The delivery is pending again: its new attempt shows below in a moment.",
  "signed-out": "You are signed out.",
  expired: "Your session has expired. Sign in again.",
};

export interface Notice {
  kind: "ok" | "error" | "info";
  text: string;
}

export function notice(n: Notice | undefined): Html {
  if (!n) return html``;
  return html`<div class="notice ${n.kind}" role="${n.kind === "error" ? "alert" : "status"}">${n.text}</div>`;
}

export const csrfField = (s: GetSessionResponse) => html`<input type="hidden" name="csrf" value="${s.csrfToken}">`;

function document_(title: string, body: Html): string {
  return sitePage(title, body, ["/assets/console.js"]);
}

/** A page of a signed-in user: the header with who is signed in, the tabs, the content. */
export function layout(s: GetSessionResponse, current: Tab | undefined, title: string, content: Html): string {
  return document_(
    title,
    html`<a class="skip" href="#content">Skip to the content</a>
<header class="top"><div class="bar">
<a class="brand" href="${PATHS.tokens}">mailcore console</a>
<span class="who">${s.email} · organization <strong>${s.orgSlug}</strong> · ${planName(s.plan)} plan</span>
<form method="post" action="${PATHS.signOut}">${csrfField(s)}<button type="submit">Sign out</button></form>
</div></header>
<nav class="tabs" aria-label="Settings"><ul>
${TABS.map(([tab, href, label]) => html`<li><a href="${href}"${tab === current ? html` aria-current="page"` : html``}>${label}</a></li>`)}
</ul></nav>
<main id="content">
<h1>${title}</h1>
${content}
</main>`,
  );
}

export function signInPage(o: { csrf: string; email?: string; notice?: Notice }): string {
  return document_(
    "Sign in",
    html`<main class="signin" id="content">
<h1>Sign in to the mailcore console</h1>
${notice(o.notice)}
<form method="post" action="${PATHS.signIn}">
<input type="hidden" name="csrf" value="${o.csrf}">
<div class="field"><label for="email">Email</label>
<input type="email" id="email" name="email" autocomplete="username" required value="${o.email ?? ""}"${o.email ? html`` : html` autofocus`}></div>
<div class="field"><label for="password">Password</label>
<input type="password" id="password" name="password" autocomplete="current-password" required${o.email ? html` autofocus` : html``}></div>
<button type="submit">Sign in</button>
</form>
<p class="hint">Accounts are made by your operator: <code>npx bun run cmd/admin/index.ts user create &lt;organization&gt; &lt;email&gt;</code>.</p>
</main>`,
  );
}

export function tokensPage(o: {
  session: GetSessionResponse;
  tokens: ApiToken[];
  created?: { token: string; name: string };
  notice?: Notice;
  name?: string;
}): string {
  const { session: s } = o;
  const created = o.created
    ? html`<section class="notice ok" aria-labelledby="new-token">
<h2 id="new-token">Your new token “${o.created.name}”</h2>
<p>Copy it now: it is shown this once. Only its hash is kept, so nobody can show it again.</p>
<div class="secret"><label class="visually-hidden" for="token-value">The new API token</label>
<input type="text" id="token-value" readonly value="${o.created.token}" spellcheck="false" autocomplete="off">
<button type="button" class="secondary" data-copy="token-value" data-status="copy-status" hidden>Copy</button></div>
<p id="copy-status" class="hint" role="status" aria-live="polite"></p>
<p>Use it as <code>Authorization: Bearer &lt;token&gt;</code>, or as the SMTP password.</p>
</section>`
    : html``;
  const rows = o.tokens.map(
    (t) => html`<tr>
<th scope="row">${t.name}</th>
<td class="mono" data-label="Id">${t.id}</td>
<td data-label="Created">${time(Number(t.createdMs))}</td>
<td data-label="Last used">${t.lastUsedMs > 0n ? time(Number(t.lastUsedMs)) : "never"}</td>
<td><a class="button danger" href="${PATHS.tokens}/${encodeURIComponent(t.id)}/revoke" aria-label="Revoke ${t.name} (${t.id})">Revoke</a></td>
</tr>`,
  );
  return layout(
    s,
    "tokens",
    "API Tokens",
    html`<p class="lead">Tokens authenticate calls to the HTTP API and SMTP submission of organization ${s.orgSlug}. Requests of every token count against the organization's quota.</p>
${notice(o.notice)}
${created}
<h2>Create a token</h2>
<form method="post" action="${PATHS.tokens}">
${csrfField(s)}
<div class="row"><div class="field"><label for="name">Name <span class="hint">(what uses it, e.g. “billing service”)</span></label>
<input type="text" id="name" name="name" maxlength="100" required value="${o.name ?? ""}"></div>
<button type="submit">Create token</button></div>
</form>
<h2>Active tokens</h2>
${
  o.tokens.length === 0
    ? html`<p>No active tokens.</p>`
    : html`<div class="table-wrap"><table class="stack">
<caption class="visually-hidden">Active API tokens</caption>
<thead><tr><th scope="col">Name</th><th scope="col">Id</th><th scope="col">Created</th><th scope="col">Last used <span class="hint">(to the minute)</span></th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
<tbody>${rows}</tbody></table></div>`
}
<p class="hint">Revoking is immediate: the API answers 401 to the token's next request. It cannot be undone.</p>`,
  );
}

/** Revoking asks first, naming the token by name, id and age (two tokens may share a name). */
export function revokeTokenPage(o: { session: GetSessionResponse; token: ApiToken }): string {
  const { session: s, token: t } = o;
  return layout(
    s,
    "tokens",
    "Revoke a token?",
    html`<div class="notice error" role="alert">
<p>Revoke the token <strong>“${t.name}”</strong> (<span class="mono">${t.id}</span>), created ${time(Number(t.createdMs))}, last used ${t.lastUsedMs > 0n ? time(Number(t.lastUsedMs)) : "never"}?</p>
<p>The API answers 401 to its next request, and SMTP refuses it. This cannot be undone.</p>
</div>
<div class="row">
<form class="inline" method="post" action="${PATHS.tokens}/${encodeURIComponent(t.id)}/revoke">${csrfField(s)}<button type="submit" class="danger">Revoke ${t.name} (${t.id})</button></form>
<a href="${PATHS.tokens}">Cancel, keep it</a>
</div>`,
  );
}

const RECORD_STATES: Record<string, string> = { verified: "ok", pending: "pending", failed: "bad" };

/** A domain's DNS records, as the API shows them, each name and value with a copy button. */
function domainRecords(d: SendingDomain, i: number): Html {
  const status = `copy-status-${i}`;
  const copyable = (id: string, label: string, text: string) =>
    html`<code id="${id}">${text}</code> <button type="button" class="secondary copy" data-copy="${id}" data-status="${status}" aria-label="Copy the ${label}" hidden>Copy</button>`;
  return html`<ul class="records">${d.records.map(
    (
      r,
      j,
    ) => html`<li><span class="badge ${RECORD_STATES[r.status] ?? "pending"}">${r.status}</span> <strong>${r.purpose}</strong> <code>${r.type}</code>
<dl class="record"><dt>Name</dt><dd>${copyable(`record-${i}-${j}-name`, `name of the ${r.purpose} record`, r.name)}</dd>
<dt>Value</dt><dd>${copyable(`record-${i}-${j}-value`, `value of the ${r.purpose} record`, r.value)}</dd></dl>
${r.reason ? html`<p class="hint">${r.reason}</p>` : html``}</li>`,
  )}</ul>
<p id="${status}" class="hint" role="status" aria-live="polite"></p>`;
}

export function domainsPage(o: {
  session: GetSessionResponse;
  domains: SendingDomain[];
  notice?: Notice;
  failed?: { name: string; detail: string };
  domain?: string;
}): string {
  const { session: s } = o;
  const rows = o.domains.map(
    (d, i) => html`<tr>
<th scope="row">${d.name}</th>
<td data-label="State">${d.verified ? html`<span class="badge ok">verified</span>` : html`<span class="badge pending">not verified</span>`}</td>
<td>${
      d.verified
        ? html`<p class="hint">Messages from ${d.name} are accepted. Its DNS records:</p>`
        : html`<p class="hint">Publish these DNS records, then press Verify (the first proves the domain is yours):</p>`
    }
${domainRecords(d, i)}
${
  d.verified
    ? html``
    : html`${o.failed?.name === d.name ? html`<p class="notice error" role="alert">Not verified yet: ${o.failed.detail}.</p>` : html``}
<form class="inline" method="post" action="${PATHS.domains}/${encodeURIComponent(d.name)}/verify">${csrfField(s)}<button type="submit" class="secondary" aria-label="Verify ${d.name}">Verify</button></form>`
}</td>
</tr>`,
  );
  return layout(
    s,
    "domains",
    "Sending domains",
    html`<p class="lead">The From address of every message must be on a verified domain of this organization; the API answers 403 <code>DOMAIN_NOT_VERIFIED</code> otherwise.</p>
${notice(o.notice)}
<h2>Add a domain</h2>
<form method="post" action="${PATHS.domains}">
${csrfField(s)}
<div class="row"><div class="field"><label for="domain">Domain <span class="hint">(e.g. mail.example.com)</span></label>
<input type="text" id="domain" name="domain" required maxlength="253" autocapitalize="none" spellcheck="false" value="${o.domain ?? ""}"></div>
<button type="submit">Add domain</button></div>
</form>
<h2>Domains</h2>
${
  o.domains.length === 0
    ? html`<p>No sending domains yet.</p>`
    : html`<div class="table-wrap"><table class="stack">
<caption class="visually-hidden">Sending domains</caption>
<thead><tr><th scope="col">Domain</th><th scope="col">State</th><th scope="col">Verification</th></tr></thead>
<tbody>${rows}</tbody></table></div>`
}
<p class="hint">Verify looks the record up in DNS. A new record can take a few minutes to be visible, depending on your DNS provider.</p>`,
  );
}

export function usagePage(o: { session: GetSessionResponse; usage: GetUsageResponse; figures?: Html }): string {
  const { session: s, usage: u } = o;
  const sum = (kind: (typeof CHART_KINDS)[number][0]) => u.refusals.reduce((n, m) => n + m[kind], 0);
  const plan = planName(u.plan);
  return layout(
    s,
    "usage",
    "Plan and usage",
    html`<div data-live>
<p class="lead">Plan <strong>${plan}</strong>: ${u.quota} requests per minute, a bucket of ${u.quota} refilled continuously (policy <code>"${plan}";q=${u.quota};w=60</code>), and at most 500 requests per second from one IP address.</p>
<h2>Request bucket now</h2>
<div class="cards">
<div class="card"><div class="figure" id="remaining">${u.remaining}</div><div class="label">requests left of ${u.quota}</div></div>
<div class="card"><div class="figure" id="reset">${u.resetSeconds} s</div><div class="label">until the bucket is full again</div></div>
</div>
<h2>Refused requests (429), last hour</h2>
<div class="cards">
${CHART_KINDS.map(
  ([kind, , label]) =>
    html`<div class="card"><div class="figure" id="refused-${kind}">${sum(kind)}</div><div class="label"><span class="swatch ${kind}"></span>${label}</div></div>`,
)}
</div>
${refusalChart(u.refusals)}
<ul class="legend" aria-hidden="true">${CHART_KINDS.map(([kind, , label]) => html`<li><span class="swatch ${kind}"></span>${label}</li>`)}</ul>
<p class="hint">Quota: over the plan's requests per minute. IP limit: over 500 requests per second from one address. Recipient: a recipient guard (<code>RECIPIENT_RATE_LIMITED</code>; a higher plan does not change it).</p>
<h2>Lanes</h2>
<div class="table-wrap"><table class="stack">
<caption class="visually-hidden">Your messages in each lane</caption>
<thead><tr><th scope="col">Lane</th><th scope="col" class="num">Your messages waiting</th><th scope="col" class="num">Your releases per second <span class="hint">(last 10 s)</span></th><th scope="col" class="num">Lane pace, all organizations</th></tr></thead>
<tbody>${u.lanes.map(
      (l) =>
        html`<tr><th scope="row">${laneName(l.lane)}</th><td class="num" data-label="Your messages waiting" id="depth-${laneName(l.lane)}">${l.depth}</td><td class="num" data-label="Your releases per second">${l.releasedPerSecond.toFixed(1)}</td><td class="num" data-label="Lane pace">${l.rate} per second</td></tr>`,
    )}</tbody></table></div>
${o.figures ?? html``}
<p class="hint">Updated ${time(Date.now())}. This page refreshes itself every 5 seconds while it is open; <a href="${PATHS.usage}">reload</a> to update it by hand.</p>
</div>`,
  );
}

/**
 * A page that only says something (an error, a refusal), with a link on (back to the console
 * unless `next` says where); with a session, inside the console's layout.
 */
export function messagePage(
  title: string,
  text: string,
  session?: GetSessionResponse,
  next: { href: string; label: string } = { href: PATHS.tokens, label: "Back to the console" },
): string {
  const content = html`<div class="notice error" role="alert">${text}</div><p><a href="${next.href}">${next.label}</a></p>`;
  if (session) return layout(session, undefined, title, content);
  return document_(title, html`<main class="signin" id="content"><h1>${title}</h1>${content}</main>`);
}
