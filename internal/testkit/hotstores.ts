// The hot store adapters the conformance suites run against: all of them, always.
import { afterAll, beforeAll } from "bun:test";
import type { Clock } from "../clock/clock";
import { Plan } from "../gen/mailcore/limiter/v1/limiter_pb";
import { Lane } from "../gen/mailcore/limiter/v1/mail_pb";
import { EmbeddedHot } from "../hotstore/embedded/embedded";
import type {
  AdmissionStore,
  DeliveryPolicy,
  EnqueueInput,
  EnqueueResult,
  HotStore,
  MailStore,
  QueueCap,
} from "../hotstore/hotstore";
import { connectRedis, connectRedisCluster, RedisHot, waitingCommandTimeoutMs } from "../hotstore/redis/redis";
import {
  type RedisClusterServer,
  type RedisServer,
  startRedis,
  startRedisCluster,
  startRedisWithReplica,
} from "./testkit";

export interface HotStoreServers {
  /** A redis-server of the test's own. */
  redisUrl(): string;
  /** The seed nodes of a Redis Cluster of the test's own. */
  clusterNodes(): string[];
  /** A redis-server with a replica of its own. */
  replicatedUrl(): string;
}

export function hotStores(servers: HotStoreServers): [string, () => Promise<HotStore>][] {
  return [
    ["embedded", async () => new EmbeddedHot(null)],
    [
      "redis",
      async () => {
        const redis = await connectRedis(servers.redisUrl());
        await redis.flushall(); // each test starts from an empty Redis, as the embedded one does
        return new RedisHot(redis);
      },
    ],
    [
      // Every change of a message through the batches that wait for the replica (WAIT).
      "redis waiting for a replica",
      async () => {
        const url = servers.replicatedUrl();
        const redis = await connectRedis(url);
        await redis.flushall();
        const writer = await connectRedis(url, { commandTimeoutMs: waitingCommandTimeoutMs(1_000) });
        const hot = new RedisHot(redis, { policy: { replicas: "detect", timeoutMs: 1_000 }, writer });
        await hot.ready();
        if (hot.waitingFor() !== 1) throw new Error("the replica was not found");
        return hot;
      },
    ],
    [
      "redis cluster",
      async () => {
        const cluster = await connectRedisCluster(servers.clusterNodes());
        await Promise.all(cluster.nodes("master").map((node) => node.flushall()));
        return new RedisHot(cluster);
      },
    ],
  ];
}

/** A redis-server and a Redis Cluster of the test file's own: started before its tests, stopped after them. */
export function hotStoreServers(): HotStoreServers {
  let redis: RedisServer | undefined;
  let cluster: RedisClusterServer | undefined;
  let replicated: Awaited<ReturnType<typeof startRedisWithReplica>> | undefined;
  beforeAll(async () => {
    [redis, cluster, replicated] = await Promise.all([startRedis(), startRedisCluster(), startRedisWithReplica()]);
  }, 30_000); // six redis-servers, the cluster's forming and the replica's sync, on a busy machine
  afterAll(async () => {
    await Promise.all([redis?.stop(), cluster?.stop(), replicated?.stop()]);
  });
  return {
    redisUrl: () => redis!.url,
    clusterNodes: () => cluster!.nodes,
    replicatedUrl: () => replicated!.primary.url,
  };
}

const MIN = 60_000;
const HOUR = 60 * MIN;

/** The guards the suites send under: 5 in 10 minutes, 20 in 24 hours per mailbox. */
const SUITE_GUARDS = { shortMax: 5, shortWindowMs: 10 * MIN, longMax: 20, longWindowMs: 24 * HOUR };
/** A queue cap no suite reaches but the one about it. */
export const SUITE_QUEUE_CAP: QueueCap = { messages: 1_000_000, bytes: 1_000_000_000 };

/** The delivery policy of the suites: 3 attempts, retries after 1 s then 2 s, an hour of bounce cooldown. */
export const SUITE_POLICY: DeliveryPolicy = { maxAttempts: 3, retryBaseMs: 1_000, bounceCooldownMs: HOUR };

/** An organization as the daemon projects it (plan FREE), by default with the verified domain d.example. */
export function projectSuiteOrg(admission: AdmissionStore, id: string, version = 1, verifiedDomains = ["d.example"]) {
  return admission.projectOrg({ id, slug: `slug-${id}`, plan: Plan.FREE, version, verifiedDomains });
}

/** The n-th message of a suite: transactional, from d.example to user@example.com, checked and counted by the guards. */
function suiteMessage(orgId: string, messageId: string, n: number, over: Partial<EnqueueInput>): EnqueueInput {
  return {
    orgId,
    messageId,
    lane: Lane.TRANSACTIONAL,
    payload: JSON.stringify({ n }),
    from: "Sender <s@d.example>",
    to: "user@example.com",
    subject: `message ${n}`,
    tags: [],
    fromDomain: "d.example",
    mailbox: "user@example.com",
    checkCooldown: true,
    countGuards: true,
    guards: SUITE_GUARDS,
    queueCap: SUITE_QUEUE_CAP,
    ...over,
  };
}

/** Where a suite's test sends: its store's mail seam, clock and organization (fresh for each test), and the prefix of its message ids. */
export interface SendingTest {
  mail: MailStore;
  clock: Clock;
  org: string;
  idPrefix: string;
}

/** The sends of a suite's tests: the next message (numbered across the suite) to the test's organization, and draining a lane. */
export function suiteSends(current: () => SendingTest) {
  const sends = {
    /** The number of the last message sent. */
    ids: 0,
    send(over: Partial<EnqueueInput> = {}): Promise<EnqueueResult> {
      const n = ++sends.ids;
      const { mail, clock, org, idPrefix } = current();
      return mail.enqueue(suiteMessage(org, `${idPrefix}_${n}`, n, over), clock.nowMs());
    },
    /** Releases everything waiting in a lane and returns the org ids in release order. */
    async drain(lane: Lane): Promise<string[]> {
      const { mail, clock } = current();
      const order: string[] = [];
      for (let r = await releaseNext(mail, lane, clock.nowMs()); r; r = await releaseNext(mail, lane, clock.nowMs()))
        order.push(r.orgId);
      return order;
    },
  };
  return sends;
}

/** Releases a lane's next message whatever its slot (at 40 a second); null when the lane is empty. */
export async function releaseNext(mail: Pick<MailStore, "release">, lane: Lane, nowMs: number) {
  const batch = await mail.release(lane, nowMs, { ratePerSecond: 40, untilMs: nowMs + 3_600_000, max: 1 });
  return batch.released[0] ?? null;
}
