import { Cluster, Redis } from "ioredis";
import type { HotStore, StoreLifecycle } from "../hotstore";
import { RedisAdmission } from "./admission";
import { ConfirmedWrites, type WaitPolicy } from "./confirm";
import { RedisLeases } from "./leases";
import { RedisMail } from "./mail";
import { RedisOutbox } from "./outbox";
import { RedisReconcile } from "./reconcile";
import { RedisLaneSignals } from "./signals";
import { type RedisClient, withScripts } from "./scripts";
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
  readonly admission: RedisAdmission;
  readonly mail: RedisMail;
  readonly usage: RedisUsage;
  readonly outbox: RedisOutbox;
  readonly reconcile: RedisReconcile;
  readonly leases: RedisLeases;
  readonly signals: RedisLaneSignals;
  readonly lifecycle: StoreLifecycle;
  private readonly writes: ConfirmedWrites;

  constructor(client: RedisClient, waiting?: RedisWaiting) {
    this.signals = new RedisLaneSignals(client);
    const redis = withScripts(client);
    this.writes = new ConfirmedWrites(
      redis,
      waiting && withScripts(waiting.writer),
      waiting?.policy ?? { replicas: 0, timeoutMs: 0 },
    );
    this.admission = new RedisAdmission(redis, client instanceof Cluster);
    this.mail = new RedisMail(redis, this.writes);
    this.usage = new RedisUsage(redis);
    this.outbox = new RedisOutbox(this.writes);
    this.reconcile = new RedisReconcile(redis, this.writes);
    this.leases = new RedisLeases(redis);
    this.lifecycle = {
      ping: async () => {
        await redis.ping();
      },
      close: async () => {
        this.signals.close();
        this.writes.close();
        redis.disconnect();
      },
    };
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
}
