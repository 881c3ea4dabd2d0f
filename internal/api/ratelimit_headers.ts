import type { AdmitResponse } from "../gen/mailcore/limiter/v1/limiter_pb";
import { planName } from "../plans/plans";

const WINDOW_SECONDS = 60;

/**
 * The rate-limit headers, byte for byte as internal/site/rate-limits.md shows them, with the
 * legacy X-RateLimit-* copies. Retry-After is added by the caller on a 429.
 */
export function rateLimitHeaders(
  a: Pick<AdmitResponse, "plan" | "limit" | "remaining" | "resetSeconds">,
): Record<string, string> {
  const policy = `"${planName(a.plan)}"`;
  const limit = String(a.limit);
  const remaining = String(a.remaining);
  const reset = String(a.resetSeconds);
  return {
    "RateLimit-Policy": `${policy};q=${limit};w=${WINDOW_SECONDS}`,
    RateLimit: `${policy};r=${remaining};t=${reset}`,
    "RateLimit-Limit": limit,
    "RateLimit-Remaining": remaining,
    "RateLimit-Reset": reset,
    "X-RateLimit-Limit": limit,
    "X-RateLimit-Remaining": remaining,
    "X-RateLimit-Reset": reset,
  };
}
