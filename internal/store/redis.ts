import { Redis } from "ioredis";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Plan, Verdict } from "../gen/mailcore/limiter/v1/limiter_pb";
import { IP_PERIOD_MS, IP_QUOTA, MINIMUM_PLAN, ORG_PERIOD_MS, PLANS, planQuota } from "../plans/plans";
import { type AdmitInput, type AdmitResult, type Organization, type Store, StoreError } from "./store";

const ADMIT_SCRIPT = readFileSync(join(import.meta.dir, "admit.lua"), "utf8");
const TOKEN_CACHE_MAX = 100_000;

// Key layout. Everything of one organization carries the hash tag {<org id>}.
export const keys = {
  slug: (slug: string) => `mc:slug:${slug}`,
  token: (hash: string) => `mc:tok:${hash}`,
  org: (id: string) => `mc:org:{${id}}`,
  orgBucket: (id: string) => `mc:org:{${id}}:rl`,
  orgDomains: (id: string) => `mc:org:{${id}}:domains`,
  orgTags: (id: string) => `mc:org:{${id}}:tags`,
  ipBucket: (ip: string) => `mc:ip:{${ip}}`,
};

type AdmitReply = [number, number, string, number, number, number];

interface AdmitCommand {
  admit(...args: (string | number)[]): Promise<AdmitReply>;
}

/** Opens a connection that fails fast: no offline queue, short timeouts, endless reconnects. */
export async function connectRedis(url: string, connectTimeoutMs = 2_000): Promise<Redis> {
  const redis = new Redis(url, {
    enableAutoPipelining: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: connectTimeoutMs,
    commandTimeout: 1_000,
    retryStrategy: (attempt) => Math.min(attempt * 100, 1_000),
    lazyConnect: true,
  });
  redis.on("error", () => {}); // surfaced per command; the client reconnects by itself
  await redis.connect();
  return redis;
}

/**
 * The Redis store: every algorithm is one Lua script (EVALSHA, reloaded on NOSCRIPT by
 * ioredis's defineCommand), auto-pipelined. Several daemons may share one Redis.
 */
export class RedisStore implements Store {
  private readonly redis: Redis & AdmitCommand;
  /** token hash to org id; the script re-checks the token key, so a stale entry is harmless. */
  private readonly tokenOrg = new Map<string, string>();

  constructor(redis: Redis) {
    redis.defineCommand("admit", { lua: ADMIT_SCRIPT });
    this.redis = redis as Redis & AdmitCommand;
  }

  async admit(inputs: AdmitInput[], nowMs: number): Promise<AdmitResult[]> {
    return Promise.all(inputs.map((input) => this.admitOne(input, nowMs)));
  }

  private async admitOne(input: AdmitInput, nowMs: number): Promise<AdmitResult> {
    const { tokenHash } = input;
    let orgId = tokenHash ? this.tokenOrg.get(tokenHash) : undefined;
    if (tokenHash && orgId === undefined) {
      orgId = (await this.redis.get(keys.token(tokenHash))) ?? undefined;
      if (orgId !== undefined) this.remember(tokenHash, orgId);
    }
    const args: (string | number)[] =
      tokenHash && orgId !== undefined
        ? [4, keys.ipBucket(input.ip), keys.token(tokenHash), keys.org(orgId), keys.orgBucket(orgId)]
        : [1, keys.ipBucket(input.ip)];
    args.push(nowMs, IP_QUOTA, IP_PERIOD_MS, orgId ?? "", ORG_PERIOD_MS, ...PLANS.map(planQuota), planQuota(MINIMUM_PLAN));
    const [verdict, plan, slug, remaining, resetMs, retryAfterMs] = await this.redis.admit(...args);
    if (tokenHash && orgId !== undefined && plan === 0) this.tokenOrg.delete(tokenHash);
    return {
      verdict: verdict as Verdict,
      org: plan === 0 || orgId === undefined ? undefined : { id: orgId, slug, plan: plan as Plan },
      remaining,
      resetMs,
      retryAfterMs,
    };
  }

  private remember(tokenHash: string, orgId: string): void {
    if (this.tokenOrg.size >= TOKEN_CACHE_MAX) this.tokenOrg.clear();
    this.tokenOrg.set(tokenHash, orgId);
  }

  async createOrganization(id: string, slug: string, plan: Plan, nowMs: number): Promise<Organization> {
    const claimed = await this.redis.set(keys.slug(slug), id, "NX");
    if (claimed !== "OK") throw new StoreError("already_exists", `organization ${slug} already exists`);
    await this.redis.hset(keys.org(id), { slug, plan, created_ms: nowMs });
    return { id, slug, plan, domains: [] };
  }

  async setPlan(slug: string, plan: Plan): Promise<Organization> {
    const id = await this.orgId(slug);
    await this.redis.hset(keys.org(id), "plan", plan);
    return this.getOrganization(slug);
  }

  async getOrganization(slug: string): Promise<Organization> {
    const id = await this.orgId(slug);
    const [plan, domains] = await Promise.all([this.redis.hget(keys.org(id), "plan"), this.redis.hgetall(keys.orgDomains(id))]);
    return {
      id,
      slug,
      plan: Number(plan) as Plan,
      domains: Object.keys(domains)
        .sort()
        .map((name) => ({ name, verified: domains[name] === "1" })),
    };
  }

  async addToken(slug: string, tokenHash: string, _nowMs: number): Promise<void> {
    const id = await this.orgId(slug);
    await this.redis.set(keys.token(tokenHash), id);
  }

  async revokeToken(tokenHash: string): Promise<void> {
    this.tokenOrg.delete(tokenHash);
    if ((await this.redis.del(keys.token(tokenHash))) === 0) throw new StoreError("not_found", "no such token");
  }

  async addDomain(slug: string, domain: string, verified: boolean): Promise<Organization> {
    const id = await this.orgId(slug);
    await this.redis.hset(keys.orgDomains(id), domain, verified ? "1" : "0");
    return this.getOrganization(slug);
  }

  async listTags(orgId: string): Promise<string[]> {
    return (await this.redis.smembers(keys.orgTags(orgId))).sort();
  }

  async ping(): Promise<void> {
    await this.redis.ping();
  }

  async close(): Promise<void> {
    this.redis.disconnect();
  }

  private async orgId(slug: string): Promise<string> {
    const id = await this.redis.get(keys.slug(slug));
    if (id === null) throw new StoreError("not_found", `no organization ${slug}`);
    return id;
  }
}
