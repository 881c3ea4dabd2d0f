import { fromJsonString } from "@bufbuild/protobuf";
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import { type Clock, delayUntil } from "../clock/clock";
import {
  type AckRequest,
  type DeliveryAttempt,
  DeliveryOutcome,
  type DeliveryService,
  EmailSchema,
  type LeaseRequest,
  MessageStatus,
  RetrySchedule,
} from "../gen/mailcore/limiter/v1/mail_pb";
import type { AckInput, DeliveryPolicy, MailStore } from "../hotstore/hotstore";
import type { DeliveryAttemptRecord } from "../model/history";
import { nextRetry, type RetryPolicy as RetryInHours } from "../mx/retry";
import { aheadOf } from "../lanes/scheduler";
import { type BounceDetail, bounceDetail } from "../mail/bounce_detail";
import { fixtureKind, LANES } from "../mail/policy";
import type { SuppressionRecords } from "../records/suppressions";
import type { MailRuntime } from "./mail_runtime";
import type { SendingState } from "./sending_state";
import { type TrackingKeys, trackedEmail } from "./tracking_service";
import { guard } from "./rpc_errors";
import type { Signing } from "./signing";

// The delivery service (DeliveryService): the workers' lease streams, and their acks.

/** The deliveries in flight a worker may ask for at most (and 16 when it does not say). */
const MAX_IN_FLIGHT = 256;
const DEFAULT_IN_FLIGHT = 16;
/** How long an idle lease stream waits for a release before it looks again anyway (a signal can be lost). */
const IDLE_LOOK_MS = 30_000;

export interface DeliveryDeps {
  mail: Pick<MailStore, "lease" | "ack" | "retryState" | "getMessage">;
  /** The organizations' suppression lists: a final refusal of the mailbox counts there. */
  suppressions: Pick<SuppressionRecords, "recordBounce">;
  /** The hot store's copy of the lists, which the accept step reads. */
  sending: Pick<SendingState, "listed">;
  runtime: MailRuntime;
  clock: Clock;
  laneRate: number;
  visibilityMs: number;
  /** The short retry schedule and the bounce cooldown. */
  policy: DeliveryPolicy;
  /** The retry schedule in hours (MX delivery). */
  retryInHours: RetryInHours;
  /** Open and click tracking of the messages that ask for it, applied as they are leased. */
  tracking: TrackingKeys;
  /** The jitter's random source (Math.random unless a test gives one). */
  random?: () => number;
  /**
   * Each lease's DKIM keys (none for a fixture's message, which never leaves the worker) and
   * return path; without it, leases carry neither (tests of the lanes only).
   */
  signing?: Pick<Signing, "keysFor" | "returnPath">;
}

/** The tries of one ack kept at most, and the length of a reply kept (the contract's 1,000 characters). */
const MAX_TRIES_PER_ACK = 20;
const MAX_REPLY = 1_000;

/** DeliveryService's methods, by name. */
export function deliveryHandlers(deps: DeliveryDeps): ServiceImpl<typeof DeliveryService> {
  return {
    lease: (req, ctx) => lease(deps, req, ctx),
    ack: (req) => ack(deps, req),
  };
}

/**
 * The leases a stream holds at most: the worker's deliveries in flight (1 to 256), and room for
 * the messages the lanes release ahead of their slots, which the worker holds until then.
 */
export function leaseRoom(maxInFlight: number, laneRate: number): number {
  const ahead = LANES.reduce((n, lane) => n + aheadOf(lane, laneRate), 0);
  return Math.min(MAX_IN_FLIGHT, Math.max(1, maxInFlight || DEFAULT_IN_FLIGHT)) + ahead;
}

/** A worker's lease stream: released messages as they come, up to its room, until it or the daemon ends it. */
export async function* lease(deps: DeliveryDeps, req: LeaseRequest, ctx: HandlerContext) {
  const { runtime, clock, visibilityMs } = deps;
  const max = leaseRoom(req.maxInFlight, deps.laneRate);
  // Leases this stream holds, to their expiry. A lease whose ack never came stops counting once
  // it expires (the message was released again), so a worker whose acks got lost does not stall.
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
      const leased = room > 0 ? await guard(() => deps.mail.lease(room, now, visibilityMs)) : [];
      if (leased.length > 0) runtime.dueBy(now + visibilityMs);
      for (const l of leased) {
        held.set(l.leaseId, now + visibilityMs);
        runtime.leaseOwners.set(l.leaseId, held);
        // Tracked before the worker composes and signs it: the signature covers the rewritten HTML.
        const email = trackedEmail(deps.tracking, l.messageId, fromJsonString(EmailSchema, l.payload));
        const signing = deps.signing;
        yield {
          leaseId: l.leaseId,
          messageId: l.messageId,
          orgId: l.orgId,
          lane: l.lane,
          attempt: l.attempt,
          email,
          notBeforeMs: BigInt(l.slotMs),
          laneRate: deps.laneRate,
          // A fixture's message never leaves the worker (its outcome is simulated): no keys for it.
          ...(signing && {
            signingKeys:
              fixtureKind(email.toAddress) === undefined
                ? await guard(() => signing.keysFor(l.orgId, email.fromAddress))
                : [],
            returnPath: signing.returnPath(l.messageId, email.fromAddress),
          }),
        };
      }
      // Woken by a release (any daemon's), an ack that frees room, or an expiry of the held.
      const nextExpiry = delayUntil(Math.min(...held.values()), now);
      if (leased.length === 0) await runtime.work.wait(Math.min(IDLE_LOOK_MS, nextExpiry), ended, seen);
    }
  } finally {
    for (const id of held.keys()) runtime.leaseOwners.delete(id);
  }
}

/** A worker's outcome of a delivery; it frees room on the stream that held the lease. */
export async function ack(deps: DeliveryDeps, req: AckRequest) {
  const { runtime, clock } = deps;
  if (req.outcome === DeliveryOutcome.UNSPECIFIED) throw new ConnectError("outcome is required", Code.InvalidArgument);
  const bounce = finalBounce(req);
  const input: AckInput = {
    orgId: req.orgId,
    messageId: req.messageId,
    leaseId: req.leaseId,
    outcome: req.outcome,
    detail: bounce ? bounceDetail(bounce) : req.detail,
    attempts: req.attempts.slice(0, MAX_TRIES_PER_ACK).map(triedAt),
  };
  // Before the ack: should the records fail, the ack fails too and the worker sends it again.
  if (bounce) await guard(() => recordBounce(deps, req, bounce, clock.nowMs()));
  if (req.outcome === DeliveryOutcome.DEFERRED && req.retrySchedule === RetrySchedule.HOURS)
    await guard(() => scheduleInHours(deps, req, input, clock.nowMs()));
  const result = await guard(() => deps.mail.ack(input, deps.policy, clock.nowMs()));
  const owner = runtime.leaseOwners.get(req.leaseId);
  owner?.delete(req.leaseId);
  runtime.leaseOwners.delete(req.leaseId);
  runtime.work.notifyAll();
  runtime.onChange();
  if (result.status === MessageStatus.DEFERRED) runtime.dueBy(clock.nowMs()); // its retry: the recovery looks when it is due
  return result;
}

/** The classified refusal of a bounced or rejected delivery; undefined for anything else. */
function finalBounce(req: AckRequest): BounceDetail | undefined {
  const type = req.bounce?.type;
  if (req.outcome !== DeliveryOutcome.BOUNCED && req.outcome !== DeliveryOutcome.REJECTED) return undefined;
  if (type !== "hard" && type !== "soft" && type !== "policy") return undefined;
  return { type, status: req.bounce!.status, diagnostic: req.detail.slice(0, MAX_REPLY) };
}

/**
 * A final refusal, on the organization's suppression list: a hard bounce lists the mailbox, a
 * soft one counts (bounces.md); a policy refusal is the sender's, and changes nothing. The
 * mailbox is the message's own, read from the hot store; a message it no longer has (its lease
 * ended long ago) is left alone.
 */
async function recordBounce(deps: DeliveryDeps, req: AckRequest, bounce: BounceDetail, nowMs: number) {
  if (bounce.type === "policy") return;
  const m = await deps.mail.getMessage(req.orgId, req.messageId);
  if (!m) return;
  const effect = await deps.suppressions.recordBounce({
    orgId: m.orgId,
    messageId: m.id,
    email: m.toMailbox,
    bounce,
    atMs: nowMs,
  });
  if (effect.suppressed)
    await deps.sending.listed(m.orgId, m.toMailbox, bounce.type === "hard" ? "hard_bounce" : "soft_bounce");
}

/**
 * A deferral under the schedule in hours: when the message is tried next (internal/mx's
 * nextRetry, from its first attempt and its attempts so far, honouring the wait the receiver
 * asked for), whether its delayed notice is due, or that its retries are over (then it fails,
 * its detail saying so, with the last reply). Nothing when the lease is no longer current: the
 * ack is then only kept.
 */
async function scheduleInHours(deps: DeliveryDeps, req: AckRequest, input: AckInput, nowMs: number): Promise<void> {
  const state = await deps.mail.retryState(req.orgId, req.messageId, req.leaseId);
  if (!state) return;
  const policy = deps.retryInHours;
  const firstAttemptMs = state.firstAttemptMs ?? nowMs;
  const untilMs = firstAttemptMs + policy.maxRetryMs;
  const retryAfterMs = req.retryAfterMs > 0n ? Number(req.retryAfterMs) : undefined;
  const decision = nextRetry(
    { firstAttemptMs, attempts: state.attempts, nowMs, retryAfterMs, delayedSent: state.delayedSent },
    policy,
    deps.random,
  );
  if (decision.kind === "fail") {
    input.detail = `not delivered ${duration(policy.maxRetryMs)} after its first attempt; the last try: ${req.detail}`;
    input.scheduled = { firstAttemptMs, untilMs, retryAtMs: null };
    return;
  }
  input.scheduled = {
    firstAttemptMs,
    untilMs,
    retryAtMs: decision.atMs,
    delayedNotice: decision.notifyDelayed
      ? `not delivered ${duration(policy.delayedAfterMs)} after its first attempt; tried until ${new Date(untilMs).toISOString()}`
      : undefined,
  };
}

/** A duration in the words of an event's detail: "4 hours", "90 minutes", "14.4 seconds". */
function duration(ms: number): string {
  if (ms >= 3_600_000 && ms % 3_600_000 === 0) return `${ms / 3_600_000} hours`;
  if (ms >= 60_000 && ms % 60_000 === 0) return `${ms / 60_000} minutes`;
  return `${Math.round(ms / 100) / 10} seconds`;
}

/** One try as the history keeps it, its texts bounded. */
function triedAt(a: DeliveryAttempt): DeliveryAttemptRecord {
  const cut = (s: string, n: number) => (s.length > n ? s.slice(0, n) : s);
  return {
    atMs: Number(a.atMs),
    host: cut(a.host, 255),
    address: cut(a.address, 64),
    tls: cut(a.tls, 16),
    stage: cut(a.stage, 16),
    reply: cut(a.reply, MAX_REPLY),
    enhancedCode: cut(a.enhancedCode, 16),
  };
}
