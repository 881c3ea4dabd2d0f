// When webhook deliveries are retried and when an endpoint is given up on (docs/guide.md,
// "Webhooks"). Pure: the caller passes the random source, so tests pin the jitter.

const S = 1_000;
const MIN = 60 * S;
const H = 60 * MIN;

/** The waits after the 1st, 2nd, ... failed attempt; after the last one the delivery fails. */
export const RETRY_SCHEDULE_MS: readonly number[] = [5 * S, 5 * MIN, 30 * MIN, 2 * H, 5 * H, 10 * H, 10 * H];
/** A 2xx answer within this time is a success; anything else, or nothing, a failure. */
export const ATTEMPT_TIMEOUT_MS = 15 * S;
/** An endpoint whose attempts have all failed for this long is disabled. */
export const DISABLE_AFTER_MS = 5 * 24 * H;
/** Each wait is spread by up to this fraction either way, so retries of one outage do not arrive together. */
export const JITTER = 0.1;

/**
 * The wait before the next attempt after `failed` failed attempts, or undefined when the
 * schedule is used up. `divisor` shortens the schedule (WEBHOOK_SCHEDULE_DIVISOR, tests only).
 */
export function retryDelayMs(failed: number, random: () => number, divisor = 1): number | undefined {
  const base = RETRY_SCHEDULE_MS[failed - 1];
  if (base === undefined) return undefined;
  return Math.round((base * (1 - JITTER + 2 * JITTER * random())) / divisor);
}

/** The retry policy the records apply to a failed attempt: the schedule with jitter, the disable window. */
export function webhookRetryPolicy(divisor = 1, random: () => number = Math.random) {
  return {
    retryDelayMs: (failed: number) => retryDelayMs(failed, random, divisor),
    disableAfterMs: DISABLE_AFTER_MS / divisor,
  };
}
