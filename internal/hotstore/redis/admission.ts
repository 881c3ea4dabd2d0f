import { type Plan, Verdict } from "../../gen/mailcore/limiter/v1/limiter_pb";
import type { OrgProjection } from "../../model/projection";
import { IP_PERIOD_MS, IP_QUOTA, MINIMUM_PLAN, ORG_PERIOD_MS, PLANS, planQuota } from "../../plans/plans";
import {
  type AdmissionStore,
  type AdmitInput,
  type AdmitResult,
  INVALID_TOKEN_TTL_MS,
  newAudienceStamp,
  type TokenLookup,
} from "../hotstore";
import { codes, keys } from "./layout";
import type { ScriptedRedis } from "./scripts";

const TOKEN_CACHE_MAX = 100_000;
const MISS = codes("V").get("MISS")!;

type AdmitReply = [number, number, string, number, number, number, string?];

/** Admission and the projection it reads, in Redis. */
export class RedisAdmission implements AdmissionStore {
  /** token hash to org id; the admit script re-checks the token key, so a stale entry is harmless. */
  private readonly tokenOrg = new Map<string, string>();

  constructor(
    private readonly redis: ScriptedRedis,
    /** On a cluster, the IP's and the organization's buckets live in two slots. */
    private readonly cluster: boolean,
  ) {}

  async admit(inputs: AdmitInput[], nowMs: number): Promise<AdmitResult[]> {
    if (this.cluster) return Promise.all(inputs.map((input) => this.admitAcrossSlots(input, nowMs)));
    return this.admitOnePrimary(inputs, nowMs);
  }

  /**
   * On a cluster the IP bucket and the organization's bucket live in two slots: the IP's token
   * is reserved, then the organization's taken, or the IP's refunded. The token is read every
   * time (no cache: no script there re-checks it).
   */
  private async admitAcrossSlots(input: AdmitInput, nowMs: number): Promise<AdmitResult> {
    const ipArgs = [nowMs, IP_QUOTA, IP_PERIOD_MS];
    const ipKey = keys.ipBucket(input.ip);
    const [owner, [taken, ipRetry]] = await Promise.all([
      input.tokenHash ? this.redis.get(keys.token(input.tokenHash)) : Promise.resolve(""),
      this.redis.admit_ip(ipKey, ...ipArgs) as Promise<[number, number]>,
    ]);
    const refund = () => (taken === 1 ? this.redis.refund_ip(ipKey, ...ipArgs) : undefined);
    if (owner === null) {
      await refund();
      return { verdict: MISS as Verdict, miss: true, remaining: 0, resetMs: 0, retryAfterMs: 0 };
    }
    if (owner === "") {
      const minimum = planQuota(MINIMUM_PLAN);
      return taken === 1
        ? { verdict: Verdict.UNAUTHENTICATED, remaining: minimum, resetMs: 0, retryAfterMs: 0 }
        : { verdict: Verdict.IP_LIMITED, remaining: minimum, resetMs: 0, retryAfterMs: ipRetry };
    }
    const [verdict, plan, slug, remaining, resetMs, retryAfterMs, audienceStamp] = (await this.redis.admit_org(
      keys.org(owner),
      keys.orgBucket(owner),
      nowMs,
      ORG_PERIOD_MS,
      ...PLANS.map(planQuota),
      taken,
    )) as AdmitReply;
    if (verdict !== Verdict.ALLOWED) await refund();
    if (verdict === MISS) return { verdict: verdict as Verdict, miss: true, remaining: 0, resetMs: 0, retryAfterMs: 0 };
    return {
      verdict: verdict as Verdict,
      org: { id: owner, slug, plan: plan as Plan, audienceStamp },
      remaining,
      resetMs,
      retryAfterMs: taken === 1 ? retryAfterMs : ipRetry,
    };
  }

  /**
   * On one Redis the whole batch is one script call: each token's organization comes from memory
   * (or one GET, auto-pipelined, when not known yet), and the script re-checks the token key, so
   * a stale entry is harmless.
   */
  private async admitOnePrimary(inputs: AdmitInput[], nowMs: number): Promise<AdmitResult[]> {
    const orgs = await Promise.all(inputs.map((input) => this.orgOfToken(input.tokenHash)));
    const results: AdmitResult[] = new Array(inputs.length);
    const scriptKeys: string[] = [];
    const orgArgs: string[] = [];
    const asked: number[] = [];
    inputs.forEach((input, i) => {
      const orgId = orgs[i];
      if (orgId === null) {
        results[i] = { verdict: MISS as Verdict, miss: true, remaining: 0, resetMs: 0, retryAfterMs: 0 };
        return;
      }
      scriptKeys.push(keys.ipBucket(input.ip));
      if (orgId !== undefined) scriptKeys.push(keys.token(input.tokenHash!), keys.org(orgId), keys.orgBucket(orgId));
      orgArgs.push(orgId ?? "");
      asked.push(i);
    });
    if (asked.length === 0) return results;
    const replies = (await this.redis.admit(
      scriptKeys.length,
      ...scriptKeys,
      nowMs,
      IP_QUOTA,
      IP_PERIOD_MS,
      ORG_PERIOD_MS,
      ...PLANS.map(planQuota),
      planQuota(MINIMUM_PLAN),
      ...orgArgs,
    )) as AdmitReply[];
    asked.forEach((i, n) => {
      const [verdict, plan, slug, remaining, resetMs, retryAfterMs, audienceStamp] = replies[n]!;
      const { tokenHash } = inputs[i]!;
      const orgId = orgs[i] ?? undefined;
      // A token whose organization changed, or that is no longer valid: asked again next time.
      if (verdict === MISS || (orgId !== undefined && plan === 0)) this.tokenOrg.delete(tokenHash!);
      results[i] =
        verdict === MISS
          ? { verdict: verdict as Verdict, miss: true, remaining: 0, resetMs: 0, retryAfterMs: 0 }
          : {
              verdict: verdict as Verdict,
              org:
                plan === 0 || orgId === undefined ? undefined : { id: orgId, slug, plan: plan as Plan, audienceStamp },
              remaining,
              resetMs,
              retryAfterMs,
            };
    });
    return results;
  }

  /** The organization of a token: undefined without a valid one, null when the projection has no entry. */
  private async orgOfToken(tokenHash: string | null | undefined): Promise<string | undefined | null> {
    if (!tokenHash) return undefined;
    const known = this.tokenOrg.get(tokenHash);
    if (known !== undefined) return known;
    const owner = await this.redis.get(keys.token(tokenHash));
    if (owner === null) return null;
    if (owner !== "") this.remember(tokenHash, owner);
    return owner || undefined;
  }

  private remember(tokenHash: string, orgId: string): void {
    if (this.tokenOrg.size >= TOKEN_CACHE_MAX) this.tokenOrg.clear();
    this.tokenOrg.set(tokenHash, orgId);
  }

  async lookupToken(tokenHash: string): Promise<TokenLookup> {
    const owner = await this.redis.get(keys.token(tokenHash));
    if (owner === null) return { kind: "miss" };
    if (owner === "") return { kind: "invalid" };
    const [slug, plan] = await this.redis.hmget(keys.org(owner), "slug", "plan");
    if (!slug || !plan) return { kind: "miss" };
    return { kind: "valid", org: { id: owner, slug, plan: Number(plan) as Plan } };
  }

  async projectOrg(p: OrgProjection): Promise<void> {
    await this.redis.project_org(keys.org(p.id), p.version, p.slug, p.plan, newAudienceStamp(), ...p.verifiedDomains);
  }

  async touchAudience(orgId: string): Promise<void> {
    // On a missing projection this leaves a hash without a plan: admission misses it and rebuilds it, with a new stamp.
    await this.redis.hset(keys.org(orgId), "a", newAudienceStamp());
  }

  async projectToken(tokenHash: string, orgId: string | null, mode: "write" | "fill"): Promise<void> {
    const k = keys.token(tokenHash);
    if (mode === "write") this.tokenOrg.delete(tokenHash);
    if (orgId === null) {
      if (mode === "write") await this.redis.set(k, "", "PX", INVALID_TOKEN_TTL_MS);
      else await this.redis.set(k, "", "PX", INVALID_TOKEN_TTL_MS, "NX");
    } else if (mode === "write") await this.redis.set(k, orgId);
    else await this.redis.set(k, orgId, "NX");
  }
}
