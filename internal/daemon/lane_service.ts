import type { ServiceImpl } from "@connectrpc/connect";
import type { Clock } from "../clock/clock";
import type { LaneService, ListReleasesRequest } from "../gen/mailcore/limiter/v1/mail_pb";
import type { MailStore } from "../hotstore/hotstore";
import type { MailRuntime } from "./mail_runtime";
import { guard } from "./rpc_errors";

// The lane service (LaneService): the lanes' counts and pace, and this daemon's recent releases.

/** The window of the released-per-second figure. */
const RELEASE_RATE_WINDOW_MS = 10_000;

export interface LaneDeps {
  mail: Pick<MailStore, "laneCounts">;
  runtime: Pick<MailRuntime, "releasesSince">;
  clock: Clock;
  laneRate: number;
}

/** LaneService's methods, by name. */
export function laneHandlers(deps: LaneDeps): ServiceImpl<typeof LaneService> {
  return {
    getLanes: () => getLanes(deps),
    listReleases: (req) => listReleases(deps, req),
  };
}

export async function getLanes(deps: LaneDeps) {
  const now = deps.clock.nowMs();
  const counts = await guard(() => deps.mail.laneCounts(now));
  return {
    lanes: counts.map((c) => ({
      lane: c.lane,
      depth: BigInt(c.depth),
      ready: BigInt(c.ready),
      inFlight: BigInt(c.inFlight),
      deferred: BigInt(c.deferred),
      oldestAgeMs: BigInt(c.oldestAgeMs),
      rate: deps.laneRate,
      releasedPerSecond:
        deps.runtime.releasesSince(c.lane, now - RELEASE_RATE_WINDOW_MS, now).length / (RELEASE_RATE_WINDOW_MS / 1_000),
    })),
  };
}

export async function listReleases(deps: LaneDeps, req: ListReleasesRequest) {
  return {
    releases: deps.runtime.releasesSince(req.lane, Number(req.sinceMs)).map((r) => ({
      messageId: r.messageId,
      orgId: r.orgId,
      slotAtMs: BigInt(r.slotMs),
      releasedAtMs: BigInt(r.releasedAtMs),
    })),
  };
}
