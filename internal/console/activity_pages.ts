import type { GetSessionResponse } from "../gen/mailcore/limiter/v1/console_pb";
import type { MessageInfo, MessageStatsHour } from "../gen/mailcore/limiter/v1/mail_pb";
import type { WebhookDelivery, WebhookEndpoint } from "../gen/mailcore/limiter/v1/webhooks_pb";
import { EVENT_NAMES, STATUS_NAMES, statsRows } from "../api/activity";
import { laneName } from "../mail/policy";
import { type Html, html, time } from "../web/html";
import { barChart, type Series } from "./chart";
import { csrfField, layout, type Notice, notice, PATHS } from "./pages";

// The console's pages of what happened to the organization's mail: the activity log and a
// message's events, the webhooks with their health and deliveries, and the delivery figures
// of the usage page. They read what the API reads, for the session's organization.

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

const when = (ms: bigint) => (ms === 0n ? html`never` : time(Number(ms)));
const statusBadge = (status: string) =>
  html`<span class="badge ${status === "delivered" ? "ok" : status === "bounced" || status === "failed" ? "bad" : "pending"}">${status}</span>`;

/** The activity log's filters as GET /api/v1/emails takes them (which checks them); after and before in RFC 3339. */
export interface EmailFilterForm {
  status: string;
  to: string;
  tag: string;
  lane: string;
  after: string;
  before: string;
}

/** An RFC 3339 time as a datetime input shows it: UTC, to the second; a value that is none as it is. */
function datetimeInput(value: string): string {
  const ms = Date.parse(value);
  return value === "" || Number.isNaN(ms) ? value : new Date(ms).toISOString().slice(0, 19);
}

export function emailsPage(o: {
  session: GetSessionResponse;
  filters: EmailFilterForm;
  messages: MessageInfo[];
  nextCursor: string;
  notice?: Notice;
}): string {
  const { session: s, filters: f } = o;
  const option = (value: string, label: string, current: string) =>
    html`<option value="${value}"${value === current ? html` selected` : html``}>${label}</option>`;
  const query = new URLSearchParams(Object.entries(f).filter(([, v]) => v !== ""));
  const next = o.nextCursor ? `${PATHS.emails}?${new URLSearchParams([...query, ["cursor", o.nextCursor]])}` : "";
  const rows = o.messages.map(
    (m) => html`<tr>
<th scope="row"><a href="${PATHS.emails}/${encodeURIComponent(m.id)}">${m.subject || "(no subject)"}</a></th>
<td data-label="To">${m.to}</td>
<td data-label="Status">${statusBadge(STATUS_NAMES[m.status] ?? "")}</td>
<td data-label="Lane">${laneName(m.lane)}</td>
<td data-label="Tags">${m.tags.join(", ")}</td>
<td data-label="Accepted">${time(Number(m.createdAtMs))}</td>
</tr>`,
  );
  return layout(
    s,
    "emails",
    "Emails",
    html`<p class="lead">Every message of organization ${s.orgSlug}, newest first. Open one for its events.</p>
${notice(o.notice)}
<form method="get" action="${PATHS.emails}" class="filters">
<div class="row">
<div class="field"><label for="status">Status</label><select id="status" name="status">${option("", "any", f.status)}${Object.values(STATUS_NAMES).map((st) => option(st, st, f.status))}</select></div>
<div class="field"><label for="lane">Lane</label><select id="lane" name="lane">${option("", "any", f.lane)}${option("transactional", "transactional", f.lane)}${option("bulk", "bulk", f.lane)}</select></div>
<div class="field"><label for="to">To <span class="hint">(a mailbox)</span></label><input type="email" id="to" name="to" value="${f.to}" autocapitalize="none" spellcheck="false"></div>
<div class="field"><label for="tag">Tag</label><input type="text" id="tag" name="tag" value="${f.tag}" pattern="[A-Za-z0-9_\\-]{1,64}" autocapitalize="none" spellcheck="false"></div>
<div class="field"><label for="after">After <span class="hint">(UTC, accepted at or after)</span></label><input type="datetime-local" id="after" name="after" value="${datetimeInput(f.after)}" step="1"></div>
<div class="field"><label for="before">Before <span class="hint">(UTC, accepted before)</span></label><input type="datetime-local" id="before" name="before" value="${datetimeInput(f.before)}" step="1"></div>
<button type="submit">Filter</button>
</div>
</form>
${
  o.messages.length === 0
    ? html`<p>No messages${query.size > 0 ? html` match these filters` : html` yet`}.</p>`
    : html`<div class="table-wrap"><table class="stack">
<caption class="visually-hidden">Messages, newest first</caption>
<thead><tr><th scope="col">Subject</th><th scope="col">To</th><th scope="col">Status</th><th scope="col">Lane</th><th scope="col">Tags</th><th scope="col">Accepted</th></tr></thead>
<tbody>${rows}</tbody></table></div>`
}
${next ? html`<p><a class="next" href="${next}" rel="next">Older messages</a></p>` : html``}`,
  );
}

export function emailPage(o: { session: GetSessionResponse; message: MessageInfo }): string {
  const { session: s, message: m } = o;
  const events = m.events.map(
    (e) => html`<tr>
<th scope="row">${statusBadge(EVENT_NAMES[e.status] ?? "")}</th>
<td data-label="At">${time(Number(e.atMs))}</td>
<td data-label="Detail">${e.detail}</td>
</tr>`,
  );
  return layout(
    s,
    "emails",
    m.subject || "(no subject)",
    html`<p><a href="${PATHS.emails}">All emails</a></p>
<dl class="facts">
<dt>Id</dt><dd class="mono">${m.id}</dd>
<dt>Status</dt><dd>${statusBadge(STATUS_NAMES[m.status] ?? "")}</dd>
<dt>From</dt><dd>${m.from}</dd>
<dt>To</dt><dd>${m.to}</dd>
<dt>Lane</dt><dd>${laneName(m.lane)}</dd>
<dt>Tags</dt><dd>${m.tags.length ? m.tags.join(", ") : "none"}</dd>
<dt>Delivery attempts</dt><dd>${m.attempts}</dd>
<dt>Accepted</dt><dd>${time(Number(m.createdAtMs))}</dd>
</dl>
<h2>Events</h2>
<div class="table-wrap"><table class="stack">
<caption class="visually-hidden">The message's events, oldest first</caption>
<thead><tr><th scope="col">Status</th><th scope="col">At</th><th scope="col">Detail</th></tr></thead>
<tbody>${events}</tbody></table></div>
${m.deliveryAttempts.length === 0 ? html`` : triesTable(m)}`,
  );
}

/** Each try at a receiver: when, the host and address, the channel, where it ended, the reply. */
function triesTable(m: MessageInfo) {
  const rows = m.deliveryAttempts.map(
    (a) => html`<tr>
<th scope="row">${time(Number(a.atMs))}</th>
<td data-label="Host">${a.host || "none"}${a.address ? html` <span class="mono">[${a.address}]</span>` : html``}</td>
<td data-label="TLS">${a.tls || "unknown"}</td>
<td data-label="Stage">${a.stage}</td>
<td data-label="Reply">${a.reply}${a.enhancedCode ? html` <span class="mono">(${a.enhancedCode})</span>` : html``}</td>
</tr>`,
  );
  return html`<h2>Tries at receivers</h2>
<div class="table-wrap"><table class="stack">
<caption class="visually-hidden">Each try at a receiver, oldest first</caption>
<thead><tr><th scope="col">At</th><th scope="col">Host</th><th scope="col">TLS</th><th scope="col">Stage</th><th scope="col">Reply</th></tr></thead>
<tbody>${rows}</tbody></table></div>`;
}

const DELIVERY_STATES = ["", "pending", "delivered", "failed"];

/** Where an endpoint's deliveries are paged, older than the cursor's (the first page without one). */
const deliveriesPath = (webhookId: string, cursor = "") =>
  `${PATHS.webhooks}/${encodeURIComponent(webhookId)}/deliveries${cursor ? `?cursor=${encodeURIComponent(cursor)}` : ""}`;

/** One line per attempt, each with the start of the receiver's answer (escaped, wrapped on a narrow screen). */
const attemptsCell = (d: WebhookDelivery) =>
  d.attempts.map(
    (a) =>
      html`<div>#${a.attempt} ${time(Number(a.atMs))}: ${a.statusCode || "no answer"}, ${a.durationMs} ms${a.error ? html` (${a.error})` : html``}</div>${a.responseExcerpt ? html`<pre class="excerpt" aria-label="Answer of attempt ${a.attempt}">${a.responseExcerpt}</pre>` : html``}`,
  );

/** An endpoint's deliveries, newest first, with a replay button for each finished one. */
function deliveriesTable(
  s: GetSessionResponse,
  webhookId: string,
  caption: string,
  deliveries: WebhookDelivery[],
  empty = "No deliveries yet.",
): Html {
  if (deliveries.length === 0) return html`<p>${empty}</p>`;
  const rows = deliveries.map((d) => {
    const state = DELIVERY_STATES[d.state] ?? "";
    return html`<tr>
<th scope="row">${d.eventType}</th>
<td data-label="State">${statusBadge(state)}</td>
<td data-label="Attempts">${attemptsCell(d)}</td>
<td data-label="Created">${time(Number(d.createdAtMs))}</td>
<td>${
      state === "pending"
        ? html`<span class="hint">next attempt ${when(d.nextAttemptAtMs)}</span>`
        : html`<form class="inline" method="post" action="${PATHS.webhooks}/${encodeURIComponent(webhookId)}/deliveries/${encodeURIComponent(d.id)}/retry">${csrfField(s)}<button type="submit" class="secondary" aria-label="Replay ${d.eventType} delivery ${d.id}">Replay</button></form>`
    }</td>
</tr>`;
  });
  return html`<div class="table-wrap"><table class="stack">
<caption class="visually-hidden">${caption}</caption>
<thead><tr><th scope="col">Event</th><th scope="col">State</th><th scope="col">Attempts</th><th scope="col">Created</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
<tbody>${rows}</tbody></table></div>`;
}

const olderLink = (webhookId: string, cursor: string) =>
  cursor
    ? html`<p><a class="next" href="${deliveriesPath(webhookId, cursor)}" rel="next">Older deliveries</a></p>`
    : html``;

export function webhooksPage(o: {
  session: GetSessionResponse;
  endpoints: { endpoint: WebhookEndpoint; deliveries: WebhookDelivery[]; nextCursor: string }[];
  nextCursor: string;
  notice?: Notice;
}): string {
  const { session: s } = o;
  const section = ({ endpoint: e, deliveries, nextCursor }: (typeof o.endpoints)[number]) => {
    const health =
      e.disabledAtMs !== 0n
        ? html`<span class="badge bad">disabled</span> ${e.disabledReason} (${time(Number(e.disabledAtMs))})`
        : e.consecutiveFailures > 0
          ? html`<span class="badge bad">failing</span> ${e.consecutiveFailures} failed in a row`
          : html`<span class="badge ok">healthy</span>`;
    return html`<section class="webhook" aria-labelledby="wh-${e.id}">
<h2 id="wh-${e.id}" class="mono">${e.url}</h2>
<p>${health}</p>
<dl class="facts">
<dt>Id</dt><dd class="mono">${e.id}</dd>
<dt>Events</dt><dd>${e.events.join(", ")}</dd>
<dt>Last success</dt><dd>${when(e.lastSuccessAtMs)}</dd>
<dt>Last failure</dt><dd>${when(e.lastFailureAtMs)}</dd>
</dl>
<form class="inline" method="post" action="${PATHS.webhooks}/${encodeURIComponent(e.id)}/test">${csrfField(s)}<button type="submit" class="secondary" aria-label="Send a test event to ${e.url}">Send a test event</button></form>
<h3>Recent deliveries</h3>
${deliveriesTable(s, e.id, `Recent deliveries to ${e.url}`, deliveries)}
${olderLink(e.id, nextCursor)}
</section>`;
  };
  return layout(
    s,
    "webhooks",
    "Webhooks",
    html`<p class="lead">The endpoints of organization ${s.orgSlug} with their health and their last deliveries. Create and delete them with the API (<code>POST /api/v1/webhooks</code>).</p>
${notice(o.notice)}
${o.endpoints.length === 0 ? html`<p>No webhooks yet.</p>` : o.endpoints.map(section)}
${o.nextCursor ? html`<p><a class="next" href="${PATHS.webhooks}?cursor=${encodeURIComponent(o.nextCursor)}" rel="next">More webhooks</a></p>` : html``}`,
  );
}

/** One page of an endpoint's deliveries, older than the page before (the API's cursor). */
export function webhookDeliveriesPage(o: {
  session: GetSessionResponse;
  webhookId: string;
  /** The page's own cursor (empty: the newest). */
  cursor: string;
  deliveries: WebhookDelivery[];
  nextCursor: string;
}): string {
  const { session: s } = o;
  return layout(
    s,
    "webhooks",
    `Deliveries of ${o.webhookId}`,
    html`<p class="lead">The deliveries of webhook <span class="mono">${o.webhookId}</span>, newest first, each with its attempts and the start of the receiver's answers.</p>
<p><a href="${PATHS.webhooks}">All webhooks</a></p>
${deliveriesTable(s, o.webhookId, `Deliveries of ${o.webhookId}`, o.deliveries, o.cursor ? "No older deliveries." : undefined)}
${olderLink(o.webhookId, o.nextCursor)}`,
  );
}

const FIGURES: readonly Series[] = [
  ["accepted", "#1d4ed8", "sent"],
  ["delivered", "#1e6b30", "delivered"],
  ["bounced", "#a4161a", "bounced"],
];

/**
 * The usage page's delivery figures from the hourly counts since the earlier of 30 days ago
 * and the month's start: the last 24 hours by hour, the last 30 days by day, this month's volume.
 */
export function deliveryFigures(hours: MessageStatsHour[], nowMs: number): Html {
  const hourEnd = Math.floor(nowMs / HOUR_MS) * HOUR_MS + HOUR_MS;
  const dayEnd = Math.floor(nowMs / DAY_MS) * DAY_MS + DAY_MS;
  const byHour = statsRows({ widthMs: HOUR_MS, sinceMs: hourEnd - DAY_MS, untilMs: hourEnd }, hours);
  const byDay = statsRows({ widthMs: DAY_MS, sinceMs: dayEnd - 30 * DAY_MS, untilMs: dayEnd }, hours);
  const now = new Date(nowMs);
  const monthStart = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1);
  const month = hours.filter((h) => Number(h.hourStartMs) >= monthStart).reduce((n, h) => n + Number(h.accepted), 0);
  const sum = (rows: typeof byHour, k: "accepted" | "delivered" | "bounced") => rows.reduce((n, r) => n + r[k], 0);
  const chart = (id: string, title: string, rows: typeof byHour, axis: readonly [string, string, string]) =>
    barChart({
      id,
      title,
      description: `${sum(rows, "accepted")} sent, ${sum(rows, "delivered")} delivered, ${sum(rows, "bounced")} bounced.`,
      series: FIGURES,
      stacked: false,
      axis,
      slots: rows.map((r) => ({
        title: `${r.start.slice(0, 16).replace("T", " ")} UTC: ${r.accepted} sent, ${r.delivered} delivered, ${r.bounced} bounced`,
        values: { accepted: r.accepted, delivered: r.delivered, bounced: r.bounced },
      })),
    });
  const legend = html`<ul class="legend" aria-hidden="true">${FIGURES.map(([, , label]) => html`<li><span class="swatch ${label}"></span>${label}</li>`)}</ul>`;
  return html`<h2>Sent, delivered and bounced</h2>
<div class="cards">
<div class="card"><div class="figure" id="month-volume">${month}</div><div class="label">sent this month (UTC)</div></div>
<div class="card"><div class="figure" id="day-delivered">${sum(byHour, "delivered")}</div><div class="label">delivered, last 24 hours</div></div>
<div class="card"><div class="figure" id="day-bounced">${sum(byHour, "bounced")}</div><div class="label">bounced, last 24 hours</div></div>
</div>
${chart("chart-24h", "Sent, delivered and bounced per hour, last 24 hours", byHour, ["24 h ago", "12 h ago", "now"])}
${legend}
${chart("chart-30d", "Sent, delivered and bounced per day, last 30 days", byDay, ["30 days ago", "15 days ago", "today"])}
${legend}`;
}
