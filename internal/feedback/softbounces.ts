// When soft bounces of one mailbox amount to a hard one. A soft bounce (classify.ts) is the final
// outcome of one message: the receiving side, or our own retries, already tried for hours or days.
// One says little (a mailbox full this afternoon); several in a row, spread over days, with nothing
// delivered between them, say the mailbox is not read any more.
//
// The rule: at least 3 soft bounces since the last delivery, the first and the last of them at
// least 72 hours apart, none older than 30 days. The span keeps a burst (a campaign and two
// password resets to a full mailbox within an hour) from counting as persistence; the 30 days
// forget a mailbox that was full last season. Hard bounces are suppressed at once elsewhere;
// policy and transient outcomes are not the mailbox's and neither count nor reset the count.
// What the caller does with the verdict is its own: the history is one organization's to one
// mailbox, and the suppression it leads to is that organization's.
import type { BounceType } from "./classify";

/** One message's final outcome for the mailbox, and when it was known. */
export interface DeliveryOutcome {
  atMs: number;
  outcome: "delivered" | BounceType;
}

export interface SoftBounceRule {
  /** Soft bounces since the last delivery that suppress the mailbox. */
  count: number;
  /** How far apart the first and the last of them must be at least. */
  spanMs: number;
  /** Soft bounces older than this (before now) are forgotten. */
  windowMs: number;
}

const HOUR_MS = 3_600_000;

export const SOFT_BOUNCE_RULE: SoftBounceRule = { count: 3, spanMs: 72 * HOUR_MS, windowMs: 30 * 24 * HOUR_MS };

export interface SoftBounceVerdict {
  suppress: boolean;
  /** Soft bounces that count: since the last delivery and within the window. */
  softBounces: number;
  /** Hours from the first to the last of them. */
  spanHours: number;
}

/** Whether a mailbox's soft bounces amount to a hard bounce (the rule at the top of this file). */
export function softBounceVerdict(
  history: readonly DeliveryOutcome[],
  nowMs: number,
  rule: SoftBounceRule = SOFT_BOUNCE_RULE,
): SoftBounceVerdict {
  const recent = history.filter((e) => e.atMs > nowMs - rule.windowMs && e.atMs <= nowMs);
  const lastDelivery = recent.reduce((t, e) => (e.outcome === "delivered" ? Math.max(t, e.atMs) : t), -Infinity);
  const soft = recent
    .filter((e) => e.outcome === "soft" && e.atMs > lastDelivery)
    .map((e) => e.atMs)
    .sort((a, b) => a - b);
  const spanMs = soft.length > 0 ? soft[soft.length - 1]! - soft[0]! : 0;
  return {
    suppress: soft.length >= rule.count && spanMs >= rule.spanMs,
    softBounces: soft.length,
    spanHours: spanMs / HOUR_MS,
  };
}
