import { Redis } from "ioredis";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { createHash, randomBytes } from "node:crypto";
import type { Lane, MessageStatus } from "../gen/mailcore/limiter/v1/mail_pb";
import { Plan, Verdict } from "../gen/mailcore/limiter/v1/limiter_pb";
import { IP_PERIOD_MS, IP_QUOTA, MINIMUM_PLAN, ORG_PERIOD_MS, PLANS, planQuota } from "../plans/plans";
import {
  type AckInput,
  type AckResult,
  type DeliveryPolicy,
  type EnqueueInput,
  type EnqueueResult,
  type GuardReason,
  type LaneCounts,
  type LeasedRecord,
  type MessageRecord,
  RECOVER_BATCH,
  type RecoverResult,
  type Released,
} from "./mail";
import { LANES } from "../mail/policy";
import { type AdmitInput, type AdmitResult, type Organization, type OrgRef, type Store, StoreError } from "./store";

const script = (name: string) => readFileSync(join(import.meta.dir, `${name}.lua`), "utf8");
/** Claims the slug and writes the organization in one step: never a slug without its organization. */
const CREATE_ORG_SCRIPT = `
if redis.call('SET', KEYS[1], ARGV[1], 'NX') == false then return 0 end
redis.call('HSET', KEYS[2], 'slug', ARGV[2], 'plan', ARGV[3], 'created_ms', ARGV[4])
return 1`;
const HOLD_SCRIPT = `
local cur = redis.call('GET', KEYS[1])
if not cur then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 1 end
if cur == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end
return 0`;
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
  idempotency: (org: string, key: string) => `mc:org:{${org}}:idem:${createHash("sha256").update(key).digest("hex")}`,
  guardLog: (org: string, mailbox: string) => `mc:org:{${org}}:g:${mailbox}`,
  cooldown: (mailbox: string) => `mc:cooldown:${mailbox}`,
  message: (org: string, id: string) => `mc:org:{${org}}:m:${id}`,
  messageEvents: (org: string, id: string) => `mc:org:{${org}}:m:${id}:ev`,
  orgQueue: (org: string, lane: Lane) => `mc:org:{${org}}:q:${lane}`,
  roster: (lane: Lane) => `mc:lane:${lane}:roster`,
  ready: (lane: Lane) => `mc:lane:${lane}:ready`,
  depth: (lane: Lane) => `mc:lane:${lane}:depth`,
  inFlight: (lane: Lane) => `mc:lane:${lane}:inflight`,
  deferred: (lane: Lane) => `mc:lane:${lane}:deferred`,
  scheduler: (lane: Lane) => `mc:lane:${lane}:scheduler`,
};

type AdmitReply = [number, number, string, number, number, number];

type Args = (string | number)[];

interface Commands {
  admit(...args: Args): Promise<AdmitReply>;
  enqueue(...args: Args): Promise<[string, string, number?]>;
  release(...args: Args): Promise<[string, string] | null>;
  lease(...args: Args): Promise<[string, string, string, string, string, number][]>;
  ack(...args: Args): Promise<[number, number]>;
  recover(...args: Args): Promise<[number, number, number]>;
  hold(...args: Args): Promise<number>;
  createOrg(...args: Args): Promise<number>;
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
  private readonly redis: Redis & Commands;
  /** token hash to org id; the script re-checks the token key, so a stale entry is harmless. */
  private readonly tokenOrg = new Map<string, string>();

  constructor(redis: Redis) {
    for (const name of ["admit", "enqueue", "release", "lease", "ack", "recover"]) redis.defineCommand(name, { lua: script(name) });
    redis.defineCommand("hold", { lua: HOLD_SCRIPT, numberOfKeys: 1 });
    redis.defineCommand("createOrg", { lua: CREATE_ORG_SCRIPT, numberOfKeys: 2 });
    this.redis = redis as Redis & Commands;
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
    if ((await this.redis.createOrg(keys.slug(slug), keys.org(id), id, slug, plan, nowMs)) !== 1) {
      throw new StoreError("already_exists", `organization ${slug} already exists`);
    }
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

  async orgByToken(tokenHash: string): Promise<OrgRef | undefined> {
    const id = await this.redis.get(keys.token(tokenHash));
    if (id === null) return undefined;
    const [slug, plan] = await this.redis.hmget(keys.org(id), "slug", "plan");
    return slug ? { id, slug, plan: Number(plan) as Plan } : undefined;
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

  async isDomainVerified(orgId: string, domain: string): Promise<boolean> {
    return (await this.redis.hget(keys.orgDomains(orgId), domain)) === "1";
  }

  async enqueue(input: EnqueueInput, nowMs: number): Promise<EnqueueResult> {
    const { orgId, messageId, lane, mailbox, guards, idempotency } = input;
    const reply = await this.redis.enqueue(
      8,
      keys.idempotency(orgId, idempotency?.key ?? ""),
      keys.guardLog(orgId, mailbox),
      keys.cooldown(mailbox),
      keys.message(orgId, messageId),
      keys.messageEvents(orgId, messageId),
      keys.orgQueue(orgId, lane),
      keys.roster(lane),
      keys.depth(lane),
      nowMs,
      messageId,
      orgId,
      lane,
      input.payload,
      mailbox,
      input.checkCooldown ? 1 : 0,
      input.countGuards ? 1 : 0,
      idempotency?.bodyHash ?? "",
      idempotency?.ttlMs ?? 0,
      guards.shortMax,
      guards.shortWindowMs,
      guards.longMax,
      guards.longWindowMs,
    );
    switch (reply[0]) {
      case "accepted":
      case "replayed":
        return { kind: reply[0], messageId: reply[1] };
      case "conflict":
        return { kind: "conflict" };
      default:
        return { kind: "limited", reason: reply[1] as GuardReason, retryAfterMs: Number(reply[2]) };
    }
  }

  async release(lane: Lane, nowMs: number): Promise<Released | null> {
    const reply = await this.redis.release(3, keys.roster(lane), keys.ready(lane), keys.depth(lane), nowMs, lane);
    return reply ? { orgId: reply[0], messageId: reply[1] } : null;
  }

  async lease(max: number, nowMs: number, visibilityMs: number): Promise<LeasedRecord[]> {
    const [t, b] = LANES;
    const prefix = `ls_${randomBytes(8).toString("hex")}`;
    const reply = await this.redis.lease(4, keys.ready(t), keys.ready(b), keys.inFlight(t), keys.inFlight(b), nowMs, max, visibilityMs, prefix);
    return reply.map(([leaseId, messageId, orgId, lane, payload, attempt]) => ({
      leaseId,
      messageId,
      orgId,
      lane: Number(lane) as Lane,
      payload,
      attempt,
    }));
  }

  async ack(input: AckInput, policy: DeliveryPolicy, nowMs: number): Promise<AckResult> {
    const { orgId, messageId } = input;
    const lane = Number(await this.redis.hget(keys.message(orgId, messageId), "lane")) as Lane;
    if (!LANES.includes(lane as (typeof LANES)[number])) return { current: false, status: 0 as MessageStatus };
    const [current, status] = await this.redis.ack(
      4,
      keys.message(orgId, messageId),
      keys.messageEvents(orgId, messageId),
      keys.inFlight(lane),
      keys.deferred(lane),
      nowMs,
      input.leaseId,
      input.outcome,
      input.detail,
      policy.maxAttempts,
      policy.retryBaseMs,
      policy.bounceCooldownMs,
      policy.retentionMs,
      `${orgId}|${messageId}`,
    );
    return { current: current === 1, status: status as MessageStatus };
  }

  async recover(nowMs: number, policy: DeliveryPolicy): Promise<RecoverResult> {
    const total = { expired: 0, retried: 0, failed: 0 };
    for (const lane of LANES) {
      const [expired, retried, failed] = await this.redis.recover(
        4,
        keys.inFlight(lane),
        keys.deferred(lane),
        keys.roster(lane),
        keys.depth(lane),
        nowMs,
        lane,
        RECOVER_BATCH,
        policy.maxAttempts,
        policy.retentionMs,
      );
      total.expired += expired;
      total.retried += retried;
      total.failed += failed;
    }
    return total;
  }

  async getMessage(orgId: string, messageId: string): Promise<MessageRecord | null> {
    const [m, events] = await Promise.all([this.redis.hgetall(keys.message(orgId, messageId)), this.redis.lrange(keys.messageEvents(orgId, messageId), 0, -1)]);
    if (!m.payload) return null;
    return {
      id: messageId,
      orgId,
      lane: Number(m.lane) as Lane,
      payload: m.payload,
      status: Number(m.status) as MessageStatus,
      attempts: Number(m.attempts),
      createdMs: Number(m.created),
      updatedMs: Number(m.updated),
      events: events.map((e) => {
        const [status, at, ...detail] = e.split("|");
        return { status: Number(status) as MessageStatus, atMs: Number(at), detail: detail.join("|") };
      }),
    };
  }

  async laneCounts(nowMs: number): Promise<LaneCounts[]> {
    return Promise.all(
      LANES.map(async (lane) => {
        const [depth, ready, inFlight, deferred, roster] = await Promise.all([
          this.redis.get(keys.depth(lane)),
          this.redis.llen(keys.ready(lane)),
          this.redis.zcard(keys.inFlight(lane)),
          this.redis.zcard(keys.deferred(lane)),
          this.redis.lrange(keys.roster(lane), 0, -1),
        ]);
        const heads = await Promise.all(
          roster.map(async (org) => {
            const id = await this.redis.lindex(keys.orgQueue(org, lane), 0);
            return id ? Number(await this.redis.hget(keys.message(org, id), "created")) : Number.POSITIVE_INFINITY;
          }),
        );
        const oldest = Math.min(...heads);
        return { lane, depth: Number(depth ?? 0), ready, inFlight, deferred, oldestAgeMs: Number.isFinite(oldest) ? Math.max(0, nowMs - oldest) : 0 };
      }),
    );
  }

  async holdScheduler(lane: Lane, owner: string, ttlMs: number): Promise<boolean> {
    return (await this.redis.hold(keys.scheduler(lane), owner, ttlMs)) === 1;
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
