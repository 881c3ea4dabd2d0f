// How a lane's releases were paced, read back from the daemon (LaneService.ListReleases): by
// their slots, the times the messages leave (workers hold each until its slot).
import type { Release } from "../gen/mailcore/limiter/v1/mail_pb";

export interface Pacing {
  /** Slots per whole second from the first (the last second is partial). */
  perSecond: number[];
  /** The most slots in any sliding 1000 ms. */
  maxSliding: number;
  /** From the first slot to the last. */
  spanMs: number;
  /** How far ahead of their slots messages were released (the store call; at most the lead). */
  lead: { p50: number; p99: number; max: number };
}

export function pacing(rs: Release[]): Pacing {
  const times = rs.map((r) => Number(r.slotAtMs)).sort((a, b) => a - b);
  const first = times[0]!;
  const perSecond: number[] = [];
  for (const t of times)
    perSecond[Math.floor((t - first) / 1_000)] = (perSecond[Math.floor((t - first) / 1_000)] ?? 0) + 1;
  let maxSliding = 0;
  for (let i = 0, j = 0; i < times.length; i++) {
    while (times[j]! < times[i]! - 999) j++;
    maxSliding = Math.max(maxSliding, i - j + 1);
  }
  const lead = rs.map((r) => Number(r.slotAtMs - r.releasedAtMs)).sort((a, b) => a - b);
  const q = (p: number) => lead[Math.min(lead.length - 1, Math.floor(p * lead.length))]!;
  return {
    perSecond: Array.from(perSecond, (n) => n ?? 0),
    maxSliding,
    spanMs: times.at(-1)! - first,
    lead: { p50: q(0.5), p99: q(0.99), max: lead.at(-1)! },
  };
}
