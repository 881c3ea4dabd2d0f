import { createHash, randomBytes } from "node:crypto";
import { type Lane, MessageStatus } from "../../gen/mailcore/limiter/v1/mail_pb";
import { LANES } from "../../mail/policy";
import { type DeliveryAttemptRecord, joinTags, type MessageHistory, splitTags } from "../../model/history";
import {
  type AckInput,
  type AckResult,
  type DeliveryPolicy,
  type EnqueueInput,
  type EnqueueResult,
  type GuardReason,
  KEPT_ACK_MS,
  type LaneCounts,
  type LeasedRecord,
  type MailStore,
  type QueueCapReason,
  RECOVER_BATCH,
  type RecoverResult,
  SENDING_STATE_TTL_MS,
  type ReleaseBatch,
  type RetryState,
  type ScheduledRetry,
  type SendingChange,
  type SendingState,
  type SlotPlan,
} from "../hotstore";
import { type ConfirmedWrites, NotConfirmed } from "./confirm";
import { keys } from "./layout";
import type { ScriptedRedis } from "./scripts";

/** readMessage's shape in prelude.lua. */
export type MessageReply = [
  string,
  string,
  number,
  string,
  string,
  string,
  string,
  number,
  number,
  number,
  number,
  number,
  [number, number, string][],
  string,
  string[],
  string?,
];

/** ack.lua's argument for the schedule in hours: 'first|until|retry at' (-1: the retries are over), or '' for none. */
function scheduledArg(s: ScheduledRetry | undefined): string {
  return s ? `${s.firstAttemptMs}|${s.untilMs}|${s.retryAtMs ?? -1}` : "";
}

/** readMessage's reply as the records keep a message. */
export function toHistory(m: MessageReply): MessageHistory {
  const [
    id,
    orgId,
    lane,
    from,
    to,
    toMailbox,
    subject,
    status,
    attempts,
    createdMs,
    updatedMs,
    version,
    events,
    tags,
    tries,
    payload,
  ] = m;
  return {
    id,
    orgId,
    lane: lane as Lane,
    from,
    to,
    toMailbox,
    subject,
    tags: splitTags(tags),
    status: status as MessageStatus,
    attempts,
    createdMs,
    updatedMs,
    version,
    events: events.map(([s, atMs, detail]) => ({ status: s as MessageStatus, atMs, detail })),
    deliveryAttempts: tries.map((t) => JSON.parse(t) as DeliveryAttemptRecord),
    ...(payload === undefined ? {} : { payload }),
  };
}

/**
 * The mail pipeline in Redis: the lanes, the messages, their leases and retries. Every script
 * that changes a message, and the kept ack of one, goes through the confirmed writes (WAIT for
 * the replicas); reads do not.
 */
export class RedisMail implements MailStore {
  constructor(
    private readonly redis: ScriptedRedis,
    private readonly writes: ConfirmedWrites,
  ) {}

  async enqueue(input: EnqueueInput, nowMs: number): Promise<EnqueueResult> {
    const { orgId, messageId, lane, mailbox, guards, idempotency } = input;
    const keyHash = createHash("sha256")
      .update(idempotency?.key ?? "")
      .digest("hex");
    // The projection is in the organization's slot, the accept step in {mail}: read it first.
    const [version, verified] = await this.redis.hmget(keys.org(orgId), "v", `d:${input.fromDomain}`);
    const domain = version === null ? "miss" : verified === null ? "unverified" : "verified";
    const reply = (await this.writes.run("enqueue", [
      keys.idempotency(orgId, keyHash),
      keys.guardLog(orgId, mailbox),
      keys.cooldown(mailbox),
      keys.message(orgId, messageId),
      keys.events(orgId, messageId),
      keys.orgQueue(orgId, lane),
      keys.roster(lane),
      keys.depth(lane),
      keys.held(orgId),
      nowMs,
      messageId,
      orgId,
      lane,
      input.payload,
      mailbox,
      input.checkCooldown ? 1 : 0,
      input.countGuards ? 1 : 0,
      idempotency?.bodyHash ?? "",
      idempotency?.ttlMs ?? 0,
      guards.shortMax,
      guards.shortWindowMs,
      guards.longMax,
      guards.longWindowMs,
      domain,
      input.from,
      input.to,
      input.subject,
      joinTags(input.tags),
      input.queueCap.messages,
      input.queueCap.bytes,
    ])) as [string, string?, number?];
    switch (reply[0]) {
      case "accepted":
      case "replayed":
        return { kind: reply[0], messageId: reply[1]! };
      case "conflict":
      case "domain_not_verified":
      case "miss":
        return { kind: reply[0] as "conflict" | "domain_not_verified" | "miss" };
      case "queue_full":
        return { kind: "queue_full", reason: reply[1] as QueueCapReason };
      default:
        return { kind: "limited", reason: reply[1] as GuardReason, retryAfterMs: Number(reply[2]) };
    }
  }

  async release(lane: Lane, nowMs: number, plan: SlotPlan): Promise<ReleaseBatch> {
    const [released, next] = (await this.writes.run("release", [
      keys.roster(lane),
      keys.ready(lane),
      keys.depth(lane),
      keys.slots(lane),
      keys.laneHolds(lane),
      nowMs,
      lane,
      plan.ratePerSecond,
      plan.untilMs,
      plan.max,
    ])) as [[string, string, number][], number];
    return {
      released: released.map(([orgId, messageId, slotMs]) => ({ orgId, messageId, slotMs })),
      nextSlotMs: next < 0 ? null : next,
    };
  }

  async lease(max: number, nowMs: number, visibilityMs: number): Promise<LeasedRecord[]> {
    const [t, b] = LANES;
    const prefix = `ls_${randomBytes(8).toString("hex")}`;
    // A lease the replicas did not confirm is handed out all the same: held back, its messages
    // would wait out the visibility timeout; lost in a failover, they are released again and
    // delivered twice, which at-least-once allows.
    const reply = (await this.writes
      .run("lease", [
        keys.ready(t),
        keys.ready(b),
        keys.inFlight(t),
        keys.inFlight(b),
        nowMs,
        max,
        visibilityMs,
        prefix,
      ])
      .catch((err) => {
        if (err instanceof NotConfirmed && Array.isArray(err.reply)) return err.reply;
        throw err;
      })) as [string, string, string, string, string, number, string | null][];
    return reply.map(([leaseId, messageId, orgId, lane, payload, attempt, slot]) => ({
      leaseId,
      messageId,
      orgId,
      lane: Number(lane) as Lane,
      payload,
      attempt,
      slotMs: Number(slot ?? 0),
    }));
  }

  async ack(input: AckInput, policy: DeliveryPolicy, nowMs: number): Promise<AckResult> {
    const { orgId, messageId } = input;
    // An ack that does not count is kept all the same: its message was delivered (or bounced, or
    // deferred), which the reconciliation must know if the message is lost or found stale. Kept
    // on the primary alone, a failover could lose it and the reconciliation deliver the message
    // again: it waits for the replicas as the ack does, and fails as the ack does (the worker
    // retries it).
    const keep = () =>
      this.writes.run("keep", [keys.keptAck(orgId, messageId), `${input.outcome}|${input.detail}`, KEPT_ACK_MS]);
    const lane = Number(await this.redis.hget(keys.message(orgId, messageId), "lane")) as Lane;
    if (!LANES.includes(lane as (typeof LANES)[number])) {
      await keep();
      return { current: false, status: 0 as MessageStatus };
    }
    const [current, status] = (await this.writes.run("ack", [
      keys.message(orgId, messageId),
      keys.inFlight(lane),
      keys.deferred(lane),
      nowMs,
      input.leaseId,
      input.outcome,
      input.detail,
      policy.maxAttempts,
      policy.retryBaseMs,
      policy.bounceCooldownMs,
      orgId,
      messageId,
      scheduledArg(input.scheduled),
      input.scheduled?.delayedNotice ?? "",
      ...(input.attempts ?? []).map((a) => JSON.stringify(a)),
    ])) as [number, number];
    if (current !== 1) await keep();
    return { current: current === 1, status: status as MessageStatus };
  }

  async retryState(orgId: string, messageId: string, leaseId: string): Promise<RetryState | null> {
    const [status, lease, attempts, first, delayed] = await this.redis.hmget(
      keys.message(orgId, messageId),
      "status",
      "lease",
      "attempts",
      "first",
      "delayed",
    );
    if (Number(status) !== MessageStatus.SENDING || lease !== leaseId) return null;
    return {
      attempts: Number(attempts),
      firstAttemptMs: first === null ? null : Number(first),
      delayedSent: delayed === "1",
    };
  }

  async recover(nowMs: number, policy: DeliveryPolicy): Promise<RecoverResult> {
    const total: RecoverResult = { expired: 0, retried: 0, failed: 0, nextDueMs: null };
    for (const lane of LANES) {
      const [expired, retried, failed, next] = (await this.writes.run("recover", [
        keys.inFlight(lane),
        keys.deferred(lane),
        keys.roster(lane),
        keys.depth(lane),
        nowMs,
        lane,
        RECOVER_BATCH,
        policy.maxAttempts,
      ])) as [number, number, number, number];
      if (next >= 0) total.nextDueMs = Math.min(total.nextDueMs ?? next, next);
      total.expired += expired;
      total.retried += retried;
      total.failed += failed;
    }
    return total;
  }

  async sendingState(orgId: string, mailbox: string, _nowMs: number): Promise<SendingState> {
    const [loaded, suppressed, bulkPaused] = await this.redis.hmget(keys.sending(orgId), "~loaded", mailbox, "~bulk");
    if (loaded === null) return { kind: "miss" };
    return { kind: "known", suppressed: suppressed ?? undefined, bulkPaused: bulkPaused ?? undefined };
  }

  async projectSending(orgId: string, change: SendingChange, _nowMs: number): Promise<void> {
    const key = keys.sending(orgId);
    const set: string[] = [];
    const del: string[] = [];
    for (const [mailbox, reason] of change.suppressions ?? []) {
      if (reason === null) del.push(mailbox);
      else set.push(mailbox, reason);
    }
    if (change.bulkPaused === null) del.push("~bulk");
    else if (change.bulkPaused !== undefined) set.push("~bulk", change.bulkPaused);
    const multi = this.redis.multi();
    if (change.loaded) multi.del(key);
    if (change.loaded) set.push("~loaded", "1");
    for (let i = 0; i < set.length; i += 1_000) multi.hset(key, ...set.slice(i, i + 1_000));
    if (del.length > 0) multi.hdel(key, ...del);
    // The whole state goes after SENDING_STATE_TTL_MS: the next send rebuilds it.
    if (change.loaded) multi.pexpire(key, SENDING_STATE_TTL_MS);
    await multi.exec();
  }

  async holdLane(orgId: string, lane: Lane, held: boolean): Promise<void> {
    await this.writes.run("hold_lane", [
      keys.laneHolds(lane),
      keys.roster(lane),
      keys.orgQueue(orgId, lane),
      orgId,
      lane,
      held ? 1 : 0,
    ]);
  }

  async laneHolds(lane: Lane): Promise<string[]> {
    return (await this.redis.smembers(keys.laneHolds(lane))).sort();
  }

  async coolDown(mailbox: string, nowMs: number, cooldownMs: number): Promise<number> {
    return Number(await this.writes.run("cool", [keys.cooldown(mailbox), nowMs, cooldownMs]));
  }

  async getMessage(orgId: string, messageId: string): Promise<MessageHistory | null> {
    const reply = (await this.redis.message(keys.message(orgId, messageId), orgId, messageId)) as MessageReply | null;
    return reply ? toHistory(reply) : null;
  }

  async laneCounts(nowMs: number): Promise<LaneCounts[]> {
    return Promise.all(
      LANES.map(async (lane) => {
        const [depth, ready, inFlight, deferred, roster] = await Promise.all([
          this.redis.get(keys.depth(lane)),
          this.redis.llen(keys.ready(lane)),
          this.redis.zcard(keys.inFlight(lane)),
          this.redis.zcard(keys.deferred(lane)),
          this.redis.lrange(keys.roster(lane), 0, -1),
        ]);
        const heads = await Promise.all(
          roster.map(async (org) => {
            const id = await this.redis.lindex(keys.orgQueue(org, lane), 0);
            return id ? Number(await this.redis.hget(keys.message(org, id), "created")) : Number.POSITIVE_INFINITY;
          }),
        );
        const oldest = Math.min(...heads);
        return {
          lane,
          depth: Number(depth ?? 0),
          ready,
          inFlight,
          deferred,
          oldestAgeMs: Number.isFinite(oldest) ? Math.max(0, nowMs - oldest) : 0,
        };
      }),
    );
  }
}
