import type { Plan } from "../../gen/mailcore/limiter/v1/limiter_pb";
import type { Lane } from "../../gen/mailcore/limiter/v1/mail_pb";
import { msUntilFull, remaining } from "../../bucket/bucket";
import { LANES } from "../../mail/policy";
import {
  type OrgUsage,
  type RefusalCount,
  type RefusalKind,
  REFUSAL_MINUTES,
  RELEASE_WINDOW_S,
  type UsageStore,
} from "../hotstore";
import { type EmbeddedAdmission, orgBucketLimit } from "./admission";
import { SlotCounters } from "./counters";
import type { EmbeddedMessages } from "./messages";

/** The refusal counts and what the console reads of an organization, on the embedded store. */
export class EmbeddedUsage implements UsageStore {
  private readonly refusals = new SlotCounters<RefusalKind>(60_000, REFUSAL_MINUTES);

  constructor(
    private readonly admission: Pick<EmbeddedAdmission, "orgLevel">,
    private readonly messages: Pick<EmbeddedMessages, "orgDepth">,
    /** The lanes' releases per organization and second (the mail pipeline counts them). */
    private readonly released: SlotCounters<Lane>,
  ) {}

  async countRefusals(counts: RefusalCount[], nowMs: number): Promise<void> {
    for (const { orgId, kind, n } of counts) this.refusals.add(orgId, kind, n, nowMs);
  }

  async orgUsage(orgId: string, plan: Plan, nowMs: number): Promise<OrgUsage> {
    const limit = orgBucketLimit(plan);
    const level = this.admission.orgLevel(orgId, plan, nowMs);
    const minute = this.refusals.slotOf(nowMs);
    const second = this.released.slotOf(nowMs);
    return {
      remaining: remaining(level, limit),
      resetMs: msUntilFull(level, limit),
      refusals: Array.from({ length: REFUSAL_MINUTES }, (_, i) => {
        const m = minute - REFUSAL_MINUTES + 1 + i;
        return {
          minuteStartMs: m * 60_000,
          quota: this.refusals.get(orgId, m, "quota"),
          ip: this.refusals.get(orgId, m, "ip"),
          recipient: this.refusals.get(orgId, m, "recipient"),
        };
      }),
      lanes: LANES.map((lane) => {
        let released = 0;
        for (let s = second - RELEASE_WINDOW_S; s < second; s++) released += this.released.get(orgId, s, lane);
        return { lane, depth: this.messages.orgDepth(orgId, lane), released };
      }),
    };
  }

  /** Drops the counts that have left their windows. */
  sweep(nowMs: number): void {
    this.refusals.sweep(nowMs);
    this.released.sweep(nowMs);
  }
}
