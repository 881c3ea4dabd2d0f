import { Database } from "bun:sqlite";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { type Plan, Verdict } from "../../gen/mailcore/limiter/v1/limiter_pb";
import type { Lane } from "../../gen/mailcore/limiter/v1/mail_pb";
import { type BucketLimit, type BucketState, levelAt, msUntilAdmit, msUntilFull, remaining } from "../../bucket/bucket";
import { IP_PERIOD_MS, IP_QUOTA, MINIMUM_PLAN, ORG_PERIOD_MS, planQuota } from "../../plans/plans";
import type { MessageHistory } from "../../model/history";
import type { OrgProjection } from "../../model/projection";
import {
  type AckInput,
  type AdmitInput,
  type AdmitResult,
  type DeliveryPolicy,
  type EnqueueInput,
  type HotStore,
  type MessageRef,
  INVALID_TOKEN_TTL_MS,
  type LaneSignal,
  newAudienceStamp,
  type OrgRef,
  type OrgUsage,
  type RefusalCount,
  type RefusalKind,
  REFUSAL_MINUTES,
  RELEASE_WINDOW_S,
  type SlotPlan,
  type TokenLookup,
  type Written,
} from "../hotstore";
import { LANES } from "../../mail/policy";
import { SlotCounters } from "./counters";
import { EmbeddedLanes } from "./lanes";

const IP_LIMIT: BucketLimit = { quota: IP_QUOTA, periodMs: IP_PERIOD_MS };
const SWEEP_INTERVAL_MS = 10_000;
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

/** The SQLite file of the embedded hot store under a data directory. */
export function embeddedHotFile(dataDir: string): string {
  return join(dataDir, "hot.db");
}

/**
 * The embedded hot store: buckets and the projection in memory (a restart forgives what was
 * consumed, and the projection rebuilds from the records), the lanes, guard logs, cooldowns and
 * idempotency records in a SQLite file (WAL) so that nothing accepted is lost in a crash. One
 * daemon owns the file; to run several daemons, use Redis.
 */
export class EmbeddedHot implements HotStore {
  private readonly db: Database;
  private readonly buckets = new Map<string, Bucket>();
  /** Token hash to org id, or to null (not a valid token) until expiresMs. */
  private readonly tokens = new Map<string, { orgId: string | null; expiresMs: number }>();
  private readonly orgs = new Map<string, ProjectedOrg>();
  private readonly sweeper: ReturnType<typeof setInterval>;
  private readonly lanes: EmbeddedLanes;
  private readonly refusals = new SlotCounters<RefusalKind>(60_000, REFUSAL_MINUTES);
  private readonly released = new SlotCounters<Lane>(1_000, RELEASE_WINDOW_S + 1);
  private readonly watchers = new Set<(signal: LaneSignal) => void>();

  /** file null keeps everything in memory (tests). */
  constructor(
    file: string | null,
    private readonly clock: () => number = Date.now,
  ) {
    let path = ":memory:";
    if (file) {
      mkdirSync(join(file, ".."), { recursive: true });
      path = file;
    }
    this.db = new Database(path, { create: true, strict: true });
    // One daemon owns the file: a second daemon on the same DATA_DIR would run lane schedulers
    // of its own. The lock is taken now, and the OS drops it when the process dies.
    try {
      this.db.exec("PRAGMA locking_mode = EXCLUSIVE; PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;");
      this.db.exec("BEGIN IMMEDIATE; COMMIT;");
    } catch (err) {
      this.db.close();
      if (String(err).includes("locked"))
        throw new Error(
          `${path} is in use by another limiterd: one daemon owns the embedded store (use Redis to run several)`,
        );
      throw err;
    }
    this.lanes = new EmbeddedLanes(this.db);
    this.sweeper = setInterval(() => this.sweep(), SWEEP_INTERVAL_MS);
    this.sweeper.unref();
  }

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
    const orgLimit: BucketLimit = { quota: planQuota(org.plan), periodMs: ORG_PERIOD_MS };
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

  async enqueue(input: EnqueueInput, nowMs: number) {
    const result = await this.lanes.enqueue(input, nowMs, () =>
      this.orgs.get(input.orgId)?.domains.has(input.fromDomain),
    );
    if (result.kind === "accepted") this.signal({ kind: "waiting", lane: input.lane });
    return result;
  }
  async release(lane: Lane, nowMs: number, plan: SlotPlan) {
    const batch = await this.lanes.release(lane, nowMs, plan);
    // An organization's release rate counts each message in the second of its slot.
    for (const r of batch.released) this.released.add(r.orgId, lane, 1, r.slotMs);
    if (batch.released.length > 0) this.signal({ kind: "ready" });
    return batch;
  }
  lease(max: number, nowMs: number, visibilityMs: number) {
    return this.lanes.lease(max, nowMs, visibilityMs);
  }
  ack(input: AckInput, policy: DeliveryPolicy, nowMs: number) {
    return this.lanes.ack(input, policy, nowMs);
  }
  async recover(nowMs: number, policy: DeliveryPolicy) {
    const result = await this.lanes.recover(nowMs, policy);
    if (result.expired + result.retried > 0) for (const lane of LANES) this.signal({ kind: "waiting", lane });
    return result;
  }
  getMessage(orgId: string, messageId: string) {
    return this.lanes.getMessage(orgId, messageId);
  }
  laneCounts(nowMs: number) {
    return this.lanes.laneCounts(nowMs);
  }

  async countRefusals(counts: RefusalCount[], nowMs: number): Promise<void> {
    for (const { orgId, kind, n } of counts) this.refusals.add(orgId, kind, n, nowMs);
  }

  async orgUsage(orgId: string, plan: Plan, nowMs: number): Promise<OrgUsage> {
    const limit: BucketLimit = { quota: planQuota(plan), periodMs: ORG_PERIOD_MS };
    const level = levelAt(this.buckets.get(orgBucketKey(orgId)), limit, nowMs);
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
        return { lane, depth: this.lanes.orgDepth(orgId, lane), released };
      }),
    };
  }

  changedMessages(max: number) {
    return this.lanes.changedMessages(max);
  }
  settle(written: Written[]) {
    return this.lanes.settle(written);
  }

  presence(messages: MessageRef[]) {
    return this.lanes.presence(messages);
  }
  async restore(messages: MessageHistory[], nowMs: number) {
    const result = await this.lanes.restore(messages, nowMs);
    if (result.requeued > 0) for (const lane of LANES) this.signal({ kind: "waiting", lane });
    return result;
  }
  unfinishedHere() {
    return this.lanes.unfinishedHere();
  }
  drop(stale: Written[]) {
    return this.lanes.drop(stale);
  }

  /** One daemon owns the embedded store: its signals are its own. */
  watchLanes(on: (signal: LaneSignal) => void): () => void {
    this.watchers.add(on);
    return () => this.watchers.delete(on);
  }

  private signal(s: LaneSignal): void {
    for (const w of this.watchers) w(s);
  }

  /** One daemon owns the embedded store, so it always runs the singletons. */
  async holdLease(): Promise<boolean> {
    return true;
  }

  async ping(): Promise<void> {
    this.db.query("SELECT 1").get();
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper);
    this.db.close();
  }

  private save(key: string, level: number, limit: BucketLimit, nowMs: number): void {
    const previous = this.buckets.get(key);
    this.buckets.set(key, { level, atMs: Math.max(nowMs, previous?.atMs ?? nowMs), limit });
  }

  /** Drops buckets that have refilled completely (a missing bucket is a full one), and what has expired. */
  private sweep(): void {
    const now = this.clock();
    this.lanes.sweep(now);
    this.refusals.sweep(now);
    this.released.sweep(now);
    for (const [key, b] of this.buckets) {
      if (levelAt(b, b.limit, now) >= b.limit.quota * b.limit.periodMs) this.buckets.delete(key);
    }
    for (const [hash, t] of this.tokens) if (t.expiresMs <= now) this.tokens.delete(hash);
  }
}
