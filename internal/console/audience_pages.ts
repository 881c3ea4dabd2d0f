import { type Subscriber, type SubscriberEvent, SubscriberStatus } from "../gen/mailcore/limiter/v1/audience_pb";
import {
  type Campaign,
  CampaignStatus,
  type Workflow,
  type WorkflowRun,
} from "../gen/mailcore/limiter/v1/automation_pb";
import type { GetSessionResponse } from "../gen/mailcore/limiter/v1/console_pb";
import type { Suppression } from "../gen/mailcore/limiter/v1/suppressions_pb";
import { SUPPRESSION_REASONS, type SuppressionReason } from "../mail/suppression";
import { SUBSCRIBER_STATUS_NAMES } from "../api/audience";
import { CAMPAIGN_STATUS_NAMES } from "../api/campaigns";
import { type Html, html, time } from "../web/html";
import { layout, type Notice, notice, PATHS } from "./pages";

// The console's read-only pages of the audience and automation: subscribers (searched by email
// prefix, filtered by tag) and a subscriber's events, campaigns with their stats, workflows and
// a workflow's runs. Each list is one page of the daemon's list, with its cursor in the link to
// the next page; the filters travel with it.

/** A page of a list: the cursor it was asked with and the daemon's next one (empty on the last page). */
export interface Paged {
  cursor: string;
  nextCursor: string;
}

const href = (path: string, query: Record<string, string>) => {
  const q = new URLSearchParams(Object.entries(query).filter(([, v]) => v !== "")).toString();
  return q ? `${path}?${q}` : path;
};

/** The links between pages: the next one (its cursor), and back to the first once past it. */
function pager(path: string, query: Record<string, string>, p: Paged, what: string): Html {
  if (!p.cursor && !p.nextCursor) return html``;
  return html`<nav class="pager" aria-label="Pages of ${what}">
${p.cursor ? html`<a href="${href(path, query)}">First page</a>` : html``}
${p.nextCursor ? html`<a href="${href(path, { ...query, cursor: p.nextCursor })}" rel="next">Next page</a>` : html`<span class="hint">Last page</span>`}
</nav>`;
}

const NONE = html`<span class="hint">none</span>`;

const badge = (text: string, ok: boolean) => html`<span class="badge ${ok ? "ok" : "pending"}">${text}</span>`;
const subscriberStatus = (s: Subscriber) =>
  badge(SUBSCRIBER_STATUS_NAMES[s.status] ?? "unknown", s.status === SubscriberStatus.SUBSCRIBED);
const workflowState = (w: Workflow) => badge(w.active ? "active" : "paused", w.active);

const subscriberPath = (id: string) => `${PATHS.subscribers}/${encodeURIComponent(id)}`;
const workflowPath = (id: string) => `${PATHS.workflows}/${encodeURIComponent(id)}`;

const tagLinks = (tags: string[]) =>
  tags.length === 0
    ? NONE
    : html`<ul class="tags">${tags.map((t) => html`<li><a href="${href(PATHS.subscribers, { tag: t })}">${t}</a></li>`)}</ul>`;

export function subscribersPage(o: {
  session: GetSessionResponse;
  subscribers: Subscriber[];
  filter: { email: string; tag: string };
  paged: Paged;
  notice?: Notice;
}): string {
  const { filter } = o;
  const filtered = filter.email !== "" || filter.tag !== "";
  const rows = o.subscribers.map(
    (s) => html`<tr>
<th scope="row"><a href="${subscriberPath(s.id)}">${s.email}</a></th>
<td data-label="Name">${s.name || NONE}</td>
<td data-label="Status">${subscriberStatus(s)}</td>
<td data-label="Tags">${tagLinks(s.tags)}</td>
<td data-label="Created">${time(Number(s.createdAtMs))}</td>
</tr>`,
  );
  return layout(
    o.session,
    "subscribers",
    "Subscribers",
    html`<p class="lead">The audience of organization ${o.session.orgSlug}, newest first. Subscribers are added and changed through the API (<code>POST /api/v1/subscribers</code>) or the admin CLI's import.</p>
${notice(o.notice)}
<form method="get" action="${PATHS.subscribers}" role="search">
<div class="row"><div class="field"><label for="email">Email starts with</label>
<input type="text" id="email" name="email" maxlength="320" autocapitalize="none" spellcheck="false" value="${filter.email}"></div>
<div class="field"><label for="tag">Tag</label>
<input type="text" id="tag" name="tag" maxlength="64" autocapitalize="none" spellcheck="false" value="${filter.tag}"></div>
<button type="submit">Search</button>
${filtered ? html`<a href="${PATHS.subscribers}">Clear</a>` : html``}</div>
</form>
${
  o.subscribers.length === 0
    ? o.notice
      ? html``
      : html`<p>${filtered ? "No subscriber matches." : "No subscribers yet."}</p>`
    : html`<div class="table-wrap"><table class="stack">
<caption class="visually-hidden">Subscribers</caption>
<thead><tr><th scope="col">Email</th><th scope="col">Name</th><th scope="col">Status</th><th scope="col">Tags</th><th scope="col">Created</th></tr></thead>
<tbody>${rows}</tbody></table></div>`
}
${pager(PATHS.subscribers, filter, o.paged, "subscribers")}`,
  );
}

/** An event's data, a JSON object, as short readable text. */
function eventData(json: string): Html {
  const data = JSON.parse(json) as Record<string, unknown>;
  const entries = Object.entries(data);
  if (entries.length === 0) return NONE;
  return html`<code>${entries.map(([k, v]) => `${k}: ${typeof v === "string" ? v : JSON.stringify(v)}`).join(", ")}</code>`;
}

export function subscriberPage(o: {
  session: GetSessionResponse;
  subscriber: Subscriber;
  events: SubscriberEvent[];
  paged: Paged;
}): string {
  const s = o.subscriber;
  const fields = JSON.parse(s.fieldsJson) as Record<string, unknown>;
  const rows = o.events.map(
    (e) => html`<tr>
<th scope="row" class="mono">${e.type}</th>
<td data-label="At">${time(Number(e.atMs))}</td>
<td data-label="Data">${eventData(e.dataJson)}</td>
</tr>`,
  );
  return layout(
    o.session,
    "subscribers",
    s.email,
    html`<p><a href="${PATHS.subscribers}">All subscribers</a></p>
<dl class="record">
<dt>Id</dt><dd class="mono">${s.id}</dd>
<dt>Name</dt><dd>${s.name || NONE}</dd>
<dt>Status</dt><dd>${subscriberStatus(s)}</dd>
<dt>Tags</dt><dd>${tagLinks(s.tags)}</dd>
<dt>Fields</dt><dd>${Object.keys(fields).length === 0 ? NONE : html`<code>${JSON.stringify(fields)}</code>`}</dd>
<dt>Created</dt><dd>${time(Number(s.createdAtMs))}</dd>
<dt>Updated</dt><dd>${time(Number(s.updatedAtMs))}</dd>
</dl>
<h2>Events</h2>
${
  o.events.length === 0
    ? html`<p>No events.</p>`
    : html`<div class="table-wrap"><table class="stack">
<caption class="visually-hidden">Events of ${s.email}, newest first</caption>
<thead><tr><th scope="col">Event</th><th scope="col">At</th><th scope="col">Data</th></tr></thead>
<tbody>${rows}</tbody></table></div>`
}
${pager(subscriberPath(s.id), {}, o.paged, "events")}`,
  );
}

export function campaignsPage(o: { session: GetSessionResponse; campaigns: Campaign[]; paged: Paged }): string {
  const rows = o.campaigns.map((c) => {
    const st = c.stats;
    const status = CAMPAIGN_STATUS_NAMES[c.status] ?? "unknown";
    return html`<tr>
<th scope="row">${c.name}<div class="hint">${c.subject}</div></th>
<td data-label="Status">${badge(status, c.status === CampaignStatus.SENT)}${c.status === CampaignStatus.SCHEDULED ? html`<div class="hint">at ${time(Number(c.scheduledAtMs))}</div>` : html``}${c.detail ? html`<div class="hint">${c.detail}</div>` : html``}</td>
<td data-label="Audience">${c.audienceTags.length === 0 ? "every subscriber" : c.audienceTags.join(", ")}</td>
<td class="num" data-label="Recipients">${st?.recipients ?? 0n}</td>
<td class="num" data-label="Queued">${st?.queued ?? 0n}</td>
<td class="num" data-label="Delivered">${st?.delivered ?? 0n}</td>
<td class="num" data-label="Bounced">${st?.bounced ?? 0n}</td>
<td class="num" data-label="Failed">${st?.failed ?? 0n}</td>
<td class="num" data-label="Skipped">${st?.skipped ?? 0n}</td>
<td class="num" data-label="Suppressed">${st?.suppressed ?? 0n}</td>
<td data-label="Created">${time(Number(c.createdAtMs))}</td>
</tr>`;
  });
  return layout(
    o.session,
    "campaigns",
    "Campaigns",
    html`<p class="lead">Campaigns of organization ${o.session.orgSlug}, newest first, with what became of their messages. Campaigns are made and sent through the API (<code>POST /api/v1/campaigns</code>).</p>
${
  o.campaigns.length === 0
    ? html`<p>No campaigns yet.</p>`
    : html`<div class="table-wrap"><table class="stack">
<caption class="visually-hidden">Campaigns and their stats</caption>
<thead><tr><th scope="col">Campaign</th><th scope="col">Status</th><th scope="col">Audience</th><th scope="col" class="num">Recipients</th><th scope="col" class="num">Queued</th><th scope="col" class="num">Delivered</th><th scope="col" class="num">Bounced</th><th scope="col" class="num">Failed</th><th scope="col" class="num">Skipped</th><th scope="col" class="num">Suppressed</th><th scope="col">Created</th></tr></thead>
<tbody>${rows}</tbody></table></div>`
}
<p class="hint">Recipients: the audience's subscribers when sending started. Skipped: unsubscribed, on the suppression list (counted under Suppressed too), or bounced before; nothing was sent to them.</p>
${pager(PATHS.campaigns, {}, o.paged, "campaigns")}`,
  );
}

const REASON_NAMES: Record<SuppressionReason, string> = {
  hard_bounce: "hard bounce",
  soft_bounce: "soft bounces",
  complaint: "complaint",
  manual: "added by the organization",
};

export function suppressionsPage(o: {
  session: GetSessionResponse;
  suppressions: Suppression[];
  reason: string;
  paged: Paged;
  notice?: Notice;
}): string {
  const rows = o.suppressions.map(
    (s) => html`<tr>
<th scope="row">${s.email}</th>
<td data-label="Reason">${REASON_NAMES[s.reason as SuppressionReason] ?? s.reason}</td>
<td data-label="Detail">${s.detail || NONE}</td>
<td data-label="Message">${s.messageId ? html`<a href="${PATHS.emails}/${encodeURIComponent(s.messageId)}">${s.messageId}</a>` : NONE}</td>
<td data-label="Since">${time(Number(s.createdAtMs))}</td>
</tr>`,
  );
  const option = (value: string, label: string) =>
    html`<option value="${value}"${value === o.reason ? html` selected` : html``}>${label}</option>`;
  return layout(
    o.session,
    "suppressions",
    "Suppressions",
    html`<p class="lead">Addresses organization ${o.session.orgSlug} sends nothing to, newest first: a send to one is refused at once, a campaign skips it. Hard bounces, repeated soft bounces and complaints put an address here; addresses are added and removed through the API (<code>POST /api/v1/suppressions</code>, <code>DELETE /api/v1/suppressions/{email}</code>).</p>
${notice(o.notice)}
<form method="get" action="${PATHS.suppressions}" role="search">
<div class="row"><div class="field"><label for="reason">Reason</label>
<select id="reason" name="reason">${option("", "every reason")}${SUPPRESSION_REASONS.map((r) => option(r, REASON_NAMES[r]))}</select></div>
<button type="submit">Show</button></div>
</form>
${
  o.suppressions.length === 0
    ? o.notice
      ? html``
      : html`<p>${o.reason ? "No address is listed for this reason." : "No suppressed addresses."}</p>`
    : html`<div class="table-wrap"><table class="stack">
<caption class="visually-hidden">Suppressed addresses</caption>
<thead><tr><th scope="col">Email</th><th scope="col">Reason</th><th scope="col">Detail</th><th scope="col">Message</th><th scope="col">Since</th></tr></thead>
<tbody>${rows}</tbody></table></div>`
}
${pager(PATHS.suppressions, { reason: o.reason }, o.paged, "suppressed addresses")}`,
  );
}

const trigger = (w: Workflow) => (w.triggerType === "tag.added" ? `tag “${w.triggerTag}” added` : "subscriber created");
const stepTypes = (w: Workflow) => (JSON.parse(w.stepsJson) as { type: string }[]).map((s) => s.type);

export function workflowsPage(o: { session: GetSessionResponse; workflows: Workflow[]; paged: Paged }): string {
  const rows = o.workflows.map(
    (w) => html`<tr>
<th scope="row"><a href="${workflowPath(w.id)}">${w.name}</a></th>
<td data-label="Trigger">${trigger(w)}</td>
<td data-label="Steps">${stepTypes(w).join(" → ")}</td>
<td data-label="State">${workflowState(w)}</td>
<td data-label="Created">${time(Number(w.createdAtMs))}</td>
</tr>`,
  );
  return layout(
    o.session,
    "workflows",
    "Workflows",
    html`<p class="lead">Workflows of organization ${o.session.orgSlug}, newest first: steps run for a subscriber when it is created or tagged. Open one to see its runs. Workflows are made through the API (<code>POST /api/v1/workflows</code>).</p>
${
  o.workflows.length === 0
    ? html`<p>No workflows yet.</p>`
    : html`<div class="table-wrap"><table class="stack">
<caption class="visually-hidden">Workflows</caption>
<thead><tr><th scope="col">Workflow</th><th scope="col">Trigger</th><th scope="col">Steps</th><th scope="col">State</th><th scope="col">Created</th></tr></thead>
<tbody>${rows}</tbody></table></div>`
}
${pager(PATHS.workflows, {}, o.paged, "workflows")}`,
  );
}

export function workflowPage(o: {
  session: GetSessionResponse;
  workflow: Workflow;
  runs: WorkflowRun[];
  paged: Paged;
}): string {
  const w = o.workflow;
  const steps = stepTypes(w);
  const rows = o.runs.map(
    (r) => html`<tr>
<th scope="row" class="mono">${r.id}</th>
<td data-label="Subscriber"><a class="mono" href="${subscriberPath(r.subscriberId)}">${r.subscriberId}</a></td>
<td data-label="State">${badge(r.state, r.state === "completed")}${r.detail ? html`<div class="hint">${r.detail}</div>` : html``}</td>
<td data-label="Step">${r.state === "active" ? `next: ${r.step + 1} of ${steps.length} (${steps[r.step] ?? "?"})` : `${r.step} of ${steps.length} ran`}</td>
<td class="num" data-label="Attempts">${r.attempts}</td>
<td data-label="${r.state === "active" ? "Next step at" : "Updated"}">${time(Number(r.state === "active" ? r.dueAtMs : r.updatedAtMs))}</td>
<td data-label="Started">${time(Number(r.createdAtMs))}</td>
</tr>`,
  );
  return layout(
    o.session,
    "workflows",
    w.name,
    html`<p><a href="${PATHS.workflows}">All workflows</a></p>
<dl class="record">
<dt>Id</dt><dd class="mono">${w.id}</dd>
<dt>Trigger</dt><dd>${trigger(w)}</dd>
<dt>Steps</dt><dd>${steps.map((t, i) => html`${i > 0 ? " → " : ""}<span>${i + 1}. ${t}</span>`)}</dd>
<dt>State</dt><dd>${workflowState(w)}</dd>
<dt>Created</dt><dd>${time(Number(w.createdAtMs))}</dd>
</dl>
<h2>Runs</h2>
${
  o.runs.length === 0
    ? html`<p>No runs yet.</p>`
    : html`<div class="table-wrap"><table class="stack">
<caption class="visually-hidden">Runs of ${w.name}, newest first</caption>
<thead><tr><th scope="col">Run</th><th scope="col">Subscriber</th><th scope="col">State</th><th scope="col">Step</th><th scope="col" class="num">Attempts</th><th scope="col">Next step or updated</th><th scope="col">Started</th></tr></thead>
<tbody>${rows}</tbody></table></div>`
}
${pager(workflowPath(w.id), {}, o.paged, "runs")}`,
  );
}
