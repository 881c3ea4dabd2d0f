import { Database } from "bun:sqlite";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { Plan, Verdict } from "../gen/mailcore/limiter/v1/limiter_pb";
import { type BucketLimit, type BucketState, levelAt, msUntilAdmit, msUntilFull, remaining } from "../bucket/bucket";
import { IP_PERIOD_MS, IP_QUOTA, MINIMUM_PLAN, ORG_PERIOD_MS, planQuota } from "../plans/plans";
import type { Lane } from "../gen/mailcore/limiter/v1/mail_pb";
import { EmbeddedMail } from "./embedded_mail";
import type { AckInput, DeliveryPolicy, EnqueueInput } from "./mail";
import { type AdmitInput, type AdmitResult, type Organization, type OrgRef, type Store, StoreError } from "./store";

const IP_LIMIT: BucketLimit = { quota: IP_QUOTA, periodMs: IP_PERIOD_MS };
const SWEEP_INTERVAL_MS = 10_000;

interface Bucket extends BucketState {
  limit: BucketLimit;
}

interface OrgRow {
  id: string;
  slug: string;
  plan: number;
}

/**
 * The embedded store: buckets in memory (they are worth nothing after a restart, and a
 * missing bucket is a full one), the directory in a bun:sqlite file in WAL mode.
 * One daemon owns the file; to run several daemons, use Redis.
 */
export class EmbeddedStore implements Store {
  private readonly db: Database;
  private readonly buckets = new Map<string, Bucket>();
  private readonly sweeper: ReturnType<typeof setInterval>;
  private readonly mail: EmbeddedMail;
  private readonly q: {
    orgByToken: ReturnType<Database["query"]>;
    orgBySlug: ReturnType<Database["query"]>;
    domains: ReturnType<Database["query"]>;
  };

  /** dataDir null keeps the directory in memory too (tests). */
  constructor(dataDir: string | null, private readonly sweepClock: () => number = Date.now) {
    let path = ":memory:";
    if (dataDir) {
      mkdirSync(dataDir, { recursive: true });
      path = join(dataDir, "mailcore.db");
    }
    this.db = new Database(path, { create: true, strict: true });
    // One daemon owns the file: a second daemon on the same DATA_DIR would run lane schedulers
    // of its own. The lock is taken now, and the OS drops it when the process dies.
    try {
      this.db.exec("PRAGMA locking_mode = EXCLUSIVE; PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;");
      this.db.exec("BEGIN IMMEDIATE; COMMIT;");
    } catch (err) {
      this.db.close();
      if (String(err).includes("locked")) throw new Error(`${path} is in use by another limiterd: one daemon owns the embedded store (use Redis to run several)`);
      throw err;
    }
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS orgs (id TEXT PRIMARY KEY, slug TEXT NOT NULL UNIQUE, plan INTEGER NOT NULL, created_ms INTEGER NOT NULL);
      CREATE TABLE IF NOT EXISTS tokens (hash TEXT PRIMARY KEY, org_id TEXT NOT NULL REFERENCES orgs(id), created_ms INTEGER NOT NULL);
      CREATE TABLE IF NOT EXISTS domains (org_id TEXT NOT NULL REFERENCES orgs(id), name TEXT NOT NULL, verified INTEGER NOT NULL, PRIMARY KEY (org_id, name));
      CREATE TABLE IF NOT EXISTS tags (org_id TEXT NOT NULL REFERENCES orgs(id), name TEXT NOT NULL, PRIMARY KEY (org_id, name));
    `);
    this.q = {
      orgByToken: this.db.query("SELECT o.id, o.slug, o.plan FROM tokens t JOIN orgs o ON o.id = t.org_id WHERE t.hash = ?"),
      orgBySlug: this.db.query("SELECT id, slug, plan FROM orgs WHERE slug = ?"),
      domains: this.db.query("SELECT name, verified FROM domains WHERE org_id = ? ORDER BY name"),
    };
    this.mail = new EmbeddedMail(this.db);
    this.sweeper = setInterval(() => this.sweep(), SWEEP_INTERVAL_MS);
    this.sweeper.unref();
  }

  async admit(inputs: AdmitInput[], nowMs: number): Promise<AdmitResult[]> {
    return inputs.map((input) => this.admitOne(input, nowMs));
  }

  private admitOne(input: AdmitInput, nowMs: number): AdmitResult {
    const ipKey = `ip:${input.ip}`;
    const ipLevel = levelAt(this.buckets.get(ipKey), IP_LIMIT, nowMs);
    const ipAllows = ipLevel >= IP_LIMIT.periodMs;
    const row = input.tokenHash ? (this.q.orgByToken.get(input.tokenHash) as OrgRow | null) : null;

    if (!row) {
      const minimum = planQuota(MINIMUM_PLAN);
      if (!ipAllows) {
        return { verdict: Verdict.IP_LIMITED, remaining: minimum, resetMs: 0, retryAfterMs: msUntilAdmit(ipLevel, IP_LIMIT) };
      }
      this.save(ipKey, ipLevel - IP_LIMIT.periodMs, IP_LIMIT, nowMs);
      return { verdict: Verdict.UNAUTHENTICATED, remaining: minimum, resetMs: 0, retryAfterMs: 0 };
    }

    const org: OrgRef = { id: row.id, slug: row.slug, plan: row.plan as Plan };
    const orgLimit: BucketLimit = { quota: planQuota(org.plan), periodMs: ORG_PERIOD_MS };
    const orgKey = `org:${org.id}`;
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

  private save(key: string, level: number, limit: BucketLimit, nowMs: number): void {
    const previous = this.buckets.get(key);
    this.buckets.set(key, { level, atMs: Math.max(nowMs, previous?.atMs ?? nowMs), limit });
  }

  /** Drops buckets that have refilled completely: a missing bucket is a full one. */
  private sweep(): void {
    const now = this.sweepClock();
    this.mail.sweep(now);
    for (const [key, b] of this.buckets) {
      if (levelAt(b, b.limit, now) >= b.limit.quota * b.limit.periodMs) this.buckets.delete(key);
    }
  }

  async createOrganization(id: string, slug: string, plan: Plan, nowMs: number): Promise<Organization> {
    try {
      this.db.query("INSERT INTO orgs (id, slug, plan, created_ms) VALUES (?, ?, ?, ?)").run(id, slug, plan, nowMs);
    } catch (err) {
      if (String(err).includes("UNIQUE")) throw new StoreError("already_exists", `organization ${slug} already exists`);
      throw err;
    }
    return this.getOrganization(slug);
  }

  async setPlan(slug: string, plan: Plan): Promise<Organization> {
    const org = this.orgRow(slug);
    this.db.query("UPDATE orgs SET plan = ? WHERE id = ?").run(plan, org.id);
    return this.getOrganization(slug);
  }

  async getOrganization(slug: string): Promise<Organization> {
    const row = this.orgRow(slug);
    const domains = (this.q.domains.all(row.id) as { name: string; verified: number }[]).map((d) => ({
      name: d.name,
      verified: d.verified === 1,
    }));
    return { id: row.id, slug: row.slug, plan: row.plan as Plan, domains };
  }

  async addToken(slug: string, tokenHash: string, nowMs: number): Promise<void> {
    const org = this.orgRow(slug);
    this.db.query("INSERT INTO tokens (hash, org_id, created_ms) VALUES (?, ?, ?)").run(tokenHash, org.id, nowMs);
  }

  async orgByToken(tokenHash: string): Promise<OrgRef | undefined> {
    const row = this.q.orgByToken.get(tokenHash) as OrgRow | null;
    return row ? { id: row.id, slug: row.slug, plan: row.plan as Plan } : undefined;
  }

  async revokeToken(tokenHash: string): Promise<void> {
    const { changes } = this.db.query("DELETE FROM tokens WHERE hash = ?").run(tokenHash);
    if (changes === 0) throw new StoreError("not_found", "no such token");
  }

  async addDomain(slug: string, domain: string, verified: boolean): Promise<Organization> {
    const org = this.orgRow(slug);
    this.db
      .query("INSERT INTO domains (org_id, name, verified) VALUES (?, ?, ?) ON CONFLICT (org_id, name) DO UPDATE SET verified = excluded.verified")
      .run(org.id, domain, verified ? 1 : 0);
    return this.getOrganization(slug);
  }

  async listTags(orgId: string): Promise<string[]> {
    return (this.db.query("SELECT name FROM tags WHERE org_id = ? ORDER BY name").all(orgId) as { name: string }[]).map((t) => t.name);
  }

  isDomainVerified(orgId: string, domain: string) {
    return this.mail.isDomainVerified(orgId, domain);
  }
  enqueue(input: EnqueueInput, nowMs: number) {
    return this.mail.enqueue(input, nowMs);
  }
  release(lane: Lane, nowMs: number) {
    return this.mail.release(lane, nowMs);
  }
  lease(max: number, nowMs: number, visibilityMs: number) {
    return this.mail.lease(max, nowMs, visibilityMs);
  }
  ack(input: AckInput, policy: DeliveryPolicy, nowMs: number) {
    return this.mail.ack(input, policy, nowMs);
  }
  recover(nowMs: number, policy: DeliveryPolicy) {
    return this.mail.recover(nowMs, policy);
  }
  getMessage(orgId: string, messageId: string) {
    return this.mail.getMessage(orgId, messageId);
  }
  laneCounts(nowMs: number) {
    return this.mail.laneCounts(nowMs);
  }
  holdScheduler() {
    return this.mail.holdScheduler();
  }

  async ping(): Promise<void> {
    this.db.query("SELECT 1").get();
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper);
    this.db.close();
  }

  private orgRow(slug: string): OrgRow {
    const row = this.q.orgBySlug.get(slug) as OrgRow | null;
    if (!row) throw new StoreError("not_found", `no organization ${slug}`);
    return row;
  }
}
