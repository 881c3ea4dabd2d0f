import { type Plan, Verdict } from "../../gen/mailcore/limiter/v1/limiter_pb";
import { type BucketLimit, type BucketState, levelAt, msUntilAdmit, msUntilFull, remaining } from "../../bucket/bucket";
import type { OrgProjection } from "../../model/projection";
import { IP_PERIOD_MS, IP_QUOTA, MINIMUM_PLAN, ORG_PERIOD_MS, planQuota } from "../../plans/plans";
import {
  type AdmissionStore,
  type AdmitInput,
  type AdmitResult,
  INVALID_TOKEN_TTL_MS,
  newAudienceStamp,
  type OrgRef,
  type TokenLookup,
} from "../hotstore";

const IP_LIMIT: BucketLimit = { quota: IP_QUOTA, periodMs: IP_PERIOD_MS };
/** Token hashes the projection remembers at most; past that it starts again (a miss is only a rebuild). */
const TOKENS_MAX = 100_000;

/** An organization's request bucket, as admission and the console name it. */
const orgBucketKey = (orgId: string) => `org:${orgId}`;

interface Bucket extends BucketState {
  limit: BucketLimit;
}

interface ProjectedOrg extends OrgRef {
  version: number;
  domains: Set<string>;
}

/**
 * Admission on the embedded store, in memory: the buckets (a restart forgives what was
 * consumed) and the projection of the records (it rebuilds from them on a miss).
 */
export class EmbeddedAdmission implements AdmissionStore {
  private readonly buckets = new Map<string, Bucket>();
  /** Token hash to org id, or to null (not a valid token) until expiresMs. */
  private readonly tokens = new Map<string, { orgId: string | null; expiresMs: number }>();
  private readonly orgs = new Map<string, ProjectedOrg>();

  constructor(private readonly clock: () => number) {}

  async admit(inputs: AdmitInput[], nowMs: number): Promise<AdmitResult[]> {
    return inputs.map((input) => this.admitOne(input, nowMs));
  }

  private admitOne(input: AdmitInput, nowMs: number): AdmitResult {
    const lookup: TokenLookup = input.tokenHash ? this.lookup(input.tokenHash) : { kind: "invalid" };
    if (lookup.kind === "miss")
      return { verdict: Verdict.UNSPECIFIED, miss: true, remaining: 0, resetMs: 0, retryAfterMs: 0 };

    const ipKey = `ip:${input.ip}`;
    const ipLevel = levelAt(this.buckets.get(ipKey), IP_LIMIT, nowMs);
    const ipAllows = ipLevel >= IP_LIMIT.periodMs;
    if (lookup.kind === "invalid") {
      const minimum = planQuota(MINIMUM_PLAN);
      if (!ipAllows) {
        return {
          verdict: Verdict.IP_LIMITED,
          remaining: minimum,
          resetMs: 0,
          retryAfterMs: msUntilAdmit(ipLevel, IP_LIMIT),
        };
      }
      this.save(ipKey, ipLevel - IP_LIMIT.periodMs, IP_LIMIT, nowMs);
      return { verdict: Verdict.UNAUTHENTICATED, remaining: minimum, resetMs: 0, retryAfterMs: 0 };
    }

    const { org } = lookup;
    const orgLimit = orgBucketLimit(org.plan);
    const orgKey = orgBucketKey(org.id);
    const orgLevel = levelAt(this.buckets.get(orgKey), orgLimit, nowMs);
    const limited = (verdict: Verdict, retryAfterMs: number): AdmitResult => ({
      verdict,
      org,
      remaining: remaining(orgLevel, orgLimit),
      resetMs: msUntilFull(orgLevel, orgLimit),
      retryAfterMs,
    });
    if (!ipAllows) return limited(Verdict.IP_LIMITED, msUntilAdmit(ipLevel, IP_LIMIT));
    if (orgLevel < orgLimit.periodMs) return limited(Verdict.ORG_LIMITED, msUntilAdmit(orgLevel, orgLimit));

    const orgAfter = orgLevel - orgLimit.periodMs;
    this.save(ipKey, ipLevel - IP_LIMIT.periodMs, IP_LIMIT, nowMs);
    this.save(orgKey, orgAfter, orgLimit, nowMs);
    return {
      verdict: Verdict.ALLOWED,
      org,
      remaining: remaining(orgAfter, orgLimit),
      resetMs: msUntilFull(orgAfter, orgLimit),
      retryAfterMs: 0,
    };
  }

  private lookup(tokenHash: string): TokenLookup {
    const t = this.tokens.get(tokenHash);
    if (!t || t.expiresMs <= this.clock()) return { kind: "miss" };
    if (t.orgId === null) return { kind: "invalid" };
    const o = this.orgs.get(t.orgId);
    return o
      ? { kind: "valid", org: { id: o.id, slug: o.slug, plan: o.plan, audienceStamp: o.audienceStamp } }
      : { kind: "miss" };
  }

  async lookupToken(tokenHash: string): Promise<TokenLookup> {
    return this.lookup(tokenHash);
  }

  async projectOrg(p: OrgProjection): Promise<void> {
    const have = this.orgs.get(p.id);
    if (have && have.version > p.version) return;
    this.orgs.set(p.id, {
      id: p.id,
      slug: p.slug,
      plan: p.plan as Plan,
      version: p.version,
      domains: new Set(p.verifiedDomains),
      audienceStamp: newAudienceStamp(),
    });
  }

  async touchAudience(orgId: string): Promise<void> {
    const o = this.orgs.get(orgId);
    if (o) o.audienceStamp = newAudienceStamp();
  }

  async projectToken(tokenHash: string, orgId: string | null, mode: "write" | "fill"): Promise<void> {
    const have = this.tokens.get(tokenHash);
    if (mode === "fill" && have && have.expiresMs > this.clock()) return;
    if (this.tokens.size >= TOKENS_MAX) this.tokens.clear();
    this.tokens.set(tokenHash, {
      orgId,
      expiresMs: orgId === null ? this.clock() + INVALID_TOKEN_TTL_MS : Number.POSITIVE_INFINITY,
    });
  }

  /** Whether the domain is a verified one of the organization; undefined when the organization is not projected. */
  domainVerified(orgId: string, domain: string): boolean | undefined {
    return this.orgs.get(orgId)?.domains.has(domain);
  }

  /** The level of an organization's request bucket (a missing bucket is a full one); reads only. */
  orgLevel(orgId: string, plan: Plan, nowMs: number): number {
    return levelAt(this.buckets.get(orgBucketKey(orgId)), orgBucketLimit(plan), nowMs);
  }

  /** Drops buckets that have refilled completely (a missing bucket is a full one), and the token hashes that have expired. */
  sweep(nowMs: number): void {
    for (const [key, b] of this.buckets) {
      if (levelAt(b, b.limit, nowMs) >= b.limit.quota * b.limit.periodMs) this.buckets.delete(key);
    }
    for (const [hash, t] of this.tokens) if (t.expiresMs <= nowMs) this.tokens.delete(hash);
  }

  private save(key: string, level: number, limit: BucketLimit, nowMs: number): void {
    const previous = this.buckets.get(key);
    this.buckets.set(key, { level, atMs: Math.max(nowMs, previous?.atMs ?? nowMs), limit });
  }
}

/** An organization's request bucket on its plan. */
export const orgBucketLimit = (plan: Plan): BucketLimit => ({ quota: planQuota(plan), periodMs: ORG_PERIOD_MS });
