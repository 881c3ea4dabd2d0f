import { Lane, type MessageInfo, type MessageStatsHour, MessageStatus } from "../gen/mailcore/limiter/v1/mail_pb";
import { laneName, normalizeMailbox } from "../mail/policy";
import { InvalidField } from "./invalid_field";
import { error, type Handler, iso, json } from "./respond";
import { paging, route } from "./resource";

// What happened to an organization's mail: the activity log (GET /api/v1/emails, one email at
// /emails/{id}) and the delivery figures over time (GET /api/v1/stats/emails), read from the records.

export const STATUS_NAMES: Record<number, string> = {
  [MessageStatus.QUEUED]: "queued",
  [MessageStatus.SENDING]: "sending",
  [MessageStatus.DELIVERED]: "delivered",
  [MessageStatus.DEFERRED]: "deferred",
  [MessageStatus.BOUNCED]: "bounced",
  [MessageStatus.FAILED]: "failed",
};
/** The names of the events of a message's history: its statuses, and the delayed notice. */
export const EVENT_NAMES: Record<number, string> = { ...STATUS_NAMES, [MessageStatus.DELAYED]: "delayed" };
/** A status by its name in the API (the list's filter, the console's). */
export const STATUS_OF_NAME: ReadonlyMap<string, MessageStatus> = new Map(
  Object.entries(STATUS_NAMES).map(([n, name]) => [name, Number(n) as MessageStatus]),
);

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;
/** The longest ranges of GET /api/v1/stats/emails: about a month of hours, about a year of days. */
export const MAX_STATS_HOURLY_DAYS = 31;
export const MAX_STATS_DAYS = 400;
const INTERVALS = {
  hour: { widthMs: HOUR_MS, defaultSpanMs: DAY_MS, maxDays: MAX_STATS_HOURLY_DAYS },
  day: { widthMs: DAY_MS, defaultSpanMs: 30 * DAY_MS, maxDays: MAX_STATS_DAYS },
} as const;

/** A message as a list shows it: without its events. */
export function emailListItem(m: MessageInfo) {
  return {
    id: m.id,
    status: STATUS_NAMES[m.status],
    lane: laneName(m.lane),
    from: m.from,
    to: m.to,
    subject: m.subject,
    tags: m.tags,
    createdAt: iso(m.createdAtMs),
    updatedAt: iso(m.updatedAtMs),
  };
}

/** A message with its attempts, events and tries at receivers (GET /api/v1/emails/{id}). */
export function emailJson(m: MessageInfo) {
  return {
    ...emailListItem(m),
    attempts: m.attempts,
    events: m.events.map((e) => ({ status: EVENT_NAMES[e.status], at: iso(e.atMs), detail: e.detail })),
    deliveryAttempts: m.deliveryAttempts.map((a) => ({
      at: iso(a.atMs),
      host: a.host,
      address: a.address,
      tls: a.tls,
      stage: a.stage,
      reply: a.reply,
      enhancedCode: a.enhancedCode,
    })),
  };
}

/** A query time the contract admitted as RFC 3339; undefined when absent. */
function timeParam(q: URLSearchParams, name: string): number | undefined {
  const v = q.get(name);
  return v === null ? undefined : Date.parse(v);
}

/** The list's filters from the query string, as the contract admitted them (the console's too). */
export function emailFilters(q: URLSearchParams) {
  const status = q.get("status");
  const lane = q.get("lane");
  const to = q.get("to");
  const afterMs = timeParam(q, "after");
  const beforeMs = timeParam(q, "before");
  if (afterMs !== undefined && beforeMs !== undefined && beforeMs <= afterMs)
    throw new InvalidField("before", "must be after `after`");
  return {
    status: status === null ? MessageStatus.UNSPECIFIED : STATUS_OF_NAME.get(status)!,
    lane: lane === null ? Lane.UNSPECIFIED : lane === "bulk" ? Lane.BULK : Lane.TRANSACTIONAL,
    toMailbox: to === null ? "" : normalizeMailbox(to),
    tag: q.get("tag") ?? "",
    // The epoch itself is "unbounded" on the wire: a bound there is one a millisecond later.
    afterMs: BigInt(afterMs === undefined ? 0 : Math.max(1, afterMs)),
    beforeMs: BigInt(beforeMs === undefined ? 0 : Math.max(1, beforeMs)),
  };
}

/**
 * The intervals of a stats request: whole intervals covering since..until. Without since, the
 * default span ends with the interval until falls in (the current one by default). Without
 * until, a since later than now is a range that has not begun: no intervals (until is since).
 */
export function statsRange(url: URL, nowMs: number) {
  const interval = (url.searchParams.get("interval") ?? "hour") as keyof typeof INTERVALS;
  const { widthMs, defaultSpanMs, maxDays } = INTERVALS[interval];
  const givenSince = timeParam(url.searchParams, "since");
  const givenUntil = timeParam(url.searchParams, "until");
  if (givenUntil === undefined && givenSince !== undefined && givenSince > nowMs) {
    const sinceMs = Math.floor(givenSince / widthMs) * widthMs;
    return { interval, widthMs, sinceMs, untilMs: sinceMs };
  }
  const until = givenUntil ?? nowMs;
  const untilMs = Math.floor(until / widthMs) * widthMs + (until % widthMs === 0 ? 0 : widthMs);
  const since = givenSince ?? untilMs - defaultSpanMs;
  if (until <= since) throw new InvalidField("until", "must be after `since`");
  const sinceMs = Math.floor(since / widthMs) * widthMs;
  if (sinceMs < 0) throw new InvalidField("since", "must not be before 1970");
  if (untilMs - sinceMs > maxDays * DAY_MS)
    throw new InvalidField("since", `must be at most ${maxDays} days before \`until\` by ${interval}`);
  return { interval, widthMs, sinceMs, untilMs };
}

/** Every interval of the range, oldest first, with the hours that fall in it added up. */
export function statsRows(range: { widthMs: number; sinceMs: number; untilMs: number }, hours: MessageStatsHour[]) {
  const { widthMs, sinceMs, untilMs } = range;
  const rows = Array.from({ length: (untilMs - sinceMs) / widthMs }, (_, i) => ({
    start: new Date(sinceMs + i * widthMs).toISOString(),
    accepted: 0,
    delivered: 0,
    bounced: 0,
    failed: 0,
    deferred: 0,
    complained: 0,
    opened: { human: 0, machine: 0 },
    clicked: { human: 0, machine: 0 },
    refused: { quota: 0, ip: 0, recipient: 0 },
  }));
  for (const h of hours) {
    const row = rows[Math.floor((Number(h.hourStartMs) - sinceMs) / widthMs)];
    if (!row) continue;
    row.accepted += Number(h.accepted);
    row.delivered += Number(h.delivered);
    row.bounced += Number(h.bounced);
    row.failed += Number(h.failed);
    row.deferred += Number(h.deferred);
    row.complained += Number(h.complained);
    row.opened.human += Number(h.opened);
    row.opened.machine += Number(h.openedMachine);
    row.clicked.human += Number(h.clicked);
    row.clicked.machine += Number(h.clickedMachine);
    row.refused.quota += Number(h.refusedQuota);
    row.refused.ip += Number(h.refusedIp);
    row.refused.recipient += Number(h.refusedRecipient);
  }
  return rows;
}

/** Complaints per delivered message over the rows (0 without deliveries), to 6 decimals. */
export function complaintRate(rows: readonly { delivered: number; complained: number }[]): number {
  const delivered = rows.reduce((n, r) => n + r.delivered, 0);
  const complained = rows.reduce((n, r) => n + r.complained, 0);
  return delivered === 0 ? 0 : Math.round((complained / delivered) * 1e6) / 1e6;
}

/** GET /api/v1/emails: a page of the activity log, filtered. */
export const listEmails = route(async ({ ports, records }, { req, headers }) => {
  const url = new URL(req.url);
  const page = paging(url);
  const res = await ports.activity.listMessages({ ...page, ...emailFilters(url.searchParams) }, records);
  return json(200, { data: res.messages.map(emailListItem), nextCursor: res.nextCursor || null }, headers);
});

/** GET /api/v1/emails/{id}: one message with its attempts and events. */
export const getEmail: Handler = async ({ ports }, { admission, headers, params }) => {
  const message = await ports.mail.getMessage(admission.ticket, params[0]!);
  if (!message) return error(404, "NOT_FOUND", `No email ${params[0]} in this organization.`, headers);
  return json(200, emailJson(message), headers);
};

/** GET /api/v1/stats/emails: the delivery figures by hour or day. */
export const emailStats = route(async ({ ports, records }, { req, headers }) => {
  const range = statsRange(new URL(req.url), Date.now());
  const res =
    range.untilMs === range.sinceMs
      ? { hours: [] }
      : await ports.activity.getMessageStats(
          { sinceMs: BigInt(range.sinceMs), untilMs: BigInt(range.untilMs) },
          records,
        );
  const data = statsRows(range, res.hours);
  return json(
    200,
    {
      interval: range.interval,
      since: new Date(range.sinceMs).toISOString(),
      until: new Date(range.untilMs).toISOString(),
      complaintRate: complaintRate(data),
      data,
    },
    headers,
  );
});
