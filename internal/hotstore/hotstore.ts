import { randomBytes } from "node:crypto";
import type { Plan, Verdict } from "../gen/mailcore/limiter/v1/limiter_pb";
import { DeliveryOutcome, type Lane, MessageStatus } from "../gen/mailcore/limiter/v1/mail_pb";
import type { GuardLimits } from "../mail/policy";
import type { OrgProjection } from "../model/projection";
import type { DeliveryAttemptRecord, MessageHistory } from "../model/history";

// The hot store: what the hot path and the lanes touch many times a second. Token buckets,
// guard logs, idempotency records, bounce cooldowns, the lanes with the payload of every
// message not yet in a final state, leases, and the projection admission reads (token hash to
// organization, organization to plan and verified domains), which is written through on every
// change and rebuilt from the records on a miss. Two adapters, Redis and embedded (memory plus
// a SQLite file), run the conformance suite of every seam.

/** Expired leases and due retries put back per lane and recovery round, at most. */
export const RECOVER_BATCH = 500;

/** How long the hot store remembers that a token hash is not a valid token. */
export const INVALID_TOKEN_TTL_MS = 60_000;

/** What refused a request (an HTTP 429): the organization's quota, the IP limit, a recipient guard. */
export type RefusalKind = "quota" | "ip" | "recipient";

/** Refusals are counted per organization and minute, and kept this many minutes (the console's last hour). */
export const REFUSAL_MINUTES = 60;

/** An organization's release rate is measured over this many whole seconds. */
export const RELEASE_WINDOW_S = 10;

export interface RefusalCount {
  orgId: string;
  kind: RefusalKind;
  n: number;
}

export type RefusalMinute = { minuteStartMs: number } & Record<RefusalKind, number>;

/** What the console shows of an organization's use of the service. */
export interface OrgUsage {
  /** The request bucket as admission would see it now (nothing is consumed): whole requests left, ms until full. */
  remaining: number;
  resetMs: number;
  /** The last REFUSAL_MINUTES minutes, oldest first; the last one is the minute under way. */
  refusals: RefusalMinute[];
  /** Per lane: the organization's messages waiting, and those released over the last RELEASE_WINDOW_S whole seconds. */
  lanes: { lane: Lane; depth: number; released: number }[];
}

export interface AdmitInput {
  /** sha256 of the presented token, or null when none (or a malformed one) was presented. */
  tokenHash: string | null;
  ip: string;
}

/** A new audience stamp (OrgRef.audienceStamp): random, so no stamp from before a restart comes back. */
export const newAudienceStamp = (): string => randomBytes(9).toString("base64url");

export interface OrgRef {
  id: string;
  slug: string;
  plan: Plan;
  /**
   * A random stamp that changes whenever the organization's tags or their subscriber counts
   * change (touchAudience) and whenever its projection is rewritten: the daemons' caches of the
   * tags are kept by it. Absent when the store has none.
   */
  audienceStamp?: string;
}

export interface AdmitResult {
  verdict: Verdict;
  /**
   * The projection knows nothing of this token (or of its organization): nothing was
   * consumed; rebuild the projection from the records and admit again.
   */
  miss?: true;
  /** Set when the token was valid. */
  org?: OrgRef;
  /** Whole tokens left in the organization bucket (the minimum quota when there is no org). */
  remaining: number;
  /** Milliseconds until the organization bucket is full (0 when there is no org). */
  resetMs: number;
  /** On a limited verdict: milliseconds until the request would be admitted. */
  retryAfterMs: number;
}

/** What a token hash resolves to in the projection. */
export type TokenLookup = { kind: "miss" } | { kind: "invalid" } | { kind: "valid"; org: OrgRef };

export interface EnqueueInput {
  orgId: string;
  messageId: string;
  lane: Lane;
  /** The message as the service serialized it; opaque to the store. */
  payload: string;
  /** For the message's record: the From and To headers and the subject. */
  from: string;
  to: string;
  subject: string;
  /** For the message's record: its tags (letters, digits, _ and -). */
  tags: string[];
  /** The domain of the From address: it must be a verified domain of the organization. */
  fromDomain: string;
  /** The normalised recipient mailbox (lower case, no +tag). */
  mailbox: string;
  /** Refuse while the mailbox is on bounce cooldown (transactional sends). */
  checkCooldown: boolean;
  /** Count the send against the mailbox's windows (transactional sends to real mailboxes). */
  countGuards: boolean;
  guards: GuardLimits;
  /** The most an organization may have queued; a send past either cap is refused. */
  queueCap: QueueCap;
  idempotency?: { key: string; bodyHash: string; ttlMs: number };
}

/**
 * What one organization may hold in the hot store: messages accepted and not yet settled in the
 * records as final (waiting for their slot, released, being delivered, waiting for a retry), and
 * the bytes of their payloads (MAX_QUEUED_PER_ORG, MAX_QUEUED_BYTES_PER_ORG).
 */
export interface QueueCap {
  messages: number;
  bytes: number;
}

/** Which cap refused a send. */
export type QueueCapReason = "messages" | "bytes";

export type GuardReason = "short_window" | "long_window" | "bounce_cooldown";

export type EnqueueResult =
  | { kind: "accepted"; messageId: string }
  | { kind: "replayed"; messageId: string }
  | { kind: "conflict" }
  | { kind: "domain_not_verified" }
  /** The organization's projection is missing: rebuild it and enqueue again. */
  | { kind: "miss" }
  | { kind: "limited"; reason: GuardReason; retryAfterMs: number }
  /** The organization holds its most messages or bytes: nothing was recorded. */
  | { kind: "queue_full"; reason: QueueCapReason };

/** A message a lane released, and its slot: the time (wall ms) it may leave, never before. */
export interface Released {
  orgId: string;
  messageId: string;
  slotMs: number;
}

/**
 * How far one release call stamps a lane's slots. A lane's slots come in runs: a run starts at
 * the moment a message finds the lane idle (or behind), and its k-th slot is the run's start plus
 * floor(k * 1000 / rate) ms, so every 1000 ms of a run holds exactly `rate` slots.
 */
export interface SlotPlan {
  ratePerSecond: number;
  /** The latest slot this call may give (wall ms): now plus the lane's lead. */
  untilMs: number;
  /** The most messages this call releases. */
  max: number;
}

export interface ReleaseBatch {
  /** In slot order. */
  released: Released[];
  /** The slot the lane's next message will get, while one waits; null when the lane is empty. */
  nextSlotMs: number | null;
}

/**
 * The run's next slot, as both adapters compute it: a run starts again now when its next slot
 * has passed (the lane was idle, or its scheduler stalled past the lead) or lies further ahead
 * than a call's reach (the wall clock stepped back). A rate that changed continues from the
 * last slot. Returns the run as it stands for the next slot.
 */
export function nextSlot(run: SlotRun | null, nowMs: number, plan: SlotPlan): SlotRun {
  const rate = plan.ratePerSecond;
  if (run !== null && run.rate !== rate) run = { start: slotOf(run, run.k), k: 0, rate };
  if (run !== null) {
    const next = { ...run, k: run.k + 1 };
    const at = slotOf(next, next.k);
    if (at >= nowMs && at <= plan.untilMs + 1_000 + Math.ceil(1_000 / rate)) return next;
  }
  return { start: nowMs, k: 0, rate };
}

/** A run of a lane's slots: its start (wall ms), the index of a slot in it, and its rate. */
export interface SlotRun {
  start: number;
  k: number;
  rate: number;
}

export const slotOf = (run: SlotRun, k: number): number => run.start + Math.floor((k * 1_000) / run.rate);

export interface LeasedRecord {
  leaseId: string;
  messageId: string;
  orgId: string;
  lane: Lane;
  payload: string;
  attempt: number;
  /** The slot its lane released it for (wall ms; 0 when it has none): deliver it no earlier. */
  slotMs: number;
}

export interface AckInput {
  orgId: string;
  messageId: string;
  leaseId: string;
  /**
   * DELIVERED; BOUNCED (final, the mailbox on cooldown); REJECTED (final, no cooldown: not the
   * mailbox's fault); DEFERRED (a retry, or FAILED when the retries are over).
   */
  outcome: DeliveryOutcome;
  detail: string;
  /** The tries this delivery made at receivers, appended to the message's history. */
  attempts?: DeliveryAttemptRecord[];
  /**
   * For DEFERRED under the schedule in hours (MX delivery): what the schedule decided, from the
   * message's retryState. Absent: the policy's short schedule (maxAttempts, retryBaseMs).
   */
  scheduled?: ScheduledRetry;
}

/** What the schedule in hours decided for a deferred message (internal/mx's nextRetry). */
export interface ScheduledRetry {
  /** When the message was first tried: kept from the first ack that gives it. */
  firstAttemptMs: number;
  /** The end of its retries: a lease that expires after it fails the message. */
  untilMs: number;
  /** The next try; null: the retries are over, the message fails with the ack's detail. */
  retryAtMs: number | null;
  /** The delayed notice to record with this ack (a DELAYED event, once per message); absent: none now. */
  delayedNotice?: string;
}

/** What the schedule in hours reads of a message whose lease is current. */
export interface RetryState {
  /** Attempts so far, the one just acked included. */
  attempts: number;
  /** When it was first tried (null until an ack under the schedule in hours kept it). */
  firstAttemptMs: number | null;
  /** Whether its delayed notice was recorded. */
  delayedSent: boolean;
}

export interface DeliveryPolicy {
  /** The short schedule (the relay, the file sink): attempts at most... */
  maxAttempts: number;
  /** ...and the n-th retry waits retryBaseMs * 2^(n-1). */
  retryBaseMs: number;
  bounceCooldownMs: number;
}

/**
 * The status an ack that counts gives its message, as both adapters decide it (ack.lua too):
 * DELIVERED; BOUNCED (the mailbox goes on cooldown); REJECTED fails it at once, without
 * cooldown; DEFERRED follows its schedule: in hours (scheduled), a retry at retryAtMs or FAILED
 * when they are over; the short one, a retry after retryBaseMs * 2^(n-1), FAILED after
 * maxAttempts. dueMs: when a deferred message is tried again.
 */
export function ackedStatus(
  input: Pick<AckInput, "outcome" | "scheduled">,
  attempts: number,
  policy: DeliveryPolicy,
  nowMs: number,
): { status: MessageStatus; dueMs: number | null } {
  switch (input.outcome) {
    case DeliveryOutcome.DELIVERED:
      return { status: MessageStatus.DELIVERED, dueMs: null };
    case DeliveryOutcome.BOUNCED:
      return { status: MessageStatus.BOUNCED, dueMs: null };
    case DeliveryOutcome.REJECTED:
      return { status: MessageStatus.FAILED, dueMs: null };
  }
  const s = input.scheduled;
  if (s)
    return s.retryAtMs === null
      ? { status: MessageStatus.FAILED, dueMs: null }
      : { status: MessageStatus.DEFERRED, dueMs: s.retryAtMs };
  if (attempts >= policy.maxAttempts) return { status: MessageStatus.FAILED, dueMs: null };
  return { status: MessageStatus.DEFERRED, dueMs: nowMs + policy.retryBaseMs * 2 ** (attempts - 1) };
}

/**
 * Whether a message whose lease expired (its worker died or hung) fails rather than going back
 * to its lane: after the end of its retries under the schedule in hours (untilMs, kept by its
 * first deferral), otherwise on its last attempt of the short schedule.
 */
export function leaseExpiryFails(attempts: number, untilMs: number | null, policy: DeliveryPolicy, nowMs: number) {
  return untilMs !== null ? nowMs >= untilMs : attempts >= policy.maxAttempts;
}

export interface AckResult {
  current: boolean;
  status: MessageStatus;
}

export interface LaneCounts {
  lane: Lane;
  depth: number;
  ready: number;
  inFlight: number;
  deferred: number;
  oldestAgeMs: number;
}

export interface RecoverResult {
  /** Leases that expired: their messages are back at the head of their queue in the lane. */
  expired: number;
  /** Deferred messages whose retry came due: back in their lane. */
  retried: number;
  /** Leases that expired on a message's last attempt, or after the end of its retries: the message failed. */
  failed: number;
  /** When the earliest lease left runs out or the earliest retry left comes due (wall ms); null when there is none. */
  nextDueMs: number | null;
}

/** A message written to the records at a version. */
export interface Written {
  orgId: string;
  id: string;
  version: number;
}

// The hot store is several seams, one per job, each with its conformance suite run on every
// adapter. An adapter offers each seam as a value of its own (HotStore), and each consumer is
// given only the seams it uses.

/** Admission, and the projection of the records it reads (written through, rebuilt on a miss). */
export interface AdmissionStore {
  /**
   * Admits each input independently: the IP bucket and, for a valid token, the organization
   * bucket are checked and consumed in one atomic step (both or neither).
   */
  admit(inputs: AdmitInput[], nowMs: number): Promise<AdmitResult[]>;
  lookupToken(tokenHash: string): Promise<TokenLookup>;

  /** Writes an organization's projection, unless the one there has a newer version. */
  projectOrg(p: OrgProjection): Promise<void>;
  /** Gives the organization a new audience stamp: its tags or their counts changed in the records. */
  touchAudience(orgId: string): Promise<void>;
  /**
   * Sets what a token hash resolves to: an organization, or null for "not a valid token"
   * (remembered INVALID_TOKEN_TTL_MS). "write" replaces what is there (a change); "fill" only
   * fills a gap (a rebuild from the records, which must not undo a newer write).
   */
  projectToken(tokenHash: string, orgId: string | null, mode: "write" | "fill"): Promise<void>;
}

/** The mail pipeline: accepted messages in their lanes, released, leased to workers, acknowledged. */
export interface MailStore {
  /**
   * Idempotency, the verified-domain check, the organization's queue cap, guards, record and
   * enqueue in one atomic step. A message counts against its organization's cap from its
   * accept until it leaves the hot store (settled as final, or dropped).
   */
  enqueue(input: EnqueueInput, nowMs: number): Promise<EnqueueResult>;
  /**
   * Releases the lane's next messages, round-robin over organizations, each stamped with its
   * slot: as many as have a slot by plan.untilMs, at most plan.max.
   */
  release(lane: Lane, nowMs: number, plan: SlotPlan): Promise<ReleaseBatch>;
  /** Leases up to max released messages, transactional first. */
  lease(max: number, nowMs: number, visibilityMs: number): Promise<LeasedRecord[]>;
  /**
   * Only the current lease counts. An ack that does not (a lost lease, a message the store does
   * not have) is kept KEPT_ACK_MS for the reconciliation: that message must not be delivered again.
   */
  ack(input: AckInput, policy: DeliveryPolicy, nowMs: number): Promise<AckResult>;
  /** What the schedule in hours needs of a message, while leaseId is its current lease; null otherwise. */
  retryState(orgId: string, messageId: string, leaseId: string): Promise<RetryState | null>;
  /** Puts messages of expired leases and due retries back in their lanes (through the pacing again). */
  recover(nowMs: number, policy: DeliveryPolicy): Promise<RecoverResult>;
  /** A message that is still in the hot store (not yet settled in the records); null otherwise. */
  getMessage(orgId: string, messageId: string): Promise<MessageHistory | null>;
  laneCounts(nowMs: number): Promise<LaneCounts[]>;
  /**
   * Puts a mailbox on bounce cooldown for cooldownMs from now (a hard bounce learned after the
   * delivery), unless it is cooled longer already; returns when its cooldown ends.
   */
  coolDown(mailbox: string, nowMs: number, cooldownMs: number): Promise<number>;
  /**
   * What the accept step refuses an organization's sends for, besides the guards: the mailbox on
   * its suppression list (the reason), its bulk sends paused (why); a miss when this store has
   * not been given the organization's whole state in the last SENDING_STATE_TTL_MS (rebuild it
   * from the records: a write-through lost on the way is mended within that time).
   */
  sendingState(orgId: string, mailbox: string, nowMs: number): Promise<SendingState>;
  /**
   * Writes an organization's suppressions (mailbox -> reason; null: off the list) and the pause
   * of its bulk sends (a reason; null: resumed; undefined: unchanged). loaded: this is the whole
   * state, rebuilt from the records (a write-through without it changes what is there).
   */
  projectSending(orgId: string, change: SendingChange, nowMs: number): Promise<void>;
  /**
   * Holds the organization's messages waiting in the lane (held: its bulk sends are paused) or
   * lets them go again: a held organization is skipped where the lane's slots are given, its
   * messages stay queued (not released, not failed), and the slots go to the others; let go, it
   * is served in turn again at once. Kept in the hot store, without expiry.
   */
  holdLane(orgId: string, lane: Lane, held: boolean): Promise<void>;
  /** The organizations held in the lane. */
  laneHolds(lane: Lane): Promise<string[]>;
}

/** How long an organization's sending state rebuilt from the records is used before it is rebuilt again. */
export const SENDING_STATE_TTL_MS = 10 * 60_000;

export type SendingState = { kind: "miss" } | { kind: "known"; suppressed?: string; bulkPaused?: string };

export interface SendingChange {
  suppressions?: [mailbox: string, reason: string | null][];
  bulkPaused?: string | null;
  loaded?: boolean;
}

/** What the console shows of an organization's use of the service. */
export interface UsageStore {
  /** Adds to the organizations' refusal counts of the minute of nowMs (shared by every daemon on the store). */
  countRefusals(counts: RefusalCount[], nowMs: number): Promise<void>;
  /** An organization's bucket, refusals over the last hour and lanes; reads only. */
  orgUsage(orgId: string, plan: Plan, nowMs: number): Promise<OrgUsage>;
}

/** The outbox of message changes the records writer copies to the records. */
export interface OutboxStore {
  /**
   * Messages that changed since they were last written to the records (at most max), with the
   * payload of those not final until one batch with it was written (settled); the payloads of a
   * batch stop at OUTBOX_PAYLOAD_BYTES.
   */
  changedMessages(max: number): Promise<MessageHistory[]>;
  /**
   * Marks messages as written to the records at their version (with their payload, when given).
   * A message that has not changed since and is in a final state leaves the hot store. Returns
   * how many left.
   */
  settle(written: Written[]): Promise<number>;
}

/**
 * The payloads one outbox batch carries, at most (bytes; a batch has at least one message): a
 * body may be 1 MB, and a batch of 500 of them would be one 500 MB script reply and transaction.
 */
export const OUTBOX_PAYLOAD_BYTES = 4 * 1024 * 1024;

/** How long the hot store keeps a worker's ack that did not count (for the reconciliation). */
export const KEPT_ACK_MS = 24 * 3_600_000;

/** A message by its organization and id. */
export interface MessageRef {
  orgId: string;
  id: string;
}

/**
 * What the hot store has of a message the records hold as not final: the message ("here"),
 * nothing ("missing"), or only a worker's ack that did not count, the message lost ("acked": it
 * was delivered, bounced or deferred, and must not be delivered again).
 */
export type Presence = "here" | "missing" | "acked";

export interface RestoreResult {
  /** Put back in their lanes (waiting to be released, or a retry of a deferred ack). */
  requeued: number;
  /** Put back with the final outcome of a kept ack, for the records writer to write. */
  finished: number;
}

/**
 * The reconciliation of the hot store with the records: what the records hold as not final and
 * the hot store lost (a failover that lost writes, an old snapshot, a FLUSHALL) is put back, and
 * what an old snapshot brought back of an older state is dropped.
 */
export interface ReconcileStore {
  presence(messages: MessageRef[]): Promise<Presence[]>;
  /** Every message not yet final in the hot store (waiting, released, leased, deferred), at its version. */
  unfinishedHere(): Promise<Written[]>;
  /**
   * Drops messages still at the given versions (copies older than the records: an old snapshot),
   * from their lanes too; the reconciliation then puts them back from the records or not at all
   * (final there). Returns how many were dropped.
   */
  drop(stale: Written[]): Promise<number>;
  /**
   * Puts back messages as the records keep them (with their payload and events), each one that
   * the hot store does not have: with a kept ack's outcome when there is one, otherwise at the
   * head of its organization's queue in its lane. Each is marked changed for the records.
   */
  restore(messages: MessageHistory[], nowMs: number): Promise<RestoreResult>;
}

/** The leases that let one daemon at a time run a singleton. */
export interface SingletonLeases {
  /** Takes or renews the right to run a singleton (a lane's scheduler, the history writer); false while another daemon holds it. */
  holdLease(name: string, owner: string, ttlMs: number): Promise<boolean>;
}

/** What a lane signal says: a lane that was empty got a message waiting, or a message was released for the workers. */
export type LaneSignal = { kind: "waiting"; lane: Lane } | { kind: "ready" };

/**
 * Tells every daemon on the store that there is work, so that an idle lane scheduler or lease
 * stream waits for it instead of polling. A signal may be lost (Redis pub/sub is at most once,
 * and a reconnect misses what came meanwhile): waiters still look again now and then.
 */
export interface LaneSignals {
  /** Calls `on` for every signal, from any daemon on the store; returns what stops the watching. */
  watchLanes(on: (signal: LaneSignal) => void): () => void;
}

/** The connection to the backing service. */
export interface StoreLifecycle {
  /** Rejects when the backing service cannot be reached. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** Every seam of a hot store, each a value of its own: what an adapter offers and the daemon wires. */
export interface HotStore {
  admission: AdmissionStore;
  mail: MailStore;
  usage: UsageStore;
  outbox: OutboxStore;
  reconcile: ReconcileStore;
  leases: SingletonLeases;
  signals: LaneSignals;
  lifecycle: StoreLifecycle;
}
