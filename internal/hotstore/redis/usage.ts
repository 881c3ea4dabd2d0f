import type { Plan } from "../../gen/mailcore/limiter/v1/limiter_pb";
import { LANES } from "../../mail/policy";
import { ORG_PERIOD_MS, planQuota } from "../../plans/plans";
import { type OrgUsage, type RefusalCount, REFUSAL_MINUTES, RELEASE_WINDOW_S, type UsageStore } from "../hotstore";
import { keys } from "./layout";
import type { ScriptedRedis } from "./scripts";

/** The refusal counts and what the console reads of an organization, in Redis. */
export class RedisUsage implements UsageStore {
  constructor(private readonly redis: ScriptedRedis) {}

  async countRefusals(counts: RefusalCount[], nowMs: number): Promise<void> {
    const minute = Math.floor(nowMs / 60_000);
    // Kept from the minute's start until it leaves the console's hour.
    const keepMs = (minute + REFUSAL_MINUTES + 1) * 60_000 - nowMs;
    await Promise.all(
      counts.flatMap(({ orgId, kind, n }) => {
        const k = keys.refusals(orgId, minute);
        return [this.redis.hincrby(k, kind, n), this.redis.pexpire(k, keepMs)];
      }),
    );
  }

  async orgUsage(orgId: string, plan: Plan, nowMs: number): Promise<OrgUsage> {
    // Two scripts, one slot each: the organization's bucket and refusals; its part of the lanes.
    const [[remaining, resetMs, minutes], lanes] = (await Promise.all([
      this.redis.usage_org(keys.orgBucket(orgId), nowMs, orgId, planQuota(plan), ORG_PERIOD_MS, REFUSAL_MINUTES),
      this.redis.usage_lanes(
        ...LANES.map((lane) => keys.orgQueue(orgId, lane)),
        nowMs,
        orgId,
        RELEASE_WINDOW_S,
        ...LANES,
      ),
    ])) as [[number, number, [number, number, number, number][]], [number, number][]];
    return {
      remaining,
      resetMs,
      refusals: minutes.map(([minuteStartMs, quota, ip, recipient]) => ({ minuteStartMs, quota, ip, recipient })),
      lanes: lanes.map(([depth, released], i) => ({ lane: LANES[i]!, depth, released })),
    };
  }
}
