import { Cluster, Redis } from "ioredis";
import type { Plan } from "../../gen/mailcore/limiter/v1/limiter_pb";
import type { Lane } from "../../gen/mailcore/limiter/v1/mail_pb";
import type { OrgProjection } from "../../model/projection";
import type { MessageHistory } from "../../model/history";
import type {
  AckInput,
  AdmitInput,
  DeliveryPolicy,
  EnqueueInput,
  HotStore,
  LaneSignal,
  MessageRef,
  RefusalCount,
  SlotPlan,
  Written,
} from "../hotstore";
import { RedisAdmission } from "./admission";
import { ConfirmedWrites, type WaitPolicy } from "./confirm";
import { keys } from "./layout";
import { RedisMail } from "./mail";
import { RedisOutbox } from "./outbox";
import { RedisReconcile } from "./reconcile";
import { RedisLaneSignals } from "./signals";
import { type RedisClient, type ScriptedRedis, withScripts } from "./scripts";
import { RedisUsage } from "./usage";

/** Fail fast: no offline queue, short timeouts, endless reconnects. */
const FAST = { enableOfflineQueue: false, maxRetriesPerRequest: 0, commandTimeout: 1_000, lazyConnect: true } as const;

/** The command timeout of the waiting writes' connection: a batch's scripts can queue behind one WAIT, then run their own. */
export const waitingCommandTimeoutMs = (waitTimeoutMs: number) => FAST.commandTimeout + 2 * waitTimeoutMs;

/** Where Sentinel says the primary is: its sentinels, the primary's name and password. */
export interface SentinelTarget {
  sentinels: { host: string; port: number }[];
  name: string;
  password: string | undefined;
}

/**
 * Opens a connection to one Redis primary: at a redis:// or rediss:// URL, or the one the
 * sentinels name (asked again on every reconnect, so a failover is followed).
 */
export async function connectRedis(
  target: string | SentinelTarget,
  o: { connectTimeoutMs?: number; commandTimeoutMs?: number; tlsCa?: Buffer } = {},
): Promise<Redis> {
  const options = {
    ...FAST,
    commandTimeout: o.commandTimeoutMs ?? FAST.commandTimeout,
    enableAutoPipelining: true,
    connectTimeout: o.connectTimeoutMs ?? 2_000,
    // rediss:// alone verifies the server against the system's CAs; tlsCa replaces them.
    ...(o.tlsCa ? { tls: { ca: o.tlsCa } } : {}),
    retryStrategy: (attempt: number) => Math.min(attempt * 100, 1_000),
  };
  const redis =
    typeof target === "string"
      ? new Redis(target, options)
      : new Redis({
          ...options,
          sentinels: target.sentinels,
          name: target.name,
          password: target.password,
          sentinelRetryStrategy: options.retryStrategy,
          // Follow a failover when the sentinels announce it (+switch-master), not when the old
          // primary, still taking writes it can no longer replicate, is finally demoted.
          failoverDetector: true,
          // A primary demoted by a failover refuses writes: ask the sentinels again.
          reconnectOnError: (err) => err.message.startsWith("READONLY"),
        });
  redis.on("error", () => {}); // surfaced per command; the client reconnects by itself
  await redis.connect();
  return redis;
}

/** Opens a Redis Cluster client from its seed nodes (host:port). */
export async function connectRedisCluster(
  nodes: string[],
  o: { connectTimeoutMs?: number; commandTimeoutMs?: number } = {},
): Promise<Cluster> {
  const cluster = new Cluster(
    nodes.map((n) => ({ host: n.slice(0, n.lastIndexOf(":")), port: Number(n.slice(n.lastIndexOf(":") + 1)) })),
    {
      enableAutoPipelining: true,
      enableOfflineQueue: false,
      lazyConnect: true,
      clusterRetryStrategy: (attempt) => Math.min(attempt * 100, 1_000),
      // The per-node connections keep their offline queue: the cluster client queues its slot
      // refresh on a node before that node's connection is up (without it, reconnects hang).
      redisOptions: {
        maxRetriesPerRequest: 0,
        commandTimeout: o.commandTimeoutMs ?? FAST.commandTimeout,
        connectTimeout: o.connectTimeoutMs ?? 2_000,
      },
    },
  );
  cluster.on("error", () => {});
  await cluster.connect();
  return cluster;
}

/**
 * Waiting for replicas: the policy, and a second connection to the same Redis for the waiting
 * writes, whose command timeout leaves room for two waits (a batch queues behind the one before).
 */
export interface RedisWaiting {
  policy: WaitPolicy;
  writer: RedisClient;
}

/**
 * The Redis hot store: every algorithm is one Lua script (scripts.ts), auto-pipelined. Several
 * daemons may share one Redis. Each seam is a part of its own on the one client; with waiting,
 * the changes of messages go through a second one (confirm.ts).
 */
export class RedisHot implements HotStore {
  private readonly redis: ScriptedRedis;
  private readonly writes: ConfirmedWrites;
  private readonly admission: RedisAdmission;
  private readonly mail: RedisMail;
  private readonly usage: RedisUsage;
  private readonly outbox: RedisOutbox;
  private readonly reconcile: RedisReconcile;
  private readonly signals: RedisLaneSignals;

  constructor(redis: RedisClient, waiting?: RedisWaiting) {
    this.signals = new RedisLaneSignals(redis);
    this.redis = withScripts(redis);
    this.writes = new ConfirmedWrites(
      this.redis,
      waiting && withScripts(waiting.writer),
      waiting?.policy ?? { replicas: 0, timeoutMs: 0 },
    );
    this.admission = new RedisAdmission(this.redis, redis instanceof Cluster);
    this.mail = new RedisMail(this.redis, this.writes);
    this.usage = new RedisUsage(this.redis);
    this.outbox = new RedisOutbox(this.writes);
    this.reconcile = new RedisReconcile(this.redis, this.writes);
  }

  /** Resolves once the store knows how many replicas a change waits for. */
  async ready(): Promise<void> {
    await this.writes.ready;
  }

  /** The replicas a change of a message waits for now (WAIT), 0 when none. */
  waitingFor(): number {
    return this.writes.waitingFor();
  }

  /** Calls on(replicas) whenever the count waited for changes (under "detect"). */
  watchWaiting(on: (replicas: number) => void): void {
    this.writes.watch(on);
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
  release(lane: Lane, nowMs: number, plan: SlotPlan) {
    return this.mail.release(lane, nowMs, plan);
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

  presence(messages: MessageRef[]) {
    return this.reconcile.presence(messages);
  }
  restore(messages: MessageHistory[], nowMs: number) {
    return this.reconcile.restore(messages, nowMs);
  }
  unfinishedHere() {
    return this.reconcile.unfinishedHere();
  }
  drop(stale: Written[]) {
    return this.reconcile.drop(stale);
  }

  /**
   * Not through the confirmed writes: a lease a failover loses is taken again by the next
   * daemon to look, and two holders overlap until the first one's next renewal finds it held
   * by another (their work is atomic scripts on the shared state, a lane's slots included, and
   * idempotent writes of the records); whereas a renewal that waited would fail while the
   * replica is cut off, and every singleton (the lanes' schedulers, the records writer, the
   * reconciliation) would stop with it.
   */
  async holdLease(name: string, owner: string, ttlMs: number): Promise<boolean> {
    return ((await this.redis.hold(keys.lease(name), owner, ttlMs)) as number) === 1;
  }

  watchLanes(on: (signal: LaneSignal) => void): () => void {
    return this.signals.watchLanes(on);
  }

  async ping(): Promise<void> {
    await this.redis.ping();
  }

  async close(): Promise<void> {
    this.signals.close();
    this.writes.close();
    this.redis.disconnect();
  }
}
