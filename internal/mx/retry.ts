// When a message that failed for now is tried again: a schedule that starts within minutes (a
// greylisting receiver lets the second or third try through) and widens to every two hours
// until MAX_RETRY_HOURS after the first attempt. Pure: the caller passes now and the random
// source, so a 48-hour run is tested in microseconds.

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

export interface RetryPolicy {
  /** How long after the first attempt the message is still tried; then it fails. */
  maxRetryMs: number;
  /** How long after the first attempt a message not yet delivered is reported delayed. */
  delayedAfterMs: number;
  /** The waits after the first, second, ... failure. */
  stepsMs: number[];
  /** The wait after every later failure. */
  thenEveryMs: number;
  /** Spread of a scheduled wait, as a fraction of it (0.1: within 10% either side). */
  jitter: number;
  /** The shortest wait, even when a reply asks for less. */
  minDelayMs: number;
}

/**
 * 1, 5, 15, 30 and 60 minutes, then every 2 hours: greylisting (a first refusal for 1 to 15
 * minutes) is through by the third or fourth try, a receiver down for a quarter of an hour by
 * the fourth, and from the second hour on, tries every 2 hours keep within the bounds of
 * Postfix (backoff from 5 minutes to 66) and KumoMTA (20 minutes, doubling) without
 * hammering a receiver that is down for a day: 30 tries in 48 hours.
 */
export function retryPolicy(maxRetryHours = 48, divisor = 1): RetryPolicy {
  // divisor (RETRY_SCHEDULE_DIVISOR, tests only) shortens every duration alike, so a process
  // test sees the schedule's shape in seconds.
  return {
    maxRetryMs: (maxRetryHours * HOUR) / divisor,
    delayedAfterMs: (4 * HOUR) / divisor,
    stepsMs: [1, 5, 15, 30, 60].map((m) => (m * MINUTE) / divisor),
    thenEveryMs: (2 * HOUR) / divisor,
    jitter: 0.1,
    minDelayMs: MINUTE / divisor,
  };
}

export interface RetryInput {
  /** When the message was first tried. */
  firstAttemptMs: number;
  /** Attempts made so far, the one that just failed included (1 after the first). */
  attempts: number;
  /** When the attempt that just failed ended. */
  nowMs: number;
  /** The wait the receiver's reply asked for, if it named one. */
  retryAfterMs?: number;
  /** Whether the message was already reported delayed. */
  delayedSent: boolean;
}

export type RetryDecision =
  /** Try again at atMs; notifyDelayed: report the message delayed now (once). */
  | { kind: "retry"; atMs: number; notifyDelayed: boolean }
  /** The retry time is over: the message fails with its last reply. */
  | { kind: "fail" };

/**
 * The next attempt of a message whose attempt just failed for now. The scheduled wait is
 * spread by the jitter (so a campaign's messages deferred together do not all come back in the
 * same second); a wait the receiver asked for replaces it, never shortened (spread upwards
 * only) and never under minDelayMs. The last try is at the end of the retry time, not after it.
 */
export function nextRetry(input: RetryInput, policy: RetryPolicy, random: () => number = Math.random): RetryDecision {
  const deadline = input.firstAttemptMs + policy.maxRetryMs;
  if (input.nowMs >= deadline) return { kind: "fail" };
  const step = policy.stepsMs[input.attempts - 1] ?? policy.thenEveryMs;
  const waitMs =
    input.retryAfterMs !== undefined
      ? Math.max(input.retryAfterMs, policy.minDelayMs) * (1 + policy.jitter * random())
      : Math.max(step * (1 + policy.jitter * (2 * random() - 1)), policy.minDelayMs);
  const notifyDelayed = !input.delayedSent && input.nowMs - input.firstAttemptMs >= policy.delayedAfterMs;
  return { kind: "retry", atMs: Math.min(Math.round(input.nowMs + waitMs), deadline), notifyDelayed };
}
