import { Cluster, Redis } from "ioredis";
import { createHash, randomBytes } from "node:crypto";
import type { Lane, MessageStatus } from "../../gen/mailcore/limiter/v1/mail_pb";
import { type Plan, Verdict } from "../../gen/mailcore/limiter/v1/limiter_pb";
import { LANES } from "../../mail/policy";
import { IP_PERIOD_MS, IP_QUOTA, MINIMUM_PLAN, ORG_PERIOD_MS, PLANS, planQuota } from "../../plans/plans";
import type { OrgProjection } from "../../records/directory";
import type { MessageHistory } from "../../records/history";
import {
  type AckInput,
  type AckResult,
  type AdmitInput,
  type AdmitResult,
  type DeliveryPolicy,
  type EnqueueInput,
  type EnqueueResult,
  type GuardReason,
  type HotStore,
  INVALID_TOKEN_TTL_MS,
  type LaneCounts,
  type LeasedRecord,
  newAudienceStamp,
  type OrgUsage,
  RECOVER_BATCH,
  type RefusalCount,
  REFUSAL_MINUTES,
  RELEASE_WINDOW_S,
  type RecoverResult,
  type Released,
  type TokenLookup,
  type Written,
} from "../hotstore";
import { codes, keys, script } from "./layout";

const TOKEN_CACHE_MAX = 100_000;
const MISS = codes("V").get("MISS")!;
/**
 * The scripts and how many keys each takes. A fixed count puts the keys first, which is how
 * ioredis's cluster auto-pipelining finds a command's slot; only admit (one primary) varies.
 */
const SCRIPTS = {
  admit: undefined,
  admit_ip: 1,
  admit_org: 2,
  refund_ip: 1,
  enqueue: 8,
  release: 3,
  lease: 4,
  ack: 3,
  recover: 4,
  hold: 1,
  project_org: 1,
  message: 1,
  collect: 1,
  settle: 1,
  usage_org: 1,
  usage_lanes: 2,
} as const;

type AdmitReply = [number, number, string, number, number, number, string?];
/** readMessage's shape in prelude.lua. */
type MessageReply = [
  string,
  string,
  number,
  string,
  string,
  string,
  string,
  number,
  number,
  number,
  number,
  number,
  [number, number, string][],
];
type Args = (string | number)[];
type Commands = { [K in keyof typeof SCRIPTS]: (...args: Args) => Promise<never> };

/** One Redis primary, or a Redis Cluster. */
export type RedisClient = Redis | Cluster;

/** Fail fast: no offline queue, short timeouts, endless reconnects. */
const FAST = { enableOfflineQueue: false, maxRetriesPerRequest: 0, commandTimeout: 1_000, lazyConnect: true } as const;

/** Opens a connection to one Redis primary. */
export async function connectRedis(url: string, o: { connectTimeoutMs?: number; tlsCa?: Buffer } = {}): Promise<Redis> {
  const redis = new Redis(url, {
    ...FAST,
    enableAutoPipelining: true,
    connectTimeout: o.connectTimeoutMs ?? 2_000,
    // rediss:// alone verifies the server against the system's CAs; tlsCa replaces them.
    ...(o.tlsCa ? { tls: { ca: o.tlsCa } } : {}),
    retryStrategy: (attempt) => Math.min(attempt * 100, 1_000),
  });
  redis.on("error", () => {}); // surfaced per command; the client reconnects by itself
  await redis.connect();
  return redis;
}

/** Opens a Redis Cluster client from its seed nodes (host:port). */
export async function connectRedisCluster(nodes: string[], connectTimeoutMs = 2_000): Promise<Cluster> {
  const cluster = new Cluster(
    nodes.map((n) => ({ host: n.slice(0, n.lastIndexOf(":")), port: Number(n.slice(n.lastIndexOf(":") + 1)) })),
    {
      enableAutoPipelining: true,
      enableOfflineQueue: false,
      lazyConnect: true,
      clusterRetryStrategy: (attempt) => Math.min(attempt * 100, 1_000),
      // The per-node connections keep their offline queue: the cluster client queues its slot
      // refresh on a node before that node's connection is up (without it, reconnects hang).
      redisOptions: { maxRetriesPerRequest: 0, commandTimeout: FAST.commandTimeout, connectTimeout: connectTimeoutMs },
    },
  );
  cluster.on("error", () => {});
  await cluster.connect();
  return cluster;
}

function toHistory(m: MessageReply): MessageHistory {
  const [id, orgId, lane, from, to, toMailbox, subject, status, attempts, createdMs, updatedMs, version, events] = m;
  return {
    id,
    orgId,
    lane: lane as Lane,
    from,
    to,
    toMailbox,
    subject,
    status: status as MessageStatus,
    attempts,
    createdMs,
    updatedMs,
    version,
    events: events.map(([s, atMs, detail]) => ({ status: s as MessageStatus, atMs, detail })),
  };
}

/**
 * The Redis hot store: every algorithm is one Lua script with the shared prelude in front
 * (EVALSHA, reloaded on NOSCRIPT by ioredis's defineCommand), auto-pipelined. Several daemons
 * may share one Redis.
 */
export class RedisHot implements HotStore {
  private readonly redis: RedisClient & Commands;
  private readonly cluster: boolean;
  /** token hash to org id; the admit script re-checks the token key, so a stale entry is harmless. */
  private readonly tokenOrg = new Map<string, string>();

  constructor(redis: RedisClient) {
    for (const [name, numberOfKeys] of Object.entries(SCRIPTS))
      redis.defineCommand(name, { lua: script(name), numberOfKeys });
    this.redis = redis as RedisClient & Commands;
    this.cluster = redis instanceof Cluster;
  }

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

  async enqueue(input: EnqueueInput, nowMs: number): Promise<EnqueueResult> {
    const { orgId, messageId, lane, mailbox, guards, idempotency } = input;
    const keyHash = createHash("sha256")
      .update(idempotency?.key ?? "")
      .digest("hex");
    // The projection is in the organization's slot, the accept step in {mail}: read it first.
    const [version, verified] = await this.redis.hmget(keys.org(orgId), "v", `d:${input.fromDomain}`);
    const domain = version === null ? "miss" : verified === null ? "unverified" : "verified";
    const reply = (await this.redis.enqueue(
      keys.idempotency(orgId, keyHash),
      keys.guardLog(orgId, mailbox),
      keys.cooldown(mailbox),
      keys.message(orgId, messageId),
      keys.events(orgId, messageId),
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
      domain,
      input.from,
      input.to,
      input.subject,
    )) as [string, string?, number?];
    switch (reply[0]) {
      case "accepted":
      case "replayed":
        return { kind: reply[0], messageId: reply[1]! };
      case "conflict":
      case "domain_not_verified":
      case "miss":
        return { kind: reply[0] as "conflict" | "domain_not_verified" | "miss" };
      default:
        return { kind: "limited", reason: reply[1] as GuardReason, retryAfterMs: Number(reply[2]) };
    }
  }

  async release(lane: Lane, nowMs: number): Promise<Released | null> {
    const reply = (await this.redis.release(keys.roster(lane), keys.ready(lane), keys.depth(lane), nowMs, lane)) as
      | [string, string]
      | null;
    return reply ? { orgId: reply[0], messageId: reply[1] } : null;
  }

  async lease(max: number, nowMs: number, visibilityMs: number): Promise<LeasedRecord[]> {
    const [t, b] = LANES;
    const prefix = `ls_${randomBytes(8).toString("hex")}`;
    const reply = (await this.redis.lease(
      keys.ready(t),
      keys.ready(b),
      keys.inFlight(t),
      keys.inFlight(b),
      nowMs,
      max,
      visibilityMs,
      prefix,
    )) as [string, string, string, string, string, number][];
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
    const [current, status] = (await this.redis.ack(
      keys.message(orgId, messageId),
      keys.inFlight(lane),
      keys.deferred(lane),
      nowMs,
      input.leaseId,
      input.outcome,
      input.detail,
      policy.maxAttempts,
      policy.retryBaseMs,
      policy.bounceCooldownMs,
      orgId,
      messageId,
    )) as [number, number];
    return { current: current === 1, status: status as MessageStatus };
  }

  async recover(nowMs: number, policy: DeliveryPolicy): Promise<RecoverResult> {
    const total = { expired: 0, retried: 0, failed: 0 };
    for (const lane of LANES) {
      const [expired, retried, failed] = (await this.redis.recover(
        keys.inFlight(lane),
        keys.deferred(lane),
        keys.roster(lane),
        keys.depth(lane),
        nowMs,
        lane,
        RECOVER_BATCH,
        policy.maxAttempts,
      )) as [number, number, number];
      total.expired += expired;
      total.retried += retried;
      total.failed += failed;
    }
    return total;
  }

  async getMessage(orgId: string, messageId: string): Promise<MessageHistory | null> {
    const reply = (await this.redis.message(keys.message(orgId, messageId), orgId, messageId)) as MessageReply | null;
    return reply ? toHistory(reply) : null;
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
        return {
          lane,
          depth: Number(depth ?? 0),
          ready,
          inFlight,
          deferred,
          oldestAgeMs: Number.isFinite(oldest) ? Math.max(0, nowMs - oldest) : 0,
        };
      }),
    );
  }

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

  async changedMessages(max: number): Promise<MessageHistory[]> {
    return ((await this.redis.collect(keys.outbox(), max)) as MessageReply[]).map(toHistory);
  }

  async settle(written: Written[]): Promise<number> {
    if (written.length === 0) return 0;
    return (await this.redis.settle(keys.outbox(), ...written.flatMap((w) => [w.orgId, w.id, w.version]))) as number;
  }

  async holdLease(name: string, owner: string, ttlMs: number): Promise<boolean> {
    return ((await this.redis.hold(keys.lease(name), owner, ttlMs)) as number) === 1;
  }

  async ping(): Promise<void> {
    await this.redis.ping();
  }

  async close(): Promise<void> {
    this.redis.disconnect();
  }
}
