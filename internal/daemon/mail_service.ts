import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type ServiceImpl } from "@connectrpc/connect";
import {
  type GetMessageRequest,
  type GetMessageStatsRequest,
  Lane,
  type ListMessagesRequest,
  type MailService,
  type MessageInfo,
  MessageInfoSchema,
  MessageStatus,
  type SendRequest,
  SendOutcome,
} from "../gen/mailcore/limiter/v1/mail_pb";
import type { MailStore } from "../hotstore/hotstore";
import { LANES, QUEUE_FULL_RETRY_MS } from "../mail/policy";
import type { MessageHistory } from "../model/history";
import type { MessageFilter } from "../records/history";
import type { Records } from "../records/records";
import { HOUR_MS } from "../records/stats";
import type { Accept } from "./accept";
import type { RefusalCounter } from "./refusals";
import { guard, pageCursor } from "./rpc_errors";
import { tenantOf } from "./tenant";

// The mail service (MailService): a send through the accept step, a message as it stands, the
// activity log and the hourly delivery figures, each for the organization of the call's ticket.

const MAX_PAGE = 100;
const DEFAULT_PAGE = 20;
/** The longest range of hourly counts one call reads: a little more than a year. */
export const MAX_STATS_HOURS = 400 * 24;

export interface MailDeps {
  /** A message's latest state is in the hot store until it is settled in the records. */
  mail: Pick<MailStore, "getMessage">;
  records: Pick<Records, "history" | "stats">;
  accept: Accept;
  refusals: Pick<RefusalCounter, "count">;
}

/** MailService's methods, by name. */
export function mailHandlers(deps: MailDeps): ServiceImpl<typeof MailService> {
  return {
    send: (req, ctx) => send(deps, tenantOf(ctx.values), req),
    getMessage: (req, ctx) => getMessage(deps, tenantOf(ctx.values), req),
    listMessages: (req, ctx) => listMessages(deps, tenantOf(ctx.values), req),
    getMessageStats: (req, ctx) => getMessageStats(deps, tenantOf(ctx.values), req),
  };
}

export async function send(deps: Pick<MailDeps, "accept" | "refusals">, orgId: string, req: SendRequest) {
  const email = req.email;
  if (!email?.fromAddress.includes("@") || !email.toAddress.includes("@")) {
    throw new ConnectError("email.from_address and email.to_address are required", Code.InvalidArgument);
  }
  if (req.lane !== Lane.TRANSACTIONAL && req.lane !== Lane.BULK)
    throw new ConnectError("lane must be transactional or bulk", Code.InvalidArgument);
  const result = await guard(() =>
    deps.accept({
      orgId,
      lane: req.lane,
      email,
      idempotencyKey: req.idempotencyKey,
      bodyHash: req.bodyHash,
    }),
  );
  switch (result.kind) {
    case "accepted":
      return { outcome: SendOutcome.ACCEPTED, messageId: result.messageId };
    case "replayed":
      return { outcome: SendOutcome.REPLAYED, messageId: result.messageId };
    case "conflict":
      return { outcome: SendOutcome.IDEMPOTENCY_CONFLICT };
    case "domain_not_verified":
      return { outcome: SendOutcome.DOMAIN_NOT_VERIFIED };
    case "limited":
      deps.refusals.count(orgId, "recipient");
      return {
        outcome: SendOutcome.RECIPIENT_LIMITED,
        retryAfterSeconds: Math.max(1, Math.ceil(result.retryAfterMs / 1_000)),
        reason: result.reason,
      };
    case "queue_full":
      return {
        outcome: SendOutcome.QUEUE_FULL,
        retryAfterSeconds: QUEUE_FULL_RETRY_MS / 1_000,
        reason: result.reason,
      };
    case "suppressed":
      return { outcome: SendOutcome.SUPPRESSED, reason: result.reason };
    case "bulk_paused":
      return { outcome: SendOutcome.BULK_PAUSED, reason: result.reason };
    case "miss":
      throw new ConnectError(`no organization ${orgId}`, Code.NotFound);
  }
}

export async function getMessage(deps: MailDeps, orgId: string, req: GetMessageRequest) {
  // The hot store has the latest of a message until it is settled in the records.
  const record = await guard(
    async () =>
      (await deps.mail.getMessage(orgId, req.messageId)) ?? (await deps.records.history.get(orgId, req.messageId)),
  );
  if (!record) throw new ConnectError(`no message ${req.messageId}`, Code.NotFound);
  return { message: toMessageInfo(record) };
}

/**
 * From the records: a message shows here once the history writer has written it (within a
 * flush, 200 ms), and its status as of the last flush.
 */
export async function listMessages(deps: MailDeps, orgId: string, req: ListMessagesRequest) {
  if (req.limit > MAX_PAGE) throw new ConnectError(`limit must be 1 to ${MAX_PAGE}`, Code.InvalidArgument);
  const filter = messageFilter(req);
  const cursor = pageCursor(req.cursor);
  const page = await guard(() => deps.records.history.list(orgId, filter, req.limit || DEFAULT_PAGE, cursor));
  return { messages: page.data.map(toMessageInfo), nextCursor: page.nextCursor ?? "" };
}

export async function getMessageStats(deps: MailDeps, orgId: string, req: GetMessageStatsRequest) {
  const since = Number(req.sinceMs);
  const until = Number(req.untilMs);
  if (since % HOUR_MS !== 0 || until % HOUR_MS !== 0 || since < 0 || until <= since)
    throw new ConnectError("since_ms and until_ms must be whole hours, since before until", Code.InvalidArgument);
  if ((until - since) / HOUR_MS > MAX_STATS_HOURS)
    throw new ConnectError(`at most ${MAX_STATS_HOURS} hours at once`, Code.InvalidArgument);
  const hours = await guard(() => deps.records.stats.hours(orgId, since, until));
  return {
    hours: hours.map((h) => ({
      hourStartMs: BigInt(h.hourStartMs),
      accepted: BigInt(h.accepted),
      delivered: BigInt(h.delivered),
      bounced: BigInt(h.bounced),
      failed: BigInt(h.failed),
      deferred: BigInt(h.deferred),
      refusedQuota: BigInt(h.refused_quota),
      refusedIp: BigInt(h.refused_ip),
      refusedRecipient: BigInt(h.refused_recipient),
      complained: BigInt(h.complained),
      opened: BigInt(h.opened),
      openedMachine: BigInt(h.opened_machine),
      clicked: BigInt(h.clicked),
      clickedMachine: BigInt(h.clicked_machine),
    })),
  };
}

/** The activity log's filter of a request: only what it sets; InvalidArgument for a status or lane that is none. */
export function messageFilter(
  req: Pick<ListMessagesRequest, "status" | "toMailbox" | "tag" | "lane" | "afterMs" | "beforeMs">,
): MessageFilter {
  if (req.status !== MessageStatus.UNSPECIFIED && !(req.status in MessageStatus))
    throw new ConnectError("status is not a message status", Code.InvalidArgument);
  if (req.lane !== Lane.UNSPECIFIED && !LANES.includes(req.lane))
    throw new ConnectError("lane must be transactional or bulk", Code.InvalidArgument);
  return {
    ...(req.status !== MessageStatus.UNSPECIFIED && { status: req.status }),
    ...(req.toMailbox !== "" && { toMailbox: req.toMailbox }),
    ...(req.tag !== "" && { tag: req.tag }),
    ...(req.lane !== Lane.UNSPECIFIED && { lane: req.lane }),
    ...(req.afterMs !== 0n && { afterMs: Number(req.afterMs) }),
    ...(req.beforeMs !== 0n && { beforeMs: Number(req.beforeMs) }),
  };
}

function toMessageInfo(r: MessageHistory): MessageInfo {
  return create(MessageInfoSchema, {
    id: r.id,
    lane: r.lane,
    status: r.status,
    from: r.from,
    to: r.to,
    subject: r.subject,
    tags: r.tags,
    createdAtMs: BigInt(r.createdMs),
    updatedAtMs: BigInt(r.updatedMs),
    attempts: r.attempts,
    events: r.events.map((e) => ({ status: e.status, atMs: BigInt(e.atMs), detail: e.detail })),
    deliveryAttempts: (r.deliveryAttempts ?? []).map((a) => ({ ...a, atMs: BigInt(a.atMs) })),
  });
}
