// A token bucket of capacity q refilled continuously at q tokens per period.
//
// The level is kept in integer units of 1/period of a token ("token-milliseconds"):
// a full bucket holds q*period units, one request costs period units, and every
// millisecond adds q units. All arithmetic is on integers, so premium's 700 per minute
// (85.714... ms per token) is exact, and the Redis scripts (the prelude's bucket functions) compute
// the very same numbers. A missing state means a full bucket.

export interface BucketState {
  level: number;
  atMs: number;
}

export interface BucketLimit {
  quota: number;
  periodMs: number;
}

/** The level at nowMs after refilling since the state was saved. */
export function levelAt(state: BucketState | undefined, limit: BucketLimit, nowMs: number): number {
  const capacity = limit.quota * limit.periodMs;
  if (!state) return capacity;
  const elapsed = Math.max(0, nowMs - state.atMs);
  return Math.min(capacity, state.level + elapsed * limit.quota);
}

/** Whole requests the level still admits. */
export function remaining(level: number, limit: BucketLimit): number {
  return Math.floor(level / limit.periodMs);
}

/** Milliseconds until the bucket is full again. */
export function msUntilFull(level: number, limit: BucketLimit): number {
  return Math.ceil((limit.quota * limit.periodMs - level) / limit.quota);
}

/** Milliseconds until the level admits one request. */
export function msUntilAdmit(level: number, limit: BucketLimit): number {
  return Math.max(0, Math.ceil((limit.periodMs - level) / limit.quota));
}
