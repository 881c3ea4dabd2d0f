// How a lane's releases were paced, read back from the daemon (LaneService.ListReleases), and
// how times seen elsewhere (the file sink's) were spaced.
import type { Release } from "../gen/mailcore/limiter/v1/mail_pb";

export interface Spacing {
  /** Per whole second from the first time (the last second is partial). */
  perSecond: number[];
  /** The most in any sliding 1000 ms. */
  maxSliding: number;
  /** From the first to the last. */
  spanMs: number;
}

export interface Pacing extends Spacing {
  /** How long before its slot each message was released: never negative, at most the lane's lead. */
  lead: { min: number; max: number };
}

/** Counts per whole second from the first, the most in any window [t, t + 1000), and the span. */
export function spacing(times: number[]): Spacing {
  const sorted = [...times].sort((a, b) => a - b);
  const first = sorted[0]!;
  const perSecond: number[] = [];
  for (const t of sorted) {
    const s = Math.floor((t - first) / 1_000);
    perSecond[s] = (perSecond[s] ?? 0) + 1;
  }
  let maxSliding = 0;
  for (let i = 0, j = 0; i < sorted.length; i++) {
    while (sorted[j]! <= sorted[i]! - 1_000) j++;
    maxSliding = Math.max(maxSliding, i - j + 1);
  }
  return { perSecond: Array.from(perSecond, (n) => n ?? 0), maxSliding, spanMs: sorted.at(-1)! - first };
}

/** The lane's pacing is its slots'. */
export function pacing(rs: Release[]): Pacing {
  const lead = rs.map((r) => Number(r.slotAtMs - r.releasedAtMs));
  return {
    ...spacing(rs.map((r) => Number(r.slotAtMs))),
    lead: { min: Math.min(...lead), max: Math.max(...lead) },
  };
}
