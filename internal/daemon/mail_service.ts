import { create, fromJsonString, toJsonString } from "@bufbuild/protobuf";
import { Code, type ConnectRouter, ConnectError } from "@connectrpc/connect";
import { randomBytes } from "node:crypto";
import { type Clock, delayUntil } from "../clock/clock";
import {
  DeliveryOutcome,
  DeliveryService,
  type Email,
  EmailSchema,
  Lane,
  LaneService,
  MailService,
  type MessageInfo,
  MessageInfoSchema,
  MessageStatus,
  SendOutcome,
} from "../gen/mailcore/limiter/v1/mail_pb";
import type { Lanes } from "../lanes/lanes";
import { aheadOf, type ReleaseRecord } from "../lanes/scheduler";
import { Notifier } from "../lanes/notifier";
import { domainOf, fixtureKind, GUARD_LIMITS, IDEMPOTENCY_TTL_MS, LANES, normalizeMailbox } from "../mail/policy";
import type { DeliveryPolicy, EnqueueInput, EnqueueResult, MailStore } from "../hotstore/hotstore";
import type { MessageHistory } from "../model/history";
import type { MessageFilter } from "../records/history";
import type { Records } from "../records/records";
import { HOUR_MS } from "../records/stats";
import type { Projection } from "./projection";
import type { RefusalCounter } from "./refusals";
import { guard, pageCursor } from "./service";

const RELEASE_RING = 20_000;
const MAX_IN_FLIGHT = 256;
/** How long an idle lease stream waits for a release before it looks again anyway (a signal can be lost). */
const IDLE_LOOK_MS = 30_000;
const MAX_PAGE = 100;
const DEFAULT_PAGE = 20;
/** The longest range of hourly counts one call reads: a little more than a year. */
export const MAX_STATS_HOURS = 400 * 24;

export interface MailDeps {
  hot: MailStore;
  records: Records;
  projection: Projection;
  clock: Clock;
  laneRate: number;
  visibilityMs: number;
  policy: DeliveryPolicy;
  refusals: RefusalCounter;
}

/** What the daemon keeps in memory about sending: recent releases and who is waiting for work. */
export class MailRuntime {
  readonly work = new Notifier();
  /** Aborted at shutdown: the lease streams end (their leases stay with the workers). */
  readonly stopping = new AbortController();
  private readonly releases = new Map<Lane, ReleaseRecord[]>(LANES.map((lane) => [lane, []]));
  /** Lease id to the stream that holds it (lease id -> expiry), so an ack frees room on that stream. */
  readonly leaseOwners = new Map<string, Map<string, number>>();
  /** The recovery of the lanes, once they run: told when a lease runs out or a retry is due. */
  recovery: Pick<Lanes, "dueBy"> | undefined;

  /** onChange: a message changed here (accepted, released, acked): the records writer has work. */
  constructor(readonly onChange: () => void = () => {}) {}

  dueBy(ms: number): void {
    this.recovery?.dueBy(ms);
  }

  recordRelease(r: ReleaseRecord): void {
    const ring = this.releases.get(r.lane)!;
    ring.push(r);
    if (ring.length > RELEASE_RING) ring.splice(0, ring.length - RELEASE_RING);
    this.work.notifyAll();
    this.onChange();
  }

  /** The releases whose slots are at or after sinceMs (and at or before untilMs). */
  releasesSince(lane: Lane, sinceMs: number, untilMs = Number.POSITIVE_INFINITY): ReleaseRecord[] {
    return (this.releases.get(lane) ?? []).filter((r) => r.slotMs >= sinceMs && r.slotMs <= untilMs);
  }
}

export function newMessageId(): string {
  return `msg_${randomBytes(12).toString("hex")}`;
}

/** One send as the accept step takes it: POST /api/v1/emails, or a campaign's message. */
export interface SendInput {
  orgId: string;
  lane: Lane;
  email: Email;
  idempotencyKey?: string;
  bodyHash?: string;
  /** Fixed by the caller (a campaign reserves its message ids); made here otherwise. */
  messageId?: string;
}

/**
 * The accept step of every send, with every guard of its lane (verified From domain; on the
 * transactional lane the bounce cooldown and the recipient guards), atomically with the
 * enqueue. An organization missing from the projection is rebuilt from the records once.
 */
export function acceptor(deps: Pick<MailDeps, "hot" | "projection" | "clock">, runtime: MailRuntime) {
  const { hot, projection, clock } = deps;
  const enqueue = async (input: EnqueueInput): Promise<EnqueueResult> => {
    const first = await hot.enqueue(input, clock.nowMs());
    if (first.kind !== "miss") return first;
    await projection.rebuildOrg(input.orgId);
    const again = await hot.enqueue(input, clock.nowMs());
    if (again.kind === "miss") throw new ConnectError(`no organization ${input.orgId}`, Code.NotFound);
    return again;
  };
  return async (req: SendInput): Promise<EnqueueResult> => {
    const { email } = req;
    const transactional = req.lane === Lane.TRANSACTIONAL;
    const result = await enqueue({
      orgId: req.orgId,
      messageId: req.messageId ?? newMessageId(),
      lane: req.lane,
      payload: toJsonString(EmailSchema, email),
      from: email.from,
      to: email.to,
      subject: email.subject,
      tags: email.tags,
      fromDomain: domainOf(email.fromAddress),
      mailbox: normalizeMailbox(email.toAddress),
      checkCooldown: transactional,
      countGuards: transactional && fixtureKind(email.toAddress) === undefined,
      guards: GUARD_LIMITS,
      idempotency: req.idempotencyKey
        ? { key: req.idempotencyKey, bodyHash: req.bodyHash ?? "", ttlMs: IDEMPOTENCY_TTL_MS }
        : undefined,
    });
    if (result.kind === "accepted") runtime.onChange();
    return result;
  };
}

/** The daemon's sending RPCs: accept, look up, lease/ack, lane reports. */
export function mailRoutes(deps: MailDeps, runtime: MailRuntime) {
  const { hot, records, clock } = deps;
  const accept = acceptor(deps, runtime);

  return (router: ConnectRouter) => {
    router.service(MailService, {
      async send(req) {
        const email = req.email;
        if (!req.orgId || !email?.fromAddress.includes("@") || !email.toAddress.includes("@")) {
          throw new ConnectError("org_id, email.from_address and email.to_address are required", Code.InvalidArgument);
        }
        if (req.lane !== Lane.TRANSACTIONAL && req.lane !== Lane.BULK)
          throw new ConnectError("lane must be transactional or bulk", Code.InvalidArgument);
        const result = await guard(() =>
          accept({
            orgId: req.orgId,
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
            deps.refusals.count(req.orgId, "recipient");
            return {
              outcome: SendOutcome.RECIPIENT_LIMITED,
              retryAfterSeconds: Math.max(1, Math.ceil(result.retryAfterMs / 1_000)),
              reason: result.reason,
            };
          case "miss":
            throw new ConnectError(`no organization ${req.orgId}`, Code.NotFound);
        }
      },

      async getMessage(req) {
        // The hot store has the latest of a message until it is settled in the records.
        const record = await guard(
          async () =>
            (await hot.getMessage(req.orgId, req.messageId)) ?? (await records.history.get(req.orgId, req.messageId)),
        );
        if (!record) throw new ConnectError(`no message ${req.messageId}`, Code.NotFound);
        return { message: toMessageInfo(record) };
      },

      // From the records: a message shows here once the history writer has written it (within
      // a flush, 200 ms), and its status as of the last flush.
      async listMessages(req) {
        if (req.limit > MAX_PAGE) throw new ConnectError(`limit must be 1 to ${MAX_PAGE}`, Code.InvalidArgument);
        if (req.status !== MessageStatus.UNSPECIFIED && !(req.status in MessageStatus))
          throw new ConnectError("status is not a message status", Code.InvalidArgument);
        if (req.lane !== Lane.UNSPECIFIED && !LANES.includes(req.lane))
          throw new ConnectError("lane must be transactional or bulk", Code.InvalidArgument);
        const filter: MessageFilter = {
          ...(req.status !== MessageStatus.UNSPECIFIED && { status: req.status }),
          ...(req.toMailbox !== "" && { toMailbox: req.toMailbox }),
          ...(req.tag !== "" && { tag: req.tag }),
          ...(req.lane !== Lane.UNSPECIFIED && { lane: req.lane }),
          ...(req.afterMs !== 0n && { afterMs: Number(req.afterMs) }),
          ...(req.beforeMs !== 0n && { beforeMs: Number(req.beforeMs) }),
        };
        const cursor = pageCursor(req.cursor);
        const page = await guard(() => records.history.list(req.orgId, filter, req.limit || DEFAULT_PAGE, cursor));
        return { messages: page.data.map(toMessageInfo), nextCursor: page.nextCursor ?? "" };
      },

      async getMessageStats(req) {
        const since = Number(req.sinceMs);
        const until = Number(req.untilMs);
        if (since % HOUR_MS !== 0 || until % HOUR_MS !== 0 || since < 0 || until <= since)
          throw new ConnectError("since_ms and until_ms must be whole hours, since before until", Code.InvalidArgument);
        if ((until - since) / HOUR_MS > MAX_STATS_HOURS)
          throw new ConnectError(`at most ${MAX_STATS_HOURS} hours at once`, Code.InvalidArgument);
        const hours = await guard(() => records.stats.hours(req.orgId, since, until));
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
          })),
        };
      },
    });

    const ahead = LANES.reduce((n, lane) => n + aheadOf(lane, deps.laneRate), 0);
    router.service(DeliveryService, {
      async *lease(req, ctx) {
        // The worker's deliveries in flight, and room for the messages the lanes release ahead
        // of their slots, which the worker holds until then.
        const max = Math.min(MAX_IN_FLIGHT, Math.max(1, req.maxInFlight || 16)) + ahead;
        // Leases this stream holds, to their expiry. A lease whose ack never came stops
        // counting once it expires (the message was released again), so a worker whose acks
        // got lost does not stall.
        const held = new Map<string, number>();
        try {
          const ended = AbortSignal.any([ctx.signal, runtime.stopping.signal]);
          while (!ended.aborted) {
            const now = clock.nowMs();
            for (const [id, expires] of held) {
              if (expires <= now) {
                held.delete(id);
                runtime.leaseOwners.delete(id);
              }
            }
            const room = max - held.size;
            const seen = runtime.work.version;
            const leased = room > 0 ? await guard(() => hot.lease(room, now, deps.visibilityMs)) : [];
            if (leased.length > 0) runtime.dueBy(now + deps.visibilityMs);
            for (const l of leased) {
              held.set(l.leaseId, now + deps.visibilityMs);
              runtime.leaseOwners.set(l.leaseId, held);
              yield {
                leaseId: l.leaseId,
                messageId: l.messageId,
                orgId: l.orgId,
                lane: l.lane,
                attempt: l.attempt,
                email: fromJsonString(EmailSchema, l.payload),
                notBeforeMs: BigInt(l.slotMs),
                laneRate: deps.laneRate,
              };
            }
            // Woken by a release (any daemon's), an ack that frees room, or an expiry of the held.
            const nextExpiry = delayUntil(Math.min(...held.values()), now);
            if (leased.length === 0) await runtime.work.wait(Math.min(IDLE_LOOK_MS, nextExpiry), ended, seen);
          }
        } finally {
          for (const id of held.keys()) runtime.leaseOwners.delete(id);
        }
      },

      async ack(req) {
        if (req.outcome === DeliveryOutcome.UNSPECIFIED)
          throw new ConnectError("outcome is required", Code.InvalidArgument);
        const result = await guard(() =>
          hot.ack(
            {
              orgId: req.orgId,
              messageId: req.messageId,
              leaseId: req.leaseId,
              outcome: req.outcome,
              detail: req.detail,
            },
            deps.policy,
            clock.nowMs(),
          ),
        );
        const owner = runtime.leaseOwners.get(req.leaseId);
        owner?.delete(req.leaseId);
        runtime.leaseOwners.delete(req.leaseId);
        runtime.work.notifyAll();
        runtime.onChange();
        if (result.status === MessageStatus.DEFERRED) runtime.dueBy(clock.nowMs()); // its retry: the recovery looks when it is due
        return result;
      },
    });

    router.service(LaneService, {
      async getLanes() {
        const now = clock.nowMs();
        const counts = await guard(() => hot.laneCounts(now));
        return {
          lanes: counts.map((c) => ({
            lane: c.lane,
            depth: BigInt(c.depth),
            ready: BigInt(c.ready),
            inFlight: BigInt(c.inFlight),
            deferred: BigInt(c.deferred),
            oldestAgeMs: BigInt(c.oldestAgeMs),
            rate: deps.laneRate,
            releasedPerSecond: runtime.releasesSince(c.lane, now - 10_000, now).length / 10,
          })),
        };
      },

      async listReleases(req) {
        return {
          releases: runtime.releasesSince(req.lane, Number(req.sinceMs)).map((r) => ({
            messageId: r.messageId,
            orgId: r.orgId,
            slotAtMs: BigInt(r.slotMs),
            releasedAtMs: BigInt(r.releasedAtMs),
          })),
        };
      },
    });
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
  });
}
