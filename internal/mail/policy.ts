import { Lane, MessageStatus } from "../gen/mailcore/limiter/v1/mail_pb";

// The sending rules (recipient guards, mailbox normalisation, fixtures;
// docs/adr/0013-atomic-accept-step.md), in one place.

/** The two lanes, transactional first (the order leases are served in). */
export const LANES = [Lane.TRANSACTIONAL, Lane.BULK] as const;

/** A lane's name in the HTTP API and on the command line. */
export function laneName(lane: Lane): "transactional" | "bulk" {
  return lane === Lane.BULK ? "bulk" : "transactional";
}

export { normalizeEmail } from "./identity";

/** The states a message ends in; it then leaves the hot store for the records alone. */
export const FINAL_STATUSES: ReadonlySet<MessageStatus> = new Set([
  MessageStatus.DELIVERED,
  MessageStatus.BOUNCED,
  MessageStatus.FAILED,
]);

/** The recipient guards: at most shortMax accepted sends per mailbox in any shortWindowMs, longMax in any longWindowMs. */
export interface GuardLimits {
  shortMax: number;
  shortWindowMs: number;
  longMax: number;
  longWindowMs: number;
}

/** 5 accepted sends in any 10 minutes and 20 in any 24 hours, per (organization, mailbox). */
export const GUARD_LIMITS: GuardLimits = {
  shortMax: 5,
  shortWindowMs: 10 * 60_000,
  longMax: 20,
  longWindowMs: 24 * 3_600_000,
};

export const IDEMPOTENCY_TTL_MS = 24 * 3_600_000;

/**
 * When a send refused for its organization's full queue is worth trying again (Retry-After):
 * the queue drains only as the lanes release, which no one send can foresee.
 */
export const QUEUE_FULL_RETRY_MS = 60_000;

/** What a send refused for a full queue is told, by the cap it met. */
export const QUEUE_FULL_MESSAGES = {
  messages: "The organization has as many messages queued as it may; retry once some have gone out.",
  bytes: "The organization has as many bytes of messages queued as it may; retry once some have gone out.",
} as const;

/** Test-mode fixture addresses: delivered@, bounced@, complained@, deferred@ (with an optional +label). */
export const FIXTURE_DOMAIN = "fixtures.test";

export type FixtureKind = "delivered" | "bounced" | "complained" | "deferred";

export function domainOf(address: string): string {
  return address.slice(address.lastIndexOf("@") + 1).toLowerCase();
}

/** A mailbox as the guards compare it: lower-cased, any +tag removed. */
export function normalizeMailbox(address: string): string {
  const at = address.lastIndexOf("@");
  const local = address.slice(0, at).toLowerCase();
  const plus = local.indexOf("+");
  return `${plus >= 0 ? local.slice(0, plus) : local}@${address.slice(at + 1).toLowerCase()}`;
}

/**
 * The simulated outcome of a fixture address; undefined for a real mailbox. Every address at
 * the fixture domain is a fixture (never a real mailbox); a local part that names no outcome
 * is simulated as delivered.
 */
export function fixtureKind(address: string): FixtureKind | undefined {
  const mailbox = normalizeMailbox(address);
  if (domainOf(mailbox) !== FIXTURE_DOMAIN) return undefined;
  const local = mailbox.slice(0, mailbox.indexOf("@"));
  return (["bounced", "complained", "deferred"] as const).find((k) => k === local) ?? "delivered";
}
