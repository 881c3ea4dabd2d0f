import type { DeliveryOutcome, Lane, MessageStatus } from "../gen/mailcore/limiter/v1/mail_pb";

// The sending half of the Store seam: the atomic accept step, the lanes, leases and acks.

/** At most this many expired leases and due retries are put back per lane and recovery round. */
export const RECOVER_BATCH = 500;

export interface GuardLimits {
  shortMax: number;
  shortWindowMs: number;
  longMax: number;
  longWindowMs: number;
}

export interface EnqueueInput {
  orgId: string;
  messageId: string;
  lane: Lane;
  /** The message as the service serialized it; opaque to the store. */
  payload: string;
  /** The normalised recipient mailbox (lower case, no +tag). */
  mailbox: string;
  /** Refuse while the mailbox is on bounce cooldown (transactional sends). */
  checkCooldown: boolean;
  /** Count the send against the mailbox's windows (transactional sends to real mailboxes). */
  countGuards: boolean;
  guards: GuardLimits;
  idempotency?: { key: string; bodyHash: string; ttlMs: number };
}

export type GuardReason = "short_window" | "long_window" | "bounce_cooldown";

export type EnqueueResult =
  | { kind: "accepted"; messageId: string }
  | { kind: "replayed"; messageId: string }
  | { kind: "conflict" }
  | { kind: "limited"; reason: GuardReason; retryAfterMs: number };

export interface Released {
  orgId: string;
  messageId: string;
}

export interface LeasedRecord {
  leaseId: string;
  messageId: string;
  orgId: string;
  lane: Lane;
  payload: string;
  attempt: number;
}

export interface AckInput {
  orgId: string;
  messageId: string;
  leaseId: string;
  outcome: DeliveryOutcome;
  detail: string;
}

export interface DeliveryPolicy {
  maxAttempts: number;
  /** The n-th retry waits retryBaseMs * 2^(n-1). */
  retryBaseMs: number;
  bounceCooldownMs: number;
  /** How long a delivered, bounced or failed message stays readable. */
  retentionMs: number;
}

export interface AckResult {
  current: boolean;
  status: MessageStatus;
}

export interface MessageEventRecord {
  status: MessageStatus;
  atMs: number;
  detail: string;
}

export interface MessageRecord {
  id: string;
  orgId: string;
  lane: Lane;
  payload: string;
  status: MessageStatus;
  attempts: number;
  createdMs: number;
  updatedMs: number;
  events: MessageEventRecord[];
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
  /** Leases that expired on a message's last attempt: the message failed. */
  failed: number;
}

export interface MailStore {
  isDomainVerified(orgId: string, domain: string): Promise<boolean>;
  /** Idempotency, guards, record and enqueue in one atomic step. */
  enqueue(input: EnqueueInput, nowMs: number): Promise<EnqueueResult>;
  /** Releases the next message of the lane, round-robin over organizations; null when empty. */
  release(lane: Lane, nowMs: number): Promise<Released | null>;
  /** Leases up to max released messages, transactional first. */
  lease(max: number, nowMs: number, visibilityMs: number): Promise<LeasedRecord[]>;
  ack(input: AckInput, policy: DeliveryPolicy, nowMs: number): Promise<AckResult>;
  /** Puts messages of expired leases and due retries back in their lanes (through the pacing again). */
  recover(nowMs: number, policy: DeliveryPolicy): Promise<RecoverResult>;
  getMessage(orgId: string, messageId: string): Promise<MessageRecord | null>;
  laneCounts(nowMs: number): Promise<LaneCounts[]>;
  /** Takes or renews the right to run a lane's scheduler; false while another daemon holds it. */
  holdScheduler(lane: Lane, owner: string, ttlMs: number): Promise<boolean>;
}
