import { toJsonString } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Clock } from "../clock/clock";
import { type Email, EmailSchema, Lane } from "../gen/mailcore/limiter/v1/mail_pb";
import type { EnqueueInput, EnqueueResult, MailStore, QueueCap } from "../hotstore/hotstore";
import { newMessageId } from "../mail/identity";
import { domainOf, fixtureKind, GUARD_LIMITS, IDEMPOTENCY_TTL_MS, normalizeMailbox } from "../mail/policy";
import type { SendingRefusal, SendingState } from "./sending_state";
import type { Projection } from "./projection";

// The accept step of every send (POST /api/v1/emails, SMTP, a campaign's or a workflow's
// message), with every guard of its lane (verified From domain, the organization's queue cap;
// on the transactional lane the bounce cooldown and the recipient guards), atomically with the
// enqueue; before them, the organization's suppression list, which refuses a listed recipient
// on both lanes, and the pause of its bulk sends for its complaint rate.

/** One send as the accept step takes it. */
export interface SendInput {
  orgId: string;
  lane: Lane;
  email: Email;
  idempotencyKey?: string;
  bodyHash?: string;
  /** Fixed by the caller (a campaign reserves its message ids); made here otherwise. */
  messageId?: string;
}

/** What the accept step answers: the hot store's verdict, or a recipient on the suppression list. */
export type AcceptResult = EnqueueResult | SendingRefusal;

/** The accept step, as the services and loops that send are given it. */
export type Accept = (send: SendInput) => Promise<AcceptResult>;

export interface AcceptDeps {
  mail: Pick<MailStore, "enqueue">;
  projection: Projection;
  clock: Clock;
  /** The most one organization may have queued (MAX_QUEUED_PER_ORG, MAX_QUEUED_BYTES_PER_ORG). */
  queueCap: QueueCap;
  /** A message was accepted: the records writer has work. */
  onAccepted: () => void;
  /** The organization's suppression list and the pause of its bulk sends (the hot store's copy). */
  sending: Pick<SendingState, "refusal">;
}

/**
 * Accepts one send, unless its recipient is on the organization's suppression list; an
 * organization missing from the projection is rebuilt from the records once.
 */
export async function accept(deps: AcceptDeps, send: SendInput): Promise<AcceptResult> {
  const refused = await deps.sending.refusal(send.orgId, send.email.toAddress, send.lane);
  if (refused) return refused;
  const result = await enqueueRebuilt(deps, toEnqueueInput(send, deps.queueCap));
  if (result.kind === "accepted") deps.onAccepted();
  return result;
}

/** Enqueues; on a projection miss, rebuilds the organization from the records and enqueues again. */
export async function enqueueRebuilt(
  { mail, projection, clock }: Pick<AcceptDeps, "mail" | "projection" | "clock">,
  input: EnqueueInput,
): Promise<EnqueueResult> {
  const first = await mail.enqueue(input, clock.nowMs());
  if (first.kind !== "miss") return first;
  await projection.rebuildOrg(input.orgId);
  const again = await mail.enqueue(input, clock.nowMs());
  if (again.kind === "miss") throw new ConnectError(`no organization ${input.orgId}`, Code.NotFound);
  return again;
}

/**
 * A send as the hot store enqueues it: the guards of its lane (the bounce cooldown on the
 * transactional lane, and the recipient windows there but for test fixtures), its
 * organization's queue cap, a new message id unless the caller fixed one, and its idempotency
 * record when it has a key.
 */
export function toEnqueueInput(send: SendInput, queueCap: QueueCap): EnqueueInput {
  const { email } = send;
  const transactional = send.lane === Lane.TRANSACTIONAL;
  return {
    orgId: send.orgId,
    messageId: send.messageId ?? newMessageId(),
    lane: send.lane,
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
    queueCap,
    idempotency: send.idempotencyKey
      ? { key: send.idempotencyKey, bodyHash: send.bodyHash ?? "", ttlMs: IDEMPOTENCY_TTL_MS }
      : undefined,
  };
}
