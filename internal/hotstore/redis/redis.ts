import { Cluster, Redis } from "ioredis";
import type { Plan } from "../../gen/mailcore/limiter/v1/limiter_pb";
import type { Lane } from "../../gen/mailcore/limiter/v1/mail_pb";
import type { OrgProjection } from "../../model/projection";
import { LANES } from "../../mail/policy";
import type {
  AckInput,
  AdmitInput,
  DeliveryPolicy,
  EnqueueInput,
  HotStore,
  LaneSignal,
  RefusalCount,
  SlotRequest,
  Written,
} from "../hotstore";
import { RedisAdmission } from "./admission";
import { keys } from "./layout";
import { RedisMail } from "./mail";
import { RedisOutbox } from "./outbox";
import { type RedisClient, type ScriptedRedis, withScripts } from "./scripts";
import { RedisUsage } from "./usage";

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

/**
 * The Redis hot store: every algorithm is one Lua script (scripts.ts), auto-pipelined. Several
 * daemons may share one Redis. Each seam is a part of its own on the one client.
 */
export class RedisHot implements HotStore {
  private readonly redis: ScriptedRedis;
  private readonly admission: RedisAdmission;
  private readonly mail: RedisMail;
  private readonly usage: RedisUsage;
  private readonly outbox: RedisOutbox;
  /** The connection that listens to the lane signals (a subscribed connection runs no other command), once watched. */
  private subscriber: RedisClient | undefined;
  private readonly watchers = new Set<(signal: LaneSignal) => void>();

  constructor(private readonly client: RedisClient) {
    this.redis = withScripts(client);
    this.admission = new RedisAdmission(this.redis, client instanceof Cluster);
    this.mail = new RedisMail(this.redis);
    this.usage = new RedisUsage(this.redis);
    this.outbox = new RedisOutbox(this.redis);
  }

  admit(inputs: AdmitInput[], nowMs: number) {
    return this.admission.admit(inputs, nowMs);
  }
  lookupToken(tokenHash: string) {
    return this.admission.lookupToken(tokenHash);
  }
  projectOrg(p: OrgProjection) {
    return this.admission.projectOrg(p);
  }
  touchAudience(orgId: string) {
    return this.admission.touchAudience(orgId);
  }
  projectToken(tokenHash: string, orgId: string | null, mode: "write" | "fill") {
    return this.admission.projectToken(tokenHash, orgId, mode);
  }

  enqueue(input: EnqueueInput, nowMs: number) {
    return this.mail.enqueue(input, nowMs);
  }
  release(lane: Lane, nowMs: number, slot?: SlotRequest) {
    return this.mail.release(lane, nowMs, slot);
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

  countRefusals(counts: RefusalCount[], nowMs: number) {
    return this.usage.countRefusals(counts, nowMs);
  }
  orgUsage(orgId: string, plan: Plan, nowMs: number) {
    return this.usage.orgUsage(orgId, plan, nowMs);
  }

  changedMessages(max: number) {
    return this.outbox.changedMessages(max);
  }
  settle(written: Written[]) {
    return this.outbox.settle(written);
  }

  async holdLease(name: string, owner: string, ttlMs: number): Promise<boolean> {
    return ((await this.redis.hold(keys.lease(name), owner, ttlMs)) as number) === 1;
  }

  watchLanes(on: (signal: LaneSignal) => void): () => void {
    this.watchers.add(on);
    if (!this.subscriber) {
      const sub: RedisClient = this.client instanceof Cluster ? this.client.duplicate() : this.client.duplicate();
      this.subscriber = sub;
      const emit = (signal: LaneSignal) => {
        for (const w of this.watchers) w(signal);
      };
      sub.on("error", () => {});
      sub.on("message", (_channel: string, message: string) => {
        emit(message === "r" ? { kind: "ready" } : { kind: "waiting", lane: Number(message.slice(1)) as Lane });
      });
      // Whatever was signalled while the connection was down is lost: after every (re)connection,
      // once subscribed, everything is taken as signalled, and each watcher looks once.
      sub.on("ready", () => {
        sub
          .subscribe(keys.signals())
          .then(() => {
            for (const lane of LANES) emit({ kind: "waiting", lane });
            emit({ kind: "ready" });
          })
          .catch(() => {});
      });
      sub.connect().catch(() => {}); // it reconnects by itself
    }
    return () => this.watchers.delete(on);
  }

  async ping(): Promise<void> {
    await this.redis.ping();
  }

  async close(): Promise<void> {
    this.subscriber?.disconnect();
    this.redis.disconnect();
  }
}
